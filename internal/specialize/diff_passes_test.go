package specialize

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
)

// diffPasses returns orig after the passes attach runs on a trace
// program: InlineRodata (rodata nil: not run; else the frozen .rodata),
// PatchPredicates with pr (spliced in when specialize, as the
// subprogram otherwise) and, when specialize, Simplify.
func diffPasses(orig asm.Instructions, rodata []byte, pr *expr.Predicates, specialize bool) (asm.Instructions, error) {
	spec := &ebpf.CollectionSpec{
		Maps:      map[string]*ebpf.MapSpec{},
		Programs:  map[string]*ebpf.ProgramSpec{"prog": {Name: "prog", Instructions: slices.Clone(orig)}},
		ByteOrder: binary.LittleEndian,
	}
	if rodata != nil {
		spec.Maps[".rodata"] = &ebpf.MapSpec{Name: ".rodata", Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(rodata)),
			MaxEntries: 1, Contents: []ebpf.MapKV{{Key: uint32(0), Value: rodata}}}
		if _, err := InlineRodata(spec); err != nil {
			return nil, err
		}
	}
	if err := PatchPredicates(spec, pr, specialize); err != nil {
		return nil, err
	}
	insns := spec.Programs["prog"].Instructions
	if specialize {
		insns, _ = Simplify(insns)
	}
	return insns, nil
}

// diffProto is the function the predicates are compiled for:
// long f(u64 a, int b, unsigned int c).
var diffProto = &btf.FuncProto{
	Return: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed},
	Params: []btf.FuncParam{
		{Name: "a", Type: &btf.Int{Name: "long long unsigned int", Size: 8}},
		{Name: "b", Type: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}},
		{Name: "c", Type: &btf.Int{Name: "unsigned int", Size: 4}},
	},
}

// diffPredicateSources are the --filter sets the differential test
// compiles with internal/expr, one predicate per function (ID 1, 2, ...):
// each set one xpred body, its programs picked by sel.
var diffPredicateSources = [][]string{
	{"a == 1"},
	{"b < 0 || c > 100", "a > 4096 && ret == -11", "!(c == 3) && b != -1"},
	{"a == 0x5eedf11e5eedf11e || !(c < 3)", "ret >= 0 && b == 7"},
}

// diffPredicates compiles diffPredicateSources (expr.CompilePredicates,
// as attach does; the fault counter in .bss).
var diffPredicates = sync.OnceValue(func() []*expr.Predicates {
	var out []*expr.Predicates
	for _, srcs := range diffPredicateSources {
		plans := map[uint32]*expr.Plan{}
		for i, src := range srcs {
			set, err := expr.ParseSet(nil, []string{src})
			if err != nil {
				panic(err)
			}
			p, skip, err := set.CompileFunc(&expr.Env{Func: "f", Proto: diffProto})
			if err != nil || len(skip) > 0 {
				panic(fmt.Sprint(src, err, skip))
			}
			plans[uint32(i+1)] = p
		}
		pr, err := expr.CompilePredicates(plans, expr.FaultCounter{Map: ".bss", Off: 32, Rows: 4, RowBytes: 8})
		if err != nil || pr == nil || pr.Inline == nil {
			panic(fmt.Sprint(srcs, err, pr))
		}
		out = append(out, pr)
	}
	return out
})

// TestDiffHelpersCovered: the interpreter models every helper and kfunc
// the trace objects call (and the predicate code's helpers).
func TestDiffHelpersCovered(t *testing.T) {
	kfuncs := map[string]bool{"bpf_session_is_return": true, "bpf_session_cookie": true}
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){
		"trace": bpfobj.LoadTrace, "lean": bpfobj.LoadTraceLean, "filter": bpfobj.LoadTraceFilter, "stat": bpfobj.LoadTraceStat,
	} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for pname, ps := range spec.Programs {
			for _, ins := range ps.Instructions {
				switch {
				case ins.IsBuiltinCall():
					if _, ok := diffHelperArgs[asm.BuiltinFunc(ins.Constant)]; !ok {
						t.Errorf("%s %s calls %v, which the interpreter does not model", name, pname, asm.BuiltinFunc(ins.Constant))
					}
					n++
				case ins.IsKfuncCall() && !kfuncs[ins.Reference()]:
					t.Errorf("%s %s calls kfunc %s, which the interpreter does not model", name, pname, ins.Reference())
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no helper call found", name)
		}
	}
}
