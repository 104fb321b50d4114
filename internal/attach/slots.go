package attach

import (
	"errors"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// fnSlotsAny is bpf/trace.bpf.c's FTP_FN_SLOTS_ANY ("ftp_slot"): the
// 64-bit immediate fn_slots() loads, which forFunc replaces by the number
// of argument registers of the function a trampoline program is loaded
// for. A program that keeps it reads the arguments through
// bpf_get_func_arg.
const fnSlotsAny = 0x746f6c735f707466

// fnSlotsNone is the fn_slots() of a program loaded for several
// functions (the multi programs, simplifyPrograms): more than
// FTP_MAX_ARGS, no count.
const fnSlotsNone = uint64(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)

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

// fnScalarsAny is bpf/trace.bpf.c's FTP_FN_SCALARS_ANY ("ftp_scal"): the
// 64-bit immediate fn_scalars() loads, which forFunc replaces by
// FuncScalars.
const fnScalarsAny = 0x6c6163735f707466

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

// isImm reports whether ins is a plain 64-bit immediate load of v.
func isImm(ins *asm.Instruction, v uint64) bool {
	return ins.OpCode.IsDWordLoad() && ins.Src == asm.R0 && uint64(ins.Constant) == v
}

// countImm counts the plain 64-bit immediate loads of v in insns.
func countImm(insns asm.Instructions, v uint64) int {
	n := 0
	for i := range insns {
		if isImm(&insns[i], v) {
			n++
		}
	}
	return n
}

// forFunc returns a copy of ps for the one function f, with every
// fn_slots() immediate set to FuncSlots(f) and every fn_scalars() one to
// FuncScalars(f) when f has a count (the lean and filter objects'
// fentry, fexit and fsession programs), and whether it set any. The
// caller sets AttachTo on the copy.
func forFunc(ps *ebpf.ProgramSpec, f *symbols.Func) (*ebpf.ProgramSpec, bool) {
	c := ps.Copy()
	n, ok := FuncSlots(f)
	if !ok {
		return c, false
	}
	sc := scalarMask(f.Proto.Params[:n])
	patched := false
	for i := range c.Instructions {
		switch ins := &c.Instructions[i]; {
		case isImm(ins, fnSlotsAny):
			ins.Constant = int64(n)
			patched = true
		case isImm(ins, fnScalarsAny):
			ins.Constant = int64(sc)
			patched = true
		}
	}
	if patched {
		c.Instructions, _ = simplify(c.Instructions)
	}
	return c, patched
}
