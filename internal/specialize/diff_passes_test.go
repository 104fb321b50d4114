package specialize

import (
	"encoding/binary"
	"fmt"
	"math/rand"
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

// forFuncProg is fetch_pred's shape (bpf/trace.bpf.c) for 6 arguments
// into u64 a[6] at r10-48, r0 their xor: with fn_slots() a count (at
// most 6), a[i] = ctx[i] for i below it, else 0; else with fn_scalars()
// a mask, a[i] = ctx[i] for its bits; else bpf_get_func_arg(ctx, i, &a[i])
// for i below bpf_get_func_arg_cnt(ctx), else 0.
func forFuncProg() asm.Instructions {
	var insns asm.Instructions
	labels, fix := map[string]int{}, map[int]string{}
	emit := func(ins ...asm.Instruction) { insns = append(insns, ins...) }
	jump := func(ins asm.Instruction, to string) { fix[len(insns)] = to; emit(ins) }
	label := func(l string) { labels[l] = len(insns) }
	emit(asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"), asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadImm(asm.R7, int64(FnSlotsAny), asm.DWord), asm.LoadImm(asm.R8, int64(FnScalarsAny), asm.DWord))
	for i := range 6 {
		l := func(s string) string { return fmt.Sprint(s, i) }
		slot := int16(-48 + 8*i)
		read := []asm.Instruction{asm.LoadMem(asm.R1, asm.R6, int16(8*i), asm.DWord), asm.StoreMem(asm.R10, slot, asm.R1, asm.DWord)}
		jump(asm.JGT.Imm(asm.R7, 6, ""), l("any"))
		jump(asm.JLE.Imm(asm.R7, int32(i), ""), l("zero"))
		emit(read...)
		jump(asm.Ja.Label(""), l("next"))
		label(l("any"))
		jump(asm.JEq.Imm(asm.R8, 0, ""), l("fetch"))
		jump(asm.JGE.Imm(asm.R8, 64, ""), l("fetch"))
		emit(asm.Mov.Reg(asm.R1, asm.R8), asm.And.Imm(asm.R1, 1<<i))
		jump(asm.JEq.Imm(asm.R1, 0, ""), l("fetch"))
		emit(read...)
		jump(asm.Ja.Label(""), l("next"))
		label(l("fetch"))
		emit(asm.Mov.Reg(asm.R1, asm.R6), asm.FnGetFuncArgCnt.Call())
		jump(asm.JLE.Imm(asm.R0, int32(i), ""), l("zero"))
		emit(asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, int32(i)), asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(slot)),
			asm.FnGetFuncArg.Call())
		jump(asm.Ja.Label(""), l("next"))
		label(l("zero"))
		emit(stImm(asm.R10, slot, 0, asm.DWord))
		label(l("next"))
	}
	emit(asm.Mov.Imm(asm.R0, 0))
	for i := range int16(6) {
		emit(asm.LoadMem(asm.R1, asm.R10, -48+8*i, asm.DWord), asm.LSh.Imm(asm.R0, 1), asm.Xor.Reg(asm.R0, asm.R1))
	}
	emit(asm.Return())
	slots := make([]int, len(insns)+1)
	for i, ins := range insns {
		slots[i+1] = slots[i] + int(ins.Size()/asm.InstructionSize)
	}
	for at, to := range fix {
		insns[at] = insns[at].WithReference("")
		insns[at].Offset = int16(slots[labels[to]] - slots[at] - 1)
	}
	return insns
}

// TestForFuncDiff: the program with fn_slots() and fn_scalars() as
// compiled (arguments through bpf_get_func_arg) and as ForFunc patches
// it for a function of nargs arguments (straight from ctx, as many as
// it has) compute the same arguments, on random ctx.
func TestForFuncDiff(t *testing.T) {
	orig := forFuncProg()
	r := rand.New(rand.NewSource(1))
	for c := range 2000 {
		env := newDiffEnv(r, c, make([]byte, 64))
		slots, scalars := uint64(FnSlotsAny), uint64(FnScalarsAny)
		if r.Intn(4) > 0 {
			slots = env.nargs
		}
		if r.Intn(4) > 0 {
			scalars = r.Uint64() & (1<<env.nargs - 1)
		}
		ps, patched := ForFunc(&ebpf.ProgramSpec{Instructions: orig}, slots, scalars)
		if !patched {
			t.Fatal("ForFunc patched nothing")
		}
		a, err := diffRun(orig, env)
		if err != nil {
			t.Fatal(err)
		}
		b, err := diffRun(ps.Instructions, env)
		if err == nil && (a.reg[0] != b.reg[0] || !slices.Equal(a.mem[len(diffRegions)], b.mem[len(diffRegions)])) {
			err = fmt.Errorf("r0 %#x, then %#x; stack %x, then %x", a.reg[0], b.reg[0], a.mem[len(diffRegions)][464:], b.mem[len(diffRegions)][464:])
		}
		if err != nil {
			t.Fatalf("case %d, %d arguments, fn_slots %#x, fn_scalars %#x: %v\n%v", c, env.nargs, slots, scalars, err, ps.Instructions)
		}
	}
}
