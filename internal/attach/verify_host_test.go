package attach

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
)

// TestVerifyHost (manual: FTPROBE_VERIFY_HOST=1) loads the kprobe programs
// with the --arg value interpreter and a compiled --filter predicate
// (xpred: an integer comparison and a string comparison through two
// reads, at entry; a comparison of ret at exit) and prints the verifier's
// statistics.
func TestVerifyHost(t *testing.T) {
	if os.Getenv("FTPROBE_VERIFY_HOST") == "" {
		t.Skip("manual")
	}
	for _, c := range []struct {
		obj    string
		x      [3]uint8
		scalar bool // registers only: the predicates inlined (Predicates.Inline)
	}{{"general", [3]uint8{0, 0, 0}, false}, {"general", [3]uint8{0, 0, 1}, false}, {"general", [3]uint8{0, 1, 0}, false}, {"general", [3]uint8{1, 0, 0}, false}, {"general", [3]uint8{1, 1, 1}, false},
		{"filter", [3]uint8{1, 0, 0}, false}, {"filter", [3]uint8{0, 1, 0}, false}, {"filter", [3]uint8{1, 1, 0}, false},
		{"general", [3]uint8{1, 1, 0}, true}, {"filter", [3]uint8{1, 0, 0}, true}, {"filter", [3]uint8{1, 1, 0}, true}} {
		x := c.x
		load := bpfobj.LoadTrace
		if c.obj == "filter" {
			load = bpfobj.LoadTraceFilter
		}
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		spec.Variables["x_entry"].Set(x[0])
		spec.Variables["x_exit"].Set(x[1])
		if v := spec.Variables["x_vals"]; v != nil {
			v.Set(x[2])
		}
		spec.Variables["leaf_records"].Set(uint8(1)) // trace's default
		// Function 0: an integer and a string comparison through two
		// reads at entry, ret at exit. Function 1: the worst case, 8
		// comparisons each through two reads, at entry.
		plan := &expr.Plan{Terms: []expr.Term{
			{Fetch: expr.Fetch{Src: 2, Size: 8}, Op: expr.OpEQ, K: 1},
			{Fetch: expr.Fetch{Loads: []int32{72, 40}, Size: 8, Str: true}, Op: expr.OpSEQ, S: "hostname"},
			{Fetch: expr.Fetch{Src: expr.SrcRet, Size: 8, Signed: true}, Op: expr.OpEQ, K: ^uint64(1)},
		}, EntryOps: []byte{expr.BoolPush, expr.BoolPush | 1, expr.BoolAnd}, ExitOps: []byte{expr.BoolPush | 2}}
		wide := &expr.Plan{}
		for i := 0; i < expr.MaxTerms; i++ {
			wide.Terms = append(wide.Terms, expr.Term{Fetch: expr.Fetch{Loads: []int32{int32(8 * i), 16}, Size: 4}, Op: expr.OpGT, K: uint64(i)})
			wide.EntryOps = append(wide.EntryOps, expr.BoolPush|byte(i))
			if i > 0 {
				wide.EntryOps = append(wide.EntryOps, expr.BoolOr)
			}
		}
		// As attach.Open does: the settings inlined, then the predicates.
		inlined, err := inlineRodata(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %v: %d .rodata loads inlined", c.obj, x, inlined)
		plans := map[uint32]*expr.Plan{0: plan, 1: wide}
		if c.scalar {
			// count == 1 at entry, ret == -2 at exit; 8 comparisons of
			// arguments and ret at entry of function 1.
			scalar := &expr.Plan{Terms: []expr.Term{plan.Terms[0], plan.Terms[2]}, EntryOps: []byte{expr.BoolPush}, ExitOps: []byte{expr.BoolPush | 1}}
			many := &expr.Plan{}
			for i := 0; i < expr.MaxTerms; i++ {
				many.Terms = append(many.Terms, expr.Term{Fetch: expr.Fetch{Src: uint8(i % 6), Size: 4}, Op: expr.OpGT, K: uint64(i)})
				many.EntryOps = append(many.EntryOps, expr.BoolPush|byte(i))
				if i > 0 {
					many.EntryOps = append(many.EntryOps, expr.BoolAnd)
				}
			}
			plans = map[uint32]*expr.Plan{0: scalar, 1: many}
		}
		pr, err := expr.CompilePredicates(plans, mustFaults(t, spec))
		if err != nil {
			t.Fatal(err)
		}
		if c.scalar != (pr.Inline != nil) {
			t.Fatalf("scalar %v: inline code %v", c.scalar, pr.Inline != nil)
		}
		if err := patchPredicates(spec, pr); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %v: %d instructions simplified", c.obj, x, simplifyPrograms(spec))
		for _, name := range []string{"ftp_kprobe", "ftp_kretprobe"} {
			ps := spec.Programs[name]
			coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
				Programs: map[string]*ebpf.ProgramSpec{name: ps}}, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
			if err != nil {
				t.Errorf("%s %v %s: %v", c.obj, x, name, err)
				continue
			}
			p := coll.Programs[name]
			lines := strings.Split(strings.TrimSpace(p.VerifierLog), "\n")
			fmt.Printf("%s %v scalar %v %s: %s\n", c.obj, x, c.scalar, name, strings.Join(lines[max(0, len(lines)-3):], " | "))
			p.Close()
			coll.Close()
		}
	}
}

// TestVerifyHostLean (manual: FTPROBE_VERIFY_HOST=1) loads the lean
// object's kprobe programs as Open does for a plain trace, and the stat
// object's for stat (frames in task storage and in the hash).
func TestVerifyHostLean(t *testing.T) {
	if os.Getenv("FTPROBE_VERIFY_HOST") == "" {
		t.Skip("manual")
	}
	for _, c := range []struct {
		want string
		opts Options
		hash bool
	}{
		{"lean", Options{RingbufSize: 1 << 20}, false},
		{"stat", Options{RingbufSize: 1 << 20, NoEvents: true, Aggregate: true}, false},
		{"stat", Options{RingbufSize: 1 << 20, NoEvents: true, Aggregate: true}, true},
	} {
		verifyVariant(t, c.want, c.opts, c.hash)
	}
}

func verifyVariant(t *testing.T, want string, opts Options, hash bool) {
	settings, err := settingsOf(opts, hash)
	if err != nil {
		t.Fatal(err)
	}
	v := variantOf(settings)
	if v.name != want {
		t.Fatalf("%s options take the %s object", want, v.name)
	}
	spec, err := v.load()
	if err != nil {
		t.Fatal(err)
	}
	if err := setSettings(spec, settings, v.fixed); err != nil {
		t.Fatal(err)
	}
	inlined, err := inlineRodata(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d .rodata loads inlined, %d instructions simplified", inlined, simplifyPrograms(spec))
	for _, name := range []string{"ftp_kprobe", "ftp_kretprobe"} {
		ps := spec.Programs[name]
		coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
			Programs: map[string]*ebpf.ProgramSpec{name: ps}}, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
		if err != nil {
			t.Fatalf("%s %s (hash %v): %+v", want, name, hash, err)
		}
		p := coll.Programs[name]
		lines := strings.Split(strings.TrimSpace(p.VerifierLog), "\n")
		fmt.Printf("%s (hash %v) %s: %s\n", want, hash, name, strings.Join(lines[max(0, len(lines)-3):], " | "))
		p.Close()
		coll.Close()
	}
}
