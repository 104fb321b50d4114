package specialize

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// The settings a program reads are immediates once InlineRodata has run
// (and ForFunc has patched a function's argument count), and the verifier
// then drops every branch they decide. It leaves the moves that fed those
// branches, and the values computed only for the paths it dropped: 10-20
// JIT instructions per program run on the predicate's rejection path
// (insnprof, arm64 and amd64 7.3, fentry+fexit), which the
// verifier's own opt_remove_dead_code and opt_remove_nops (kernel/bpf/
// verifier.c) keep because they remove unreachable instructions only.
// Simplify does both steps before load: a conditional jump whose operands
// are known constants becomes `ja` (taken) or `ja +0` (not taken), the
// instructions no path reaches then are deleted (the verifier's check_cfg
// refuses unreachable instructions; jumps are re-aimed, calls are by
// symbol), and a register write (ALU, move, 64-bit immediate) that no path
// reads becomes `ja +0`, which the verifier removes (opt_remove_nops).
// Known values are followed across blocks (a forward dataflow), through
// 8-byte stack spills and registers holding stack addresses, and a
// computation or fill whose value is known becomes the move of it, so its
// operands' writes can go too: the cookie's fields, decided on one side
// of a branch and tested after the join, fold this way (the rejecting
// predicate body, docs/benchmarks.md). fold_diff_test.go
// checks Simplify against an interpreter on random programs.

// SimplifyPrograms runs Simplify on every program of spec, after giving
// the fn_slots() and fn_scalars() immediates of the programs multi names
// (those loaded for several functions) the values that mean "not one
// function" (ForFunc never patches them: the kernel refuses their ctx
// reads, bpf_multi_func has no parameters), so that the branches on them
// fold too. It returns how many instructions it changed.
func SimplifyPrograms(spec *ebpf.CollectionSpec, multi func(name string) bool) int {
	n := 0
	for name, ps := range spec.Programs {
		if multi(name) {
			for i := range ps.Instructions {
				switch ins := &ps.Instructions[i]; {
				case isImm(ins, FnSlotsAny):
					ins.Constant = int64(FnSlotsNone)
				case isImm(ins, FnScalarsAny):
					ins.Constant = 0
				}
			}
		}
		var k int
		ps.Instructions, k = Simplify(ps.Instructions)
		n += k
	}
	return n
}

// Simplify returns a copy of insns with decided jumps folded and dead
// register writes turned into `ja +0`, and how many instructions it
// changed.
func Simplify(in asm.Instructions) (asm.Instructions, int) {
	insns := append(make(asm.Instructions, 0, len(in)), in...)
	total := 0
	for round := 0; round < 8; round++ {
		n := foldJumps(insns)
		var u, d int
		var ok bool
		if insns, u, ok = dropUnreachable(insns); !ok {
			return in, 0 // a reference this does not model: as compiled
		}
		insns, d = dropDeadWrites(insns)
		total += n + u + d
		if n+u+d == 0 {
			break
		}
	}
	return insns, total
}

// nopLike returns a `ja +0` with ins's metadata (its symbol, source line
// and function info stay where they were).
func nopLike(ins asm.Instruction) asm.Instruction {
	nop := asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
	nop.Metadata = ins.Metadata
	return nop
}

// layout returns the slot of each instruction, the instruction of each
// slot, and the slots jumps go to.
func layout(insns asm.Instructions) (slots []int, index map[int]int, targets map[int]bool) {
	slots = make([]int, len(insns))
	index = map[int]int{}
	targets = map[int]bool{}
	pos := 0
	for i, ins := range insns {
		slots[i] = pos
		index[pos] = i
		pos += int(ins.Size() / asm.InstructionSize)
	}
	for i, ins := range insns {
		if !ins.OpCode.Class().IsJump() {
			continue
		}
		if op := ins.OpCode.JumpOp(); op == asm.Call || op == asm.Exit {
			continue
		}
		if off := jumpOffset(ins); off != 0 {
			// A jump to the next instruction enters it with the state it
			// falls through with: not a block start (InlineRodata leaves
			// `rX = VALUE; ja +0` before the jump that tests the setting).
			targets[slots[i]+1+off] = true
		}
	}
	return slots, index, targets
}

