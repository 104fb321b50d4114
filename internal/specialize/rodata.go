package specialize

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// InlineRodata replaces each load of a frozen .rodata variable (the
// settings attach wrote: filters, want_*, x_*) by its value, in every
// program of spec. clang reads such a variable with a 64-bit map-value load
// of its address and a load through it; the verifier knows the value (the
// map is frozen) and removes the branches it decides, but the JIT still
// emits the address (3-4 arm64 instructions) and the load for each read: on
// arm64 7.3 about 15% of the fentry+fexit trace programs' instructions per
// call without inlining (scripts/insnprof). The pair
//
//	rX = map_value(.rodata + off); rX = *(uN *)(rX + k)
//
// becomes rX = VALUE (a 64-bit immediate) and a `ja +0`, which the verifier
// drops (opt_remove_nops, 5.3): the same number of slots, so every jump
// offset stays right; so does `rX = address; rY = *(rX + k)` when no path
// reads rX again (deadAfter), as rY = VALUE. Other shapes (the address
// kept for several loads, a load that is a jump target, a function's first
// instruction) are left as they are. Call it after the variables are set
// and before the programs load; the values are read in spec.ByteOrder.
// Returns the number of loads replaced.
func InlineRodata(spec *ebpf.CollectionSpec) (int, error) {
	ro := spec.Maps[".rodata"]
	if ro == nil || len(ro.Contents) != 1 {
		return 0, nil
	}
	raw, ok := ro.Contents[0].Value.([]byte)
	if !ok {
		return 0, fmt.Errorf("inline .rodata: contents of type %T", ro.Contents[0].Value)
	}
	// The values as they will load: a VariableSpec keeps its own bytes,
	// which cilium/ebpf writes over the section's at load.
	data := slices.Clone(raw)
	for _, v := range spec.Variables {
		if v.SectionName != ".rodata" || v.Value == nil {
			continue
		}
		if int(v.Offset)+len(v.Value) > len(data) {
			return 0, fmt.Errorf("inline .rodata: variable %s past the section's %d bytes", v.Name, len(data))
		}
		copy(data[v.Offset:], v.Value)
	}
	bo := spec.ByteOrder
	if bo == nil {
		bo = binary.NativeEndian
	}
	total := 0
	for name, ps := range spec.Programs {
		// A copy: the spec's instructions may be shared (ProgramSpec.Copy).
		insns, n, err := inlineRodataInsns(slices.Clone(ps.Instructions), data, bo)
		if err != nil {
			return 0, fmt.Errorf("inline .rodata in %s: %w", name, err)
		}
		ps.Instructions = insns
		total += n
	}
	return total, nil
}

// inlineRodataInsns rewrites insns in place and returns them with each
// dead address (inlineKeptAddress) as two `ja +0`: one instruction more
// per address, the same slots.
func inlineRodataInsns(insns asm.Instructions, data []byte, bo binary.ByteOrder) (asm.Instructions, int, error) {
	// Slot of each instruction, and every jump target (in slots; a jump
	// to the next instruction is none: the load and its use are never
	// split by one, the load being that instruction).
	slots, index, targets := layout(insns)
	n := 0
	for i := 0; i+1 < len(insns); i++ {
		ld, mem := insns[i], insns[i+1]
		if !ld.IsLoadFromMap() || ld.Src != asm.PseudoMapValue || ld.Reference() != ".rodata" || ld.Symbol() != "" {
			continue
		}
		if mem.OpCode.Class() != asm.LdXClass || mem.OpCode.Mode() != asm.MemMode ||
			mem.Src != ld.Dst || targets[slots[i+1]] || mem.Symbol() != "" || relocated(&ld) || relocated(&mem) {
			continue
		}
		if mem.Dst != ld.Dst {
			// The address is in a register of its own: only when nothing
			// reads it after this load, on any path.
			budget := 64
			if !deadAfter(insns, slots, index, i+2, ld.Dst, &budget) {
				continue
			}
		}
		v, err := rodataValue(data, int(uint32(uint64(ld.Constant)>>32))+int(mem.Offset), mem, bo)
		if err != nil {
			return insns, n, err
		}
		imm := asm.LoadImm(mem.Dst, int64(v), asm.DWord)
		if src := ld.Source(); src != nil {
			imm = imm.WithSource(src)
		}
		insns[i] = imm
		insns[i+1] = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
		n++
		i++
	}
	// The address kept in a register for several loads (clang reads
	// filter_tid this way: once to test it against zero, once to compare):
	// each load through it becomes a one-slot move of its value, and the
	// address itself two `ja +0` once nothing else reads it.
	dead := map[int]bool{}
	for i := 0; i < len(insns); i++ {
		ld := insns[i]
		if !ld.IsLoadFromMap() || ld.Src != asm.PseudoMapValue || ld.Reference() != ".rodata" || ld.Symbol() != "" || relocated(&ld) {
			continue
		}
		m, isDead, err := inlineKeptAddress(insns, slots, index, targets, i, data, bo)
		if err != nil {
			return insns, n, err
		}
		n += m
		if isDead {
			dead[i] = true
		}
	}
	if len(dead) == 0 {
		return insns, n, nil
	}
	// A dead address: two `ja +0` in its two slots, which the verifier
	// drops (opt_remove_nops), the first keeping its source line.
	out := make(asm.Instructions, 0, len(insns)+len(dead))
	for i, ins := range insns {
		if !dead[i] {
			out = append(out, ins)
			continue
		}
		nop := asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
		first := nop
		if src := ins.Source(); src != nil {
			first = nop.WithSource(src)
		}
		out = append(out, first, nop)
	}
	return out, n, nil
}

