package attach

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// TestVerifyHost (manual: FTPROBE_VERIFY_HOST=1) loads the kprobe program
// with the --arg/--filter interpreter enabled and prints the verifier's
// statistics.
func TestVerifyHost(t *testing.T) {
	if os.Getenv("FTPROBE_VERIFY_HOST") == "" {
		t.Skip("manual")
	}
	for _, x := range [][3]uint8{{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}, {1, 1, 1}} {
		spec, err := bpfobj.LoadTrace()
		if err != nil {
			t.Fatal(err)
		}
		spec.Variables["x_entry"].Set(x[0])
		spec.Variables["x_exit"].Set(x[1])
		spec.Variables["x_vals"].Set(x[2])
		for _, name := range []string{"ftp_kprobe", "ftp_kretprobe"} {
			ps := spec.Programs[name]
			coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
				Programs: map[string]*ebpf.ProgramSpec{name: ps}}, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
			if err != nil {
				fmt.Printf("%v %s: %v\n", x, name, err)
				continue
			}
			p := coll.Programs[name]
			lines := strings.Split(strings.TrimSpace(p.VerifierLog), "\n")
			fmt.Printf("%v %s: %s\n", x, name, strings.Join(lines[max(0, len(lines)-3):], " | "))
			p.Close()
			coll.Close()
		}
	}
}
