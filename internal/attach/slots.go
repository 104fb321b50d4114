package attach

import (
	"errors"
	"sync/atomic"

	"github.com/cilium/ebpf"

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
// 7.3 allows. A kernel that refuses one all the same gets the program as
// compiled (loadForFunc).
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
// the copy to load (AttachTo set to f's BTF name): with f's argument
// count patched in (forFunc) when it has one, and again as compiled
// (bpf_get_func_arg) when the verifier refuses that (an
// *ebpf.VerifierError): the kernel, not FuncSlots's reading of
// btf_ctx_access, decides. Other errors (EPERM, a missing target) are
// returned at once. The error is the last load's; the caller must Close
// the program. n (nil: not counted) counts the programs loaded each way.
func loadForFunc(ps *ebpf.ProgramSpec, f *symbols.Func, n *SlotLoads, load func(*ebpf.ProgramSpec) (*ebpf.Program, error)) (*ebpf.Program, error) {
	c, patched := forFunc(ps, f)
	c.AttachTo = f.BTFName
	p, err := load(c)
	var ve *ebpf.VerifierError
	if err == nil || !patched || !errors.As(err, &ve) {
		if err == nil && patched && n != nil {
			n.Direct.Add(1)
		}
		return p, err // loaded, nothing was patched, or not the verifier's refusal
	}
	c = ps.Copy()
	c.AttachTo = f.BTFName
	p, err = load(c)
	if err == nil && n != nil {
		n.Refused.Add(1)
	}
	return p, err
}

// SlotLoads counts the per-function trampoline programs (fentry, fexit,
// fsession) loaded with their argument count patched in (Direct: the
// arguments read straight from ctx, forFunc) and those whose patched
// copy the verifier refused, loaded as compiled instead (Refused:
// bpf_get_func_arg; same results, ~65 arm64 instructions more per
// fentry+fexit call). Safe for concurrent use.
type SlotLoads struct {
	Direct, Refused atomic.Int64
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
