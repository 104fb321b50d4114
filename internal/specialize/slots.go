package specialize

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// FnSlotsAny is bpf/trace.bpf.c's FTP_FN_SLOTS_ANY ("ftp_slot"): the
// 64-bit immediate fn_slots() loads, which ForFunc replaces by the number
// of argument registers of the function a trampoline program is loaded
// for. A program that keeps it reads the arguments through
// bpf_get_func_arg.
const FnSlotsAny = 0x746f6c735f707466

// FnSlotsNone is the fn_slots() of a program loaded for several
// functions (the multi programs, SimplifyPrograms): more than
// FTP_MAX_ARGS, no count.
const FnSlotsNone = uint64(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)

// FnScalarsAny is bpf/trace.bpf.c's FTP_FN_SCALARS_ANY ("ftp_scal"): the
// 64-bit immediate fn_scalars() loads, which ForFunc replaces by the mask
// of the arguments a direct ctx read gives as plain scalars.
const FnScalarsAny = 0x6c6163735f707466

// isImm reports whether ins is a plain 64-bit immediate load of v.
func isImm(ins *asm.Instruction, v uint64) bool {
	return ins.OpCode.IsDWordLoad() && ins.Src == asm.R0 && uint64(ins.Constant) == v
}

// CountImm counts the plain 64-bit immediate loads of v in insns.
func CountImm(insns asm.Instructions, v uint64) int {
	n := 0
	for i := range insns {
		if isImm(&insns[i], v) {
			n++
		}
	}
	return n
}

// ForFunc returns a copy of ps for one function, with every fn_slots()
// immediate set to slots and every fn_scalars() one to scalars, then
// simplified (the branches on them decided), and whether it set any. The
// caller decides the values (attach.FuncSlots, attach.FuncScalars) and
// sets AttachTo on the copy; ps is left as it is.
func ForFunc(ps *ebpf.ProgramSpec, slots, scalars uint64) (*ebpf.ProgramSpec, bool) {
	c := ps.Copy()
	patched := false
	for i := range c.Instructions {
		switch ins := &c.Instructions[i]; {
		case isImm(ins, FnSlotsAny):
			ins.Constant = int64(slots)
			patched = true
		case isImm(ins, FnScalarsAny):
			ins.Constant = int64(scalars)
			patched = true
		}
	}
	if patched {
		c.Instructions, _ = Simplify(c.Instructions)
	}
	return c, patched
}