// successors returns where control goes after insns[i] within its
// function: fall, the next instruction (-1 after the last one, an exit or
// an unconditional jump), and jump, a jump's target (-1 for none). A call
// (helper, kfunc or BPF-to-BPF) falls through. ok is false for a jump
// into a 64-bit immediate's second slot. The one control-flow rule of
// foldJumps, dropUnreachable and dropDeadWrites.
func successors(insns asm.Instructions, slots []int, index map[int]int, i int) (fall, jump int, ok bool) {
	fall = i + 1
	if fall >= len(insns) {
		fall = -1
	}
	op := insns[i].OpCode
	if !op.Class().IsJump() {
		return fall, -1, true
	}
	switch op.JumpOp() {
	case asm.Exit:
		return -1, -1, true
	case asm.Call:
		return fall, -1, true
	}
	jump, ok = index[slots[i]+1+jumpOffset(insns[i])]
	if !ok {
		return -1, -1, false
	}
	if op.JumpOp() == asm.Ja {
		fall = -1
	}
	return fall, jump, true
}

// constState is what foldJumps knows before an instruction: the
// registers r0-r9 holding known values or known addresses in the stack
// (r10 plus an offset), and the 8-byte stack slots (by offset from r10)
// a 64-bit store of a known value wrote and nothing has written since.
type constState struct {
	kind  [10]regKind
	val   [10]uint64 // the value (regConst) or the offset from r10 (regFP)
	stack map[int16]uint64
}

type regKind uint8

const (
	regUnknown regKind = iota
	regConst
	regFP
)

func (st *constState) copy() constState {
	c := *st
	c.stack = make(map[int16]uint64, len(st.stack))
	for k, v := range st.stack {
		c.stack[k] = v
	}
	return c
}

// meet keeps what st and o both know with the same value; it reports
// whether st changed.
func (st *constState) meet(o *constState) bool {
	changed := false
	for r := range st.kind {
		if st.kind[r] != regUnknown && (o.kind[r] != st.kind[r] || o.val[r] != st.val[r]) {
			st.kind[r] = regUnknown
			changed = true
		}
	}
	for k, v := range st.stack {
		if w, ok := o.stack[k]; !ok || w != v {
			delete(st.stack, k)
			changed = true
		}
	}
	return changed
}

func (st *constState) reset() {
	st.kind = [10]regKind{}
	st.stack = map[int16]uint64{}
}

func (st *constState) set(r asm.Register, v uint64) {
	if r <= asm.R9 {
		st.kind[r], st.val[r] = regConst, v
	}
}

func (st *constState) setFP(r asm.Register, off int64) {
	if r <= asm.R9 {
		st.kind[r], st.val[r] = regFP, uint64(off)
	}
}

func (st *constState) forget(r asm.Register) {
	if r <= asm.R9 {
		st.kind[r] = regUnknown
	}
}

func (st *constState) reg(r asm.Register) (uint64, bool) {
	if r > asm.R9 || st.kind[r] != regConst {
		return 0, false
	}
	return st.val[r], true
}

// fp returns the offset from r10 of the stack address r holds.
func (st *constState) fp(r asm.Register) (int64, bool) {
	if r == asm.R10 {
		return 0, true
	}
	if r > asm.R9 || st.kind[r] != regFP {
		return 0, false
	}
	return int64(st.val[r]), true
}

// clobberStack forgets the slots a store of size bytes at r10+off
// overlaps.
func (st *constState) clobberStack(off int64, size int64) {
	for k := range st.stack {
		if int64(k) < off+size && off < int64(k)+8 {
			delete(st.stack, k)
		}
	}
}

// clobberThrough forgets what a write of size bytes through the address
// in r may change: the slots it overlaps when r is a known stack
// address, all of them otherwise (it may point into the stack).
func (st *constState) clobberThrough(r asm.Register, off int16, size int64) {
	if base, ok := st.fp(r); ok {
		st.clobberStack(base+int64(off), size)
		return
	}
	st.stack = map[int16]uint64{}
}

