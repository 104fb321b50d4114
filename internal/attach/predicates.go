package attach

import (
	"errors"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
)

// FaultCounterOf is where the compiled --filter predicates of spec (the
// trace object, bpfobj.LoadTrace) count a faulted read: this CPU's
// FTP_STAT_X_FAULT counter in ftp_stats (statsRows' layout).
func FaultCounterOf(spec *ebpf.CollectionSpec) (expr.FaultCounter, error) {
	v := spec.Variables["ftp_stats"]
	var rows statsRows
	if v == nil || int(v.Size()) != int(unsafe.Sizeof(rows)) {
		return expr.FaultCounter{}, errors.New("BPF object lacks ftp_stats of the expected size")
	}
	return expr.FaultCounter{Map: v.SectionName, Off: v.Offset + uint32(bpfobj.TraceFtpStatFTP_STAT_X_FAULT)*8,
		Rows: uint32(len(rows)), RowBytes: uint32(len(rows[0]) * 8)}, nil
}
