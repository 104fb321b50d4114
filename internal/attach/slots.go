package attach

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/specialize"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// protoRegs returns the number of parameters of f's BTF prototype, at
// most MaxArgs, and false when that is not its number of argument
// registers or not known: no prototype, a compiler copy (ProtoErr), a
// struct passed by value (one parameter in one or two registers) or
// variadic. FuncSlots and onlyNargs start from it.
func protoRegs(f *symbols.Func) (int, bool) {
	if f == nil || f.Proto == nil || f.ProtoErr != "" || f.Proto.StructByValue != "" || f.Proto.Varargs {
		return 0, false
	}
	return min(len(f.Proto.Params), MaxArgs), true
}

// FuncSlots returns the number of argument registers (at most MaxArgs)
// the trampoline programs loaded for f alone (fentry, fexit: 5.5;
// fsession: 7.0) may read straight from their ctx, and false
// when its prototype does not say: no BTF prototype, a compiler copy, a
// struct passed by value (one parameter in one or two registers: the
// kernel's btf_ctx_access counts registers, the records count
// parameters) or variadic. The verifier checks each ctx read against the
// same BTF prototype (kernel/bpf/btf.c, btf_ctx_access), so a count from
// it cannot read past the function's arguments.
//
// Each of those parameters must also be one every supported kernel's
// btf_ctx_access reads (symbols.Param.CtxScalar): 6.12 refuses a direct
// read of a pointer to a pointer or to a function (ip_make_skb's getfrag,
// "invalid bpf_context access off=16 size=8", TestWideFunctions), which
// 7.3 allows (amd64 6.1 takes pointers to integers). A kernel that
// refuses one all the same fails the load (loadForFunc).
func FuncSlots(f *symbols.Func) (uint64, bool) {
	n, ok := protoRegs(f)
	if !ok {
		return 0, false
	}
	for _, p := range f.Proto.Params[:n] {
		if !p.CtxScalar {
			return 0, false
		}
	}
	return uint64(n), true
}

// FuncScalars returns the arguments among FuncSlots(f)'s (bit i: argument
// i) that are integers, enums or bools: a direct ctx read gives those a
// plain scalar, which an entry --filter may mask and compare (fetch_pred
// in bpf/trace.bpf.c), where a pointer read that way gets its BTF type
// and the verifier refuses that arithmetic on it. 0 when FuncSlots has no
// count for f.
func FuncScalars(f *symbols.Func) uint64 {
	n, ok := FuncSlots(f)
	if !ok {
		return 0
	}
	return scalarMask(f.Proto.Params[:n])
}

// scalarMask is FuncScalars for the parameters FuncSlots counted.
func scalarMask(params []symbols.Param) uint64 {
	var m uint64
	for i, p := range params {
		switch p.Kind {
		case symbols.ArgInt, symbols.ArgUint, symbols.ArgBool, symbols.ArgEnum:
			m |= 1 << i
		}
	}
	return m
}

// loadForFunc loads ps for the one function f through load, which gets
// the copy to load (AttachTo set to f's BTF name), with f's argument
// count patched in (forFunc) when FuncSlots has one and n does not ask
// for the programs as compiled. Whether to patch is decided before the
// load, from f's BTF prototype (FuncSlots, symbols.Param.CtxScalar),
// never by retrying: a verifier refusal of the patched copy is an error
// naming the program and saying so (a kernel whose btf_ctx_access
// refuses a parameter CtxScalar admits is a bug of CtxScalar's, which
// FTPROBE_SPECIALIZE=off works around). The caller must Close the
// program. n (nil: patched, not counted) counts the programs loaded each
// way.
func loadForFunc(ps *ebpf.ProgramSpec, f *symbols.Func, n *SlotLoads, load func(*ebpf.ProgramSpec) (*ebpf.Program, error)) (*ebpf.Program, error) {
	c, patched := ps.Copy(), false
	if n == nil || !n.AsCompiled {
		c, patched = forFunc(ps, f)
	}
	c.AttachTo = f.BTFName
	p, err := load(c)
	var ve *ebpf.VerifierError
	if err != nil && patched && errors.As(err, &ve) {
		return nil, fmt.Errorf("%s with its argument count patched in (%d registers read from ctx; FTPROBE_SPECIALIZE=off loads it as compiled): %w",
			ps.Name, slotsOf(f), err)
	}
	if err == nil && n != nil {
		switch {
		case patched:
			n.Direct.Add(1)
		case specialize.CountImm(ps.Instructions, specialize.FnSlotsAny) > 0:
			n.Compiled.Add(1)
		}
	}
	return p, err
}

// slotsOf is FuncSlots's count for f (0 when it has none).
func slotsOf(f *symbols.Func) uint64 {
	n, _ := FuncSlots(f)
	return n
}

// SlotLoads says how the per-function trampoline programs (fentry,
// fexit, fsession) that read fn_slots() are loaded: AsCompiled, set
// before any load, asks for every one as compiled (specialization off);
// Direct counts those loaded with their argument count patched in (the
// arguments read straight from ctx, forFunc), Compiled those loaded as
// compiled (bpf_get_func_arg: no count from the prototype, or
// AsCompiled; same results, ~65 arm64 instructions more per
// fentry+fexit call). The counters are safe for concurrent use.
type SlotLoads struct {
	AsCompiled       bool
	Direct, Compiled atomic.Int64
}

// forFunc returns a copy of ps for the one function f, with its
// argument count and scalar mask patched in (specialize.ForFunc) when
// FuncSlots has a count for f, and whether it patched any.
func forFunc(ps *ebpf.ProgramSpec, f *symbols.Func) (*ebpf.ProgramSpec, bool) {
	n, ok := FuncSlots(f)
	if !ok {
		return ps.Copy(), false
	}
	return specialize.ForFunc(ps, n, scalarMask(f.Proto.Params[:n]))
}

// specializeSpec rewrites spec's programs before load (package
// specialize), settings set: .rodata inlined, the --filter predicates
// pr spliced into their callers (or put in as the called subprogram),
// the settings' decisions folded; it returns the instructions Simplify
// changed. off (FTPROBE_SPECIALIZE=off) puts the predicates in as the
// subprogram and does nothing else.
func specializeSpec(spec *ebpf.CollectionSpec, pr *expr.Predicates, off bool) (int, error) {
	if off {
		if err := specialize.PatchPredicates(spec, pr, false); err != nil {
			return 0, fmt.Errorf("attach: %w", err)
		}
		return 0, nil
	}
	if _, err := specialize.InlineRodata(spec); err != nil {
		return 0, fmt.Errorf("attach: %w", err)
	}
	if err := specialize.PatchPredicates(spec, pr, true); err != nil {
		return 0, fmt.Errorf("attach: %w", err)
	}
	return specialize.SimplifyPrograms(spec, isMultiProgram), nil
}