// call applies a helper, kfunc or BPF-to-BPF call: r0-r5 are clobbered,
// and the stack is written through its pointer arguments: one 8-byte
// slot for bpf_get_func_arg (r3) and bpf_get_func_ret (r2), nothing for
// a helper without arguments, possibly any slot for the others.
func (st *constState) call(ins *asm.Instruction) {
	switch {
	case noArgHelper(*ins):
	case ins.IsBuiltinCall() && asm.BuiltinFunc(ins.Constant) == asm.FnGetFuncArg:
		st.clobberThrough(asm.R3, 0, 8)
	case ins.IsBuiltinCall() && asm.BuiltinFunc(ins.Constant) == asm.FnGetFuncRet:
		st.clobberThrough(asm.R2, 0, 8)
	default:
		st.stack = map[int16]uint64{}
	}
	for r := asm.R0; r <= asm.R5; r++ {
		st.forget(r)
	}
}

// step applies ins to st. For a conditional jump whose operands st knows
// it returns decided and whether the jump is taken.
func (st *constState) step(ins *asm.Instruction) (taken, decided bool) {
	op := ins.OpCode
	switch c := op.Class(); {
	case op == asm.InvalidOpCode:
		st.reset()
	case c.IsALU():
		st.stepALU(ins)
	case c == asm.LdClass:
		if op.IsDWordLoad() && ins.Src == asm.R0 && ins.Reference() == "" && !patchedLater(ins) && !relocated(ins) {
			st.set(ins.Dst, uint64(ins.Constant))
		} else if op.IsDWordLoad() {
			st.forget(ins.Dst)
		} else {
			st.reset()
		}
	case c == asm.LdXClass:
		st.stepLoad(ins)
	case c == asm.StClass || c == asm.StXClass:
		st.stepStore(ins)
	case c.IsJump():
		return st.stepJump(ins)
	default:
		st.reset()
	}
	return false, false
}

// stepALU applies an ALU instruction.
func (st *constState) stepALU(ins *asm.Instruction) {
	op, c, dst := ins.OpCode, ins.OpCode.Class(), ins.Dst
	if dst > asm.R9 {
		st.reset()
		return
	}
	if relocated(ins) {
		st.forget(dst) // a CO-RE value, rewritten at load
		return
	}
	// A stack address: r10 or a copy of one, moved or offset by an
	// immediate (ALU64).
	if c == asm.ALU64Class && ins.Offset == 0 {
		if base, ok := st.fp(ins.Src); ok && op.Source() == asm.RegSource && op.ALUOp() == asm.Mov {
			st.setFP(dst, base)
			return
		}
		if base, ok := st.fp(dst); ok && op.Source() == asm.ImmSource {
			switch op.ALUOp() {
			case asm.Add:
				st.setFP(dst, base+ins.Constant)
				return
			case asm.Sub:
				st.setFP(dst, base-ins.Constant)
				return
			}
		}
	}
	var src uint64
	srcKnown := true
	if op.Source() == asm.RegSource {
		src, srcKnown = st.reg(ins.Src)
	} else {
		src = uint64(ins.Constant) // sign-extended imm
	}
	d, dKnown := st.reg(dst)
	if v, ok := aluFold(op, ins.Offset, dKnown, d, srcKnown, src, c == asm.ALU64Class); ok {
		st.set(dst, v)
	} else {
		st.forget(dst)
	}
}

// stepLoad applies a load from memory: a fill of a known 8-byte spill
// gives its value.
func (st *constState) stepLoad(ins *asm.Instruction) {
	if relocated(ins) {
		// a CO-RE field offset, rewritten at load: the slot it
		// reads is not known before then
		st.forget(ins.Dst)
		return
	}
	op := ins.OpCode
	base, isFP := st.fp(ins.Src)
	at := base + int64(ins.Offset)
	v, ok := st.stack[int16(at)]
	if isFP && ok && op.Mode() == asm.MemMode && op.Size() == asm.DWord && int64(int16(at)) == at {
		st.set(ins.Dst, v) // a fill of a known spill
	} else {
		st.forget(ins.Dst)
	}
}