// inlineKeptAddress replaces the loads through the .rodata address that
// instruction i (a 64-bit map-value load into rX) leaves in rX, within its
// basic block: `rY = *(uN *)(rX + k)` becomes `wY = VALUE` (sizes 1-4:
// a 32-bit move, zero-extended as the load) or `rY = VALUE` (size 8, when
// the value fits a sign-extended 32-bit immediate), in the same slot; the
// block runs on past conditional jumps (their fall-through has no other
// way in) and, for r6-r9, past calls. When
// every read of rX was such a load and no path reads rX later, the address
// load is dead (the caller replaces it with two `ja +0`). Returns the
// number of loads replaced and whether the address is dead.
func inlineKeptAddress(insns asm.Instructions, slots []int, index map[int]int, targets map[int]bool, i int, data []byte, bo binary.ByteOrder) (int, bool, error) {
	ld := insns[i]
	rx := ld.Dst
	base := int(uint32(uint64(ld.Constant) >> 32))
	n := 0
	other := false     // rX read by something this does not replace
	dead := false      // rX written before any other read
	var branches []int // where the conditional jumps passed go
	j := i + 1
scan:
	for ; j < len(insns); j++ {
		if targets[slots[j]] {
			break // another path joins: its rX is not known here
		}
		ins := insns[j]
		op := ins.OpCode
		regSrc := op.Source() == asm.RegSource
		switch c := op.Class(); {
		case c == asm.LdXClass && op.Mode() == asm.MemMode && ins.Src == rx && ins.Symbol() == "" && !relocated(&ins):
			v, err := rodataValue(data, base+int(ins.Offset), ins, bo)
			if err != nil {
				return n, false, err
			}
			mov := asm.Mov.Imm32(ins.Dst, int32(uint32(v))) // zero-extended, as the load
			if op.Size() == asm.DWord {
				if int64(v) != int64(int32(v)) {
					other = true
					if ins.Dst == rx {
						break scan
					}
					continue
				}
				mov = asm.Mov.Imm(ins.Dst, int32(v))
			}
			if src := ins.Source(); src != nil {
				mov = mov.WithSource(src)
			}
			insns[j] = mov
			n++
			if ins.Dst == rx {
				dead = true
				break scan
			}
		case !c.IsJump():
			switch effectOn(ins, rx) {
			case readsReg:
				other = true
				break scan
			case writesReg:
				dead = true
				break scan
			case unknownEffect:
				break scan // an atomic, a legacy load: the scan ends
			}
		case op.JumpOp() == asm.Call:
			// A call reads r1-r5 (as many as the function takes) and
			// writes r0-r5; r6-r9 pass through it.
			if rx >= asm.R1 && rx <= asm.R5 {
				other = true
				break scan
			}
			if rx == asm.R0 {
				dead = true
				break scan
			}
		case op.JumpOp() == asm.Exit:
			other = rx == asm.R0
			dead = !other
			break scan
		case op.JumpOp() != asm.Ja:
			// A conditional jump: the fall-through path is still this
			// block's (no other path joins it); rX must be dead where
			// the jump goes.
			if ins.Dst == rx || (regSrc && ins.Src == rx) {
				other = true
				break scan
			}
			t, ok := index[slots[j]+1+jumpOffset(ins)]
			if !ok {
				other = true
				break scan
			}
			branches = append(branches, t)
		default:
			break scan // ja: the scan ends
		}
	}
	if n == 0 || other {
		return n, false, nil
	}
	return n, deadBeyond(insns, slots, index, rx, dead, j, branches), nil
}

// deadBeyond reports whether rx is dead where inlineKeptAddress's scan
// left the block: at j unless the block wrote it (dead), and at every
// conditional jump's target it passed (branches).
func deadBeyond(insns asm.Instructions, slots []int, index map[int]int, rx asm.Register, dead bool, j int, branches []int) bool {
	budget := 256
	if !dead && !deadAfter(insns, slots, index, j, rx, &budget) {
		return false
	}
	for _, t := range branches {
		if !deadAfter(insns, slots, index, t, rx, &budget) {
			return false
		}
	}
	return true
}

