package trace

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/rings"
)

// The default record buffer of each CPU (--buffer-size unset): RingbufTotal
// shared by the online CPUs, rounded down to a power of two, from
// RingbufMinPerCPU to RingbufMaxPerCPU. A CPU's buffer holds the burst of
// a thread on it while the reader catches up: 32 MiB is twice the smallest
// that delivered every event of trace vfs_read (fentry+fexit and fsession,
// text and JSON) during 2x100k one-byte reads in the 2-CPU lab VM under
// instruction counting (without instruction counting, on a loaded host,
// 16 MiB dropped 3.7%).
const (
	RingbufTotal     = 256 << 20
	RingbufMinPerCPU = 1 << 20
	RingbufMaxPerCPU = 32 << 20
)

// DefaultRingbufSize is the size of each CPU's record buffer for ncpu online
// CPUs, by the rule of RingbufTotal.
func DefaultRingbufSize(ncpu int) uint32 {
	share := uint64(RingbufTotal) / uint64(max(ncpu, 1))
	p := uint64(RingbufMaxPerCPU)
	for p > share && p > RingbufMinPerCPU {
		p >>= 1
	}
	return uint32(p)
}

// onlineCPUs counts the online CPUs (those this process may run on when
// /sys/devices/system/cpu/online cannot be read).
func onlineCPUs() int {
	cpus, err := rings.OnlineCPUs()
	if err != nil || len(cpus) == 0 {
		return runtime.NumCPU()
	}
	return len(cpus)
}

// dropsAdvice says, when the kernel dropped records because the ringbuf
// of size bytes was full, what keeps the reader up; "" without drops.
func dropsAdvice(l attach.Losses, size uint32) string {
	if l.RingbufDrops == 0 {
		return ""
	}
	ring := "record buffer"
	if size > 0 {
		ring = attach.SizeText(uint64(size)) + " record buffer"
	}
	return fmt.Sprintf("ftprobe: the %s of a CPU filled faster than ftprobe read it (%d ringbuf drops%s): "+
		"a larger --buffer-size holds longer bursts (up to %s per CPU); --min-duration or --errors send one record per kept call, "+
		"at its exit; stat counts in the kernel and sends none", ring, l.RingbufDrops, byCPU(l.RingbufDropsByCPU), attach.SizeText(attach.MaxRingbufSizeFor(rings.OnlineSlots())))
}

// byCPU lists drops by CPU, "; CPU 0: 12, CPU 3: 4", or "" for none.
func byCPU(m map[int]uint64) string {
	cpus := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for i, c := range cpus {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%sCPU %d: %d", sep, c, m[c])
	}
	return b.String()
}