// stepStore applies a store or an atomic: the slots it may write are
// forgotten, an 8-byte store of a known value at a known stack address
// remembered.
func (st *constState) stepStore(ins *asm.Instruction) {
	op, c := ins.OpCode, ins.OpCode.Class()
	size := int64(op.Size().Sizeof())
	if relocated(ins) {
		// a store at a CO-RE field offset, rewritten at load: any slot
		st.stack = map[int16]uint64{}
	} else {
		st.clobberThrough(ins.Dst, ins.Offset, size)
	}
	if op.Mode() == asm.AtomicMode {
		// fetch and xchg write src, cmpxchg r0, load-acquire
		// (cilium's asm.LoadAcquire) dst, store-release memory
		st.forget(ins.Src)
		st.forget(ins.Dst)
		st.forget(asm.R0)
		return
	}
	if relocated(ins) {
		return
	}
	base, isFP := st.fp(ins.Dst)
	at := base + int64(ins.Offset)
	if !isFP || size != 8 || op.Mode() != asm.MemMode || int64(int16(at)) != at {
		return
	}
	if c == asm.StClass {
		st.stack[int16(at)] = uint64(ins.Constant)
	} else if v, ok := st.reg(ins.Src); ok {
		st.stack[int16(at)] = v
	}
}

// stepJump applies a jump, call or exit; a conditional jump on known
// operands is decided.
func (st *constState) stepJump(ins *asm.Instruction) (taken, decided bool) {
	op := ins.OpCode
	jop := op.JumpOp()
	switch jop {
	case asm.Call:
		st.call(ins)
		return false, false
	case asm.Exit, asm.Ja:
		return false, false
	}
	a, ok := st.reg(ins.Dst)
	if !ok {
		return false, false
	}
	var b uint64
	if op.Source() == asm.RegSource {
		if b, ok = st.reg(ins.Src); !ok {
			return false, false
		}
	} else {
		b = uint64(ins.Constant)
	}
	return jumpTaken(jop, a, b, op.Class() == asm.Jump32Class)
}

// foldJumps replaces the conditional jumps whose operands are known by
// `ja` or `ja +0`: immediates moved or loaded into registers, copies and
// simple arithmetic of them, spilled to the stack and filled, followed
// across basic blocks (a forward dataflow over the program's jumps: a
// value is known at a block when every path into it gives it the same).
// A function (an instruction with a symbol) starts knowing nothing.
func foldJumps(insns asm.Instructions) int {
	slots, index, targets := layout(insns)
	leader := make([]bool, len(insns)+1)
	leader[0] = true
	for i, ins := range insns {
		if targets[slots[i]] || ins.Symbol() != "" {
			leader[i] = true
		}
		if op := ins.OpCode; op.Class().IsJump() && op.JumpOp() != asm.Call {
			leader[i+1] = true
		}
	}
	// in[i]: the state at leader i; nil until a path reaches it.
	in := make([]*constState, len(insns))
	var work []int
	enter := func(i int, st *constState) {
		if i >= len(insns) {
			return
		}
		if in[i] == nil {
			c := st.copy()
			in[i] = &c
			work = append(work, i)
		} else if in[i].meet(st) {
			work = append(work, i)
		}
	}
	empty := constState{stack: map[int16]uint64{}}
	for i, ins := range insns {
		if i == 0 || ins.Symbol() != "" {
			enter(i, &empty)
		}
	}
	for len(work) > 0 {
		b := work[len(work)-1]
		work = work[:len(work)-1]
		st := in[b].copy()
		for i := b; i < len(insns); i++ {
			if i > b && leader[i] {
				if insns[i].Symbol() == "" {
					enter(i, &st)
				}
				break
			}
			ins := &insns[i]
			st.step(ins)
			op := ins.OpCode
			if !op.Class().IsJump() || op.JumpOp() == asm.Call {
				continue
			}
			fall, jump, ok := successors(insns, slots, index, i)
			if !ok {
				// a jump into a 64-bit immediate's second slot: fold
				// nothing (dropUnreachable leaves such programs alone)
				return 0
			}
			if jump >= 0 {
				enter(jump, &st)
			}
			if fall >= 0 {
				enter(fall, &st)
			}
			break
		}
	}
	return rewriteKnown(insns, leader, in)
}