func jumpOffset(ins asm.Instruction) int {
	if ins.OpCode.JumpOp() == asm.Ja && ins.OpCode.Class() == asm.Jump32Class {
		return int(ins.Constant) // gotol
	}
	return int(ins.Offset)
}

// deadAfter reports whether reg is written before it is read on every path
// from instruction i, within budget instructions in all (a path that runs
// out, meets a helper or BPF-to-BPF call that may read it, or an
// instruction this does not model, counts as a read).
func deadAfter(insns asm.Instructions, slots []int, index map[int]int, i int, reg asm.Register, budget *int) bool {
	for ; i < len(insns); i++ {
		if *budget <= 0 {
			return false
		}
		*budget--
		ins := insns[i]
		op := ins.OpCode
		regSrc := op.Source() == asm.RegSource
		if !op.Class().IsJump() {
			switch effectOn(ins, reg) {
			case readsReg, unknownEffect:
				return false
			case writesReg:
				return true
			}
			continue
		}
		switch op.JumpOp() {
		case asm.Exit:
			return reg != asm.R0
		case asm.Call:
			// A helper without arguments reads no register and
			// clobbers r0-r5 (the BPF calling convention); any other
			// call may read r1-r5.
			if !noArgHelper(ins) {
				return false
			}
			if reg <= asm.R5 {
				return true
			}
		case asm.Ja:
			t, ok := index[slots[i]+1+jumpOffset(ins)]
			if !ok {
				return false
			}
			i = t - 1
		default:
			if ins.Dst == reg || (regSrc && ins.Src == reg) {
				return false
			}
			t, ok := index[slots[i]+1+jumpOffset(ins)]
			if !ok || !deadAfter(insns, slots, index, t, reg, budget) {
				return false
			}
		}
	}
	return false
}

// noArgHelper reports whether ins calls a helper that takes no
// arguments (include/uapi/linux/bpf.h: "u64 bpf_get_current_pid_tgid(void)"
// and the others listed).
func noArgHelper(ins asm.Instruction) bool {
	if !ins.IsBuiltinCall() {
		return false
	}
	switch asm.BuiltinFunc(ins.Constant) {
	case asm.FnGetCurrentPidTgid, asm.FnGetCurrentUidGid, asm.FnKtimeGetNs, asm.FnKtimeGetBootNs,
		asm.FnKtimeGetCoarseNs, asm.FnKtimeGetTaiNs, asm.FnGetSmpProcessorId, asm.FnGetNumaNodeId,
		asm.FnGetCurrentTask, asm.FnGetCurrentTaskBtf, asm.FnGetPrandomU32, asm.FnJiffies64,
		asm.FnGetCurrentCgroupId:
		return true
	}
	return false
}

// rodataValue reads the value a load of ins's size at .rodata+at gives.
func rodataValue(data []byte, at int, ins asm.Instruction, bo binary.ByteOrder) (uint64, error) {
	size := int(ins.OpCode.Size().Sizeof())
	if size <= 0 || at < 0 || at+size > len(data) {
		return 0, fmt.Errorf("load of %d bytes at .rodata+%d, past its %d bytes", size, at, len(data))
	}
	switch size {
	case 1:
		return uint64(data[at]), nil
	case 2:
		return uint64(bo.Uint16(data[at:])), nil
	case 4:
		return uint64(bo.Uint32(data[at:])), nil
	}
	return bo.Uint64(data[at:]), nil
}

// regEffect is what an instruction does to one register.
type regEffect int

const (
	noEffect      regEffect = iota
	readsReg                // reads it (whether or not it also writes it)
	writesReg               // writes it without reading it
	unknownEffect           // not modelled: an atomic, a legacy packet load
)

// effectOn says what ins, not a jump, does to reg.
func effectOn(ins asm.Instruction, reg asm.Register) regEffect {
	op := ins.OpCode
	switch c := op.Class(); {
	case c.IsALU():
		if (op.Source() == asm.RegSource && ins.Src == reg) || (op.ALUOp() != asm.Mov && ins.Dst == reg) {
			return readsReg
		}
		if ins.Dst == reg {
			return writesReg
		}
	case c == asm.LdXClass:
		if op.Mode() != asm.MemMode && op.Mode() != asm.MemSXMode {
			return unknownEffect
		}
		if ins.Src == reg {
			return readsReg
		}
		if ins.Dst == reg {
			return writesReg
		}
	case c == asm.LdClass:
		if !op.IsDWordLoad() {
			return unknownEffect // legacy packet loads
		}
		if ins.Dst == reg {
			return writesReg
		}
	case c == asm.StClass || c == asm.StXClass:
		if op.Mode() == asm.AtomicMode {
			return unknownEffect // may read and write r0 and src (cmpxchg, fetch)
		}
		if ins.Dst == reg || (c == asm.StXClass && ins.Src == reg) {
			return readsReg
		}
	default:
		return unknownEffect
	}
	return noEffect
}