// rewriteKnown replaces, from the states at the leaders (in), each
// computation or fill of a known value by the move of it and each
// decided jump by `ja` or `ja +0`; it returns how many it replaced.
func rewriteKnown(insns asm.Instructions, leader []bool, in []*constState) int {
	n := 0
	var st constState
	for i := range insns {
		if leader[i] {
			if in[i] == nil {
				st = constState{stack: map[int16]uint64{}} // unreachable
			} else {
				st = in[i].copy()
			}
		}
		ins := &insns[i]
		taken, ok := st.step(ins)
		if c := ins.OpCode.Class(); (c.IsALU() || c == asm.LdXClass) && !relocated(ins) {
			if v, known := st.reg(ins.Dst); known {
				if mov, fits := movImm(ins.Dst, v, c != asm.ALUClass); fits && mov.OpCode != ins.OpCode {
					// a computation of known operands, or a fill of a
					// known spill: its result, and the operands' own
					// writes may then go (dropDeadWrites)
					mov.Metadata = ins.Metadata
					*ins = mov
					n++
				}
			}
		}
		if !ok {
			continue
		}
		meta := ins.Metadata
		if taken {
			*ins = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource), Offset: ins.Offset}
		} else {
			*ins = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
		}
		ins.Metadata = meta
		n++
	}
	return n
}

// movImm returns the move of the immediate v into dst: a 64-bit move of
// a sign-extended 32-bit immediate (wide), or a 32-bit move, which zeroes
// the upper half; fits is false when v is neither.
func movImm(dst asm.Register, v uint64, wide bool) (mov asm.Instruction, fits bool) {
	if wide {
		if int64(v) != int64(int32(v)) {
			return asm.Instruction{}, false
		}
		return asm.Mov.Imm(dst, int32(v)), true
	}
	if v>>32 != 0 {
		return asm.Instruction{}, false
	}
	return asm.Mov.Imm32(dst, int32(uint32(v))), true
}

// relocated reports whether ins carries a CO-RE relocation
// (bpf_core_field_exists and the like: an immediate cilium/ebpf rewrites
// at load, after Simplify): its value is not known, and it stays.
func relocated(ins *asm.Instruction) bool {
	return btf.CORERelocationMetadata(ins) != nil
}

// patchedLater reports whether ins is an immediate ForFunc replaces per
// function (fn_slots, fn_scalars): unknown until then.
func patchedLater(ins *asm.Instruction) bool {
	return isImm(ins, FnSlotsAny) || isImm(ins, FnScalarsAny)
}

// dropUnreachable deletes the instructions no path from the program's
// first instruction reaches (through jumps, falls and BPF-to-BPF calls,
// so an uncalled subprogram goes too) and re-aims the jumps over them. ok
// is false, and insns unchanged, when a call or jump is not one this
// models (a call by raw offset, a jump by symbol).
func dropUnreachable(insns asm.Instructions) (asm.Instructions, int, bool) {
	slots, index, _ := layout(insns)
	start := map[string]int{}
	for i, ins := range insns {
		if s := ins.Symbol(); s != "" {
			start[s] = i
		}
	}
	reach := make([]bool, len(insns))
	var work []int
	push := func(i int) {
		if i >= 0 && i < len(insns) && !reach[i] {
			reach[i] = true
			work = append(work, i)
		}
	}
	target := func(i int) (int, bool) {
		t, ok := index[slots[i]+1+jumpOffset(insns[i])]
		return t, ok
	}
	push(0)
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		ins := &insns[i]
		if ins.IsFunctionCall() || ins.IsLoadOfFunctionPointer() {
			t, ok := start[ins.Reference()]
			if ins.Constant != -1 || !ok {
				return insns, 0, false
			}
			push(t)
			push(i + 1)
			continue
		}
		if op := ins.OpCode.JumpOp(); ins.OpCode.Class().IsJump() && op != asm.Call && op != asm.Exit && ins.Reference() != "" {
			return insns, 0, false // a jump to a symbol
		}
		fall, jump, ok := successors(insns, slots, index, i)
		if !ok {
			return insns, 0, false
		}
		push(fall)
		push(jump)
	}
	newSlot := make([]int, len(insns))
	pos, n := 0, 0
	for i, ins := range insns {
		newSlot[i] = pos
		if reach[i] {
			pos += int(ins.Size() / asm.InstructionSize)
		} else {
			n++
		}
	}
	if n == 0 {
		return insns, 0, true
	}
	out := make(asm.Instructions, 0, len(insns)-n)
	for i, ins := range insns {
		if !reach[i] {
			continue
		}
		if c := ins.OpCode.Class(); c.IsJump() && !ins.IsFunctionCall() {
			if op := ins.OpCode.JumpOp(); op != asm.Call && op != asm.Exit {
				t, _ := target(i)
				off := newSlot[t] - newSlot[i] - 1
				if op == asm.Ja && c == asm.Jump32Class {
					ins.Constant = int64(off) // gotol
				} else {
					ins.Offset = int16(off) // nearer than before: fits
				}
			}
		}
		out = append(out, ins)
	}
	return out, n, true
}

// aluFold computes an ALU instruction on known operands: its result and
// whether it is known.
func aluFold(op asm.OpCode, off int16, dstKnown bool, dst uint64, srcKnown bool, src uint64, wide bool) (uint64, bool) {
	if off != 0 || !srcKnown {
		return 0, false // movsx, sdiv, smod (cpu v4), or an unknown source
	}
	var v uint64
	switch op.ALUOp() {
	case asm.Mov:
		v = src
	case asm.Add, asm.Sub, asm.And, asm.Or, asm.Xor, asm.LSh, asm.RSh:
		if !dstKnown {
			return 0, false
		}
		a, b := dst, src
		if !wide {
			a, b = uint64(uint32(a)), uint64(uint32(b))
		}
		switch op.ALUOp() {
		case asm.Add:
			v = a + b
		case asm.Sub:
			v = a - b
		case asm.And:
			v = a & b
		case asm.Or:
			v = a | b
		case asm.Xor:
			v = a ^ b
		case asm.LSh:
			if wide {
				v = a << (b & 63)
			} else {
				v = uint64(uint32(a) << (b & 31))
			}
		case asm.RSh:
			if wide {
				v = a >> (b & 63)
			} else {
				v = uint64(uint32(a) >> (b & 31))
			}
		}
	default:
		return 0, false
	}
	if !wide {
		v = uint64(uint32(v)) // 32-bit operations zero the upper half
	}
	return v, true
}

// jumpTaken evaluates a conditional jump on known operands (jmp32:
// their lower halves).
func jumpTaken(op asm.JumpOp, a, b uint64, narrow bool) (bool, bool) {
	sa, sb := int64(a), int64(b)
	if narrow {
		a, b = uint64(uint32(a)), uint64(uint32(b))
		sa, sb = int64(int32(uint32(a))), int64(int32(uint32(b)))
	}
	switch op {
	case asm.JEq:
		return a == b, true
	case asm.JNE:
		return a != b, true
	case asm.JGT:
		return a > b, true
	case asm.JGE:
		return a >= b, true
	case asm.JLT:
		return a < b, true
	case asm.JLE:
		return a <= b, true
	case asm.JSGT:
		return sa > sb, true
	case asm.JSGE:
		return sa >= sb, true
	case asm.JSLT:
		return sa < sb, true
	case asm.JSLE:
		return sa <= sb, true
	case asm.JSet:
		return a&b != 0, true
	}
	return false, false
}

// regSet is a set of registers r0-r10, bit i for ri.
type regSet uint16

const argRegs = regSet(1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5)

// useDef returns the registers ins reads and those it surely writes
// (without reading their old value), and whether it is a write with no
// other effect (an ALU operation or a plain 64-bit immediate), which may
// go when nothing reads its result. An instruction this does not model
// reads every register.
func useDef(ins asm.Instruction) (use, def regSet, pure bool) {
	op := ins.OpCode
	bit := func(r asm.Register) regSet { return 1 << r }
	switch c := op.Class(); {
	case op == asm.InvalidOpCode:
		return 0x7ff, 0, false
	case c.IsALU():
		if op.Source() == asm.RegSource {
			use |= bit(ins.Src)
		}
		if op.ALUOp() != asm.Mov {
			use |= bit(ins.Dst)
		}
		return use, bit(ins.Dst), ins.Dst < asm.R10 && !relocated(&ins)
	case c == asm.LdClass:
		if !op.IsDWordLoad() {
			return 0x7ff, 0, false
		}
		return 0, bit(ins.Dst), ins.Src == asm.R0 && ins.Reference() == "" && ins.Dst < asm.R10 && !relocated(&ins)
	case c == asm.LdXClass:
		// a load from the stack cannot fault: pure
		return bit(ins.Src), bit(ins.Dst), ins.Src == asm.R10 && ins.Dst < asm.R10 && op.Mode() == asm.MemMode && !relocated(&ins)
	case c == asm.StClass:
		if op.Mode() == asm.AtomicMode {
			return 0x7ff, 0, false
		}
		return bit(ins.Dst), 0, false
	case c == asm.StXClass:
		if op.Mode() == asm.AtomicMode {
			return bit(ins.Dst) | bit(ins.Src) | bit(asm.R0), 0, false
		}
		return bit(ins.Dst) | bit(ins.Src), 0, false
	case c.IsJump():
		switch op.JumpOp() {
		case asm.Call:
			use = argRegs
			if noArgHelper(ins) {
				use = 0
			}
			return use, bit(asm.R0) | argRegs, false
		case asm.Exit:
			return bit(asm.R0), 0, false
		case asm.Ja:
			return 0, 0, false
		}
		use = bit(ins.Dst)
		if op.Source() == asm.RegSource {
			use |= bit(ins.Src)
		}
		return use, 0, false
	}
	return 0x7ff, 0, false
}

// dropDeadWrites turns the pure register writes whose result no path
// reads into `ja +0` (a 64-bit immediate into two), by backward liveness
// over the instructions' control flow (a call returns to the next
// instruction; a BPF-to-BPF callee is its own function, entered with
// r1-r5).
func dropDeadWrites(insns asm.Instructions) (asm.Instructions, int) {
	slots, index, _ := layout(insns)
	type node struct {
		use, def regSet
		pure     bool
		succ     [2]int // instruction indexes, -1 none
	}
	nodes := make([]node, len(insns))
	for i, ins := range insns {
		u, d, p := useDef(ins)
		fall, jump, ok := successors(insns, slots, index, i)
		if !ok {
			return insns, 0 // a jump into an instruction's second slot: leave all
		}
		nodes[i] = node{use: u, def: d, pure: p, succ: [2]int{fall, jump}}
	}
	liveIn := make([]regSet, len(insns))
	liveOut := make([]regSet, len(insns))
	for changed := true; changed; {
		changed = false
		for i := len(insns) - 1; i >= 0; i-- {
			nd := &nodes[i]
			var out regSet
			for _, s := range nd.succ {
				if s >= 0 {
					out |= liveIn[s]
				}
			}
			in := nd.use | (out &^ nd.def)
			if out != liveOut[i] || in != liveIn[i] {
				liveOut[i], liveIn[i] = out, in
				changed = true
			}
		}
	}
	n := 0
	out := make(asm.Instructions, 0, len(insns))
	for i, ins := range insns {
		nd := nodes[i]
		if nd.pure && nd.def&liveOut[i] == 0 && !(ins.OpCode.JumpOp() == asm.Ja && ins.OpCode.Class().IsJump()) {
			n++
			if ins.OpCode.IsDWordLoad() {
				out = append(out, nopLike(ins), asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)})
				continue
			}
			out = append(out, nopLike(ins))
			continue
		}
		out = append(out, ins)
	}
	return out, n
}
