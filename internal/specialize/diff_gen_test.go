package specialize

import (
	"math/rand"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/expr"
)

// diffGen returns a random program: the program ("prog": ctx spilled,
// then a block of units), the subprogram it calls ("sub": r6 = r1, the
// caller's stack address, then a block) and the xpred stub, when it
// calls them.
func diffGen(r *rand.Rand) asm.Instructions {
	g := &gen{r: r}
	prog := asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"), asm.StoreMem(asm.R10, diffCtxSlot, asm.R1, asm.DWord)}
	prog = append(append(prog, g.block(10+r.Intn(51))...), asm.Return())
	if g.sub {
		g.inSub, g.avoid = true, 1<<asm.R6
		prog = append(prog, asm.Mov.Reg(asm.R6, asm.R1).WithSymbol("sub"))
		prog = append(append(prog, g.block(4+r.Intn(17))...), asm.Return())
	}
	if g.pred {
		prog = append(prog, asm.Mov.Imm(asm.R0, 1).WithSymbol(expr.PredicateFunc), asm.Return())
	}
	return prog
}

// gen draws the parts of diffGen's programs.
type gen struct {
	r     *rand.Rand
	last  asm.Register // the register written last
	offs  []int        // the stack offsets used so far
	avoid regSet       // registers no unit may write: a loop's counter, sub's r6
	sub   bool         // the program calls sub
	pred  bool         // the program calls xpred
	inSub bool         // drawing sub's block
	loop  bool         // drawing a loop's body
}

// block returns units, each with at most one jump (its last instruction)
// to a later unit of the block or its end, so that no jump lands inside
// a pointer store's or a helper's sequence.
func (g *gen) block(want int) []asm.Instruction {
	var units [][]asm.Instruction
	var jumpTo []int // per unit: how many units ahead its last instruction jumps; 0 none
	for n := 0; n < want; {
		u, dist := g.unit()
		units, jumpTo, n = append(units, u), append(jumpTo, dist), n+len(u)
	}
	start := make([]int, len(units)+1) // the slot of each unit
	for i, u := range units {
		start[i+1] = start[i] + expr.RawSlots(u)
	}
	var out []asm.Instruction
	for i, u := range units {
		if jumpTo[i] > 0 {
			u[len(u)-1].Offset = int16(start[min(i+jumpTo[i], len(units))] - start[i+1])
		}
		out = append(out, u...)
	}
	return out
}

func (g *gen) reg() asm.Register { return asm.Register(g.r.Intn(10)) }
func (g *gen) dst() asm.Register { g.last = g.free(0); return g.last }
func (g *gen) val() int64        { return diffVal(g.r) }
func (g *gen) size() asm.Size {
	return []asm.Size{asm.DWord, asm.DWord, asm.Word, asm.Half, asm.Byte}[g.r.Intn(5)]
}

// free returns a register of lo..r9 a unit may write.
func (g *gen) free(lo int) asm.Register {
	for {
		if r := asm.Register(lo + g.r.Intn(10-lo)); g.avoid&(1<<r) == 0 {
			return r
		}
	}
}

// off is -8..-32 or -64 or one used before, sometimes misaligned.
func (g *gen) off(s asm.Size) int16 {
	r := g.r
	o := -8 * (1 + r.Intn(4+4*r.Intn(2)))
	if len(g.offs) > 0 && r.Intn(2) == 0 {
		o = g.offs[r.Intn(len(g.offs))]
	}
	if r.Intn(4) == 0 {
		o += []int{7, 4, 1 + r.Intn(7)}[r.Intn(3)] // the last byte of a slot, a half, any
	}
	g.offs = append(g.offs, min(o, -s.Sizeof()))
	return int16(g.offs[len(g.offs)-1])
}

// ptr sets p = r10 + off, moved or through a spill.
func (g *gen) ptr(p asm.Register) []asm.Instruction {
	add := asm.Add.Imm(p, int32(g.off(asm.DWord)))
	if g.r.Intn(4) == 0 {
		return []asm.Instruction{asm.Mov.Reg(p, asm.R10), add}
	}
	sp := g.off(asm.DWord)
	return []asm.Instruction{asm.StoreMem(asm.R10, sp, asm.R10, asm.DWord), asm.LoadMem(p, asm.R10, sp, asm.DWord), add}
}

// jump is a conditional jump on d, its offset set by block.
func (g *gen) jump(d asm.Register) asm.Instruction {
	r := g.r
	cls, src := []asm.Class{asm.JumpClass, asm.JumpClass, asm.Jump32Class}[r.Intn(3)], asm.ImmSource
	ins := asm.Instruction{Dst: d, Constant: g.val()}
	if r.Intn(3) == 0 {
		src, ins.Src, ins.Constant = asm.RegSource, g.reg(), 0
	}
	ins.OpCode = asm.OpCode(cls).SetJumpOp(diffJumps[r.Intn(len(diffJumps))]).SetSource(src)
	return ins
}

// tested appends, half the time, a jump on d, which block aims.
func (g *gen) tested(u []asm.Instruction, d asm.Register) ([]asm.Instruction, int) {
	if g.r.Intn(2) == 0 {
		return u, 0
	}
	return append(u, g.jump(d)), 1 + g.r.Intn(6)
}

// skipEnd aims u[i], a jump, at u's end.
func skipEnd(u []asm.Instruction, i int) []asm.Instruction {
	u[i].Offset = int16(expr.RawSlots(u[i+1:]))
	return u
}

// alu is an ALU operation on an immediate or a register.
func (g *gen) alu() asm.Instruction {
	r := g.r
	cls, src := []asm.Class{asm.ALU64Class, asm.ALU64Class, asm.ALUClass}[r.Intn(3)], asm.ImmSource
	op := diffALU[r.Intn(len(diffALU))]
	ins := asm.Instruction{Dst: g.dst(), Constant: g.val()}
	if op == asm.LSh || op == asm.RSh {
		ins.Constant = int64(r.Intn(map[asm.Class]int{asm.ALUClass: 32, asm.ALU64Class: 64}[cls]))
	}
	if r.Intn(2) == 0 {
		src, ins.Src, ins.Constant = asm.RegSource, g.reg(), 0
	}
	ins.OpCode = asm.OpCode(cls).SetALUOp(op).SetSource(src)
	return ins
}

// unit returns one unit and how many units ahead its last instruction
// jumps (0: it is no jump).
func (g *gen) unit() ([]asm.Instruction, int) {
	switch k := g.r.Intn(20); {
	case k < 12:
		return g.basicUnit()
	case k < 15:
		return g.memUnit()
	case k < 18:
		return g.helperUnit()
	}
	return g.flowUnit()
}

// basicUnit is ALU, stack and jump work, the helpers writing the stack
// and the stand-in kfunc.
func (g *gen) basicUnit() ([]asm.Instruction, int) {
	r := g.r
	dist := 1 + r.Intn(6)
	switch k := r.Intn(25); {
	case k < 2:
		return []asm.Instruction{g.alu()}, 0
	case k < 3:
		return []asm.Instruction{asm.LoadImm(g.dst(), []int64{g.val(), 1 << 32, -1 << 63, 0xffffffff}[r.Intn(4)], asm.DWord)}, 0
	case k < 5:
		s := g.size()
		if r.Intn(2) == 0 {
			return []asm.Instruction{stImm(asm.R10, g.off(s), g.val(), s)}, 0
		}
		return []asm.Instruction{asm.StoreMem(asm.R10, g.off(s), g.reg(), s)}, 0
	case k < 6:
		s := g.size()
		return []asm.Instruction{asm.LoadMem(g.dst(), asm.R10, g.off(s), s)}, 0
	case k < 9: // fill and test
		return []asm.Instruction{asm.LoadMem(g.dst(), asm.R10, g.off(asm.DWord), asm.DWord), g.jump(g.last)}, dist
	case k < 11:
		return g.storeThrough(), 0
	case k < 13:
		return []asm.Instruction{g.jump([]asm.Register{g.last, g.reg()}[r.Intn(2)])}, dist
	case k < 14:
		return []asm.Instruction{{OpCode: asm.Ja.Op(asm.ImmSource)}}, dist
	case k < 15:
		return []asm.Instruction{asm.FnGetCurrentPidTgid.Call()}, 0
	case k < 16: // get_func_arg(ctx, n, r10 + off), get_func_ret(ctx, r10 + off)
		fn, p := []asm.BuiltinFunc{asm.FnGetFuncArg, asm.FnGetFuncRet}[r.Intn(2)], asm.R3
		u := []asm.Instruction{asm.Mov.Imm(asm.R2, int32(r.Intn(7)))}
		if fn == asm.FnGetFuncRet {
			p, u = asm.R2, nil
		}
		return append(append(u, g.ptr(p)...), fn.Call()), 0
	case k < 21:
		return g.atomic(asm.R10)
	case k < 22: // a kfunc: clobbers r0-r5, may write the stack through r1
		return append(g.ptr(asm.R1), kfunc(kfuncStandIn)), 0
	case k < 23: // a CO-RE-relocated immediate (bpf_core_field_exists), then tested
		mov := btf.WithCORERelocationMetadata(asm.Mov.Imm(g.dst(), int32(r.Intn(2))), &btf.CORERelocation{})
		return []asm.Instruction{mov, g.jump(g.last)}, dist
	}
	// probe_read_*(r10 + off, 1..16, r3), or on whatever r1-r3 hold
	var u []asm.Instruction
	if r.Intn(4) > 0 {
		u = append(g.ptr(asm.R1), asm.Mov.Imm(asm.R2, int32([]int{8, 1 + r.Intn(16)}[r.Intn(2)])), asm.Mov.Imm(asm.R3, int32(r.Intn(256))))
	}
	fns := []asm.BuiltinFunc{asm.FnProbeReadKernel, asm.FnProbeReadKernel, asm.FnProbeReadKernelStr, asm.FnProbeReadUser, asm.FnProbeReadUserStr}
	u = append(u, fns[r.Intn(len(fns))].Call())
	if r.Intn(8) == 0 {
		u = append(u, asm.Return())
	}
	return u, 0
}

func kfunc(id int64) asm.Instruction {
	return asm.Instruction{OpCode: asm.Call.Op(asm.ImmSource), Src: asm.PseudoKfuncCall, Constant: id}
}

// storeThrough is a store through a pointer into the stack, sometimes
// loaded back.
func (g *gen) storeThrough() []asm.Instruction {
	r := g.r
	p, s := g.free(1), g.size()
	u := append(g.ptr(p), asm.StoreMem(p, 0, g.reg(), s))
	if r.Intn(2) == 0 {
		u[len(u)-1] = stImm(p, 0, g.val(), s)
	}
	if r.Intn(3) == 0 {
		u = append(u, asm.LoadMem(g.dst(), p, int16(-8*r.Intn(2)), asm.DWord))
	}
	return u
}

// atomic is an atomic on a stack slot, at r10 + off or through a
// pointer (base not r10: through base, at base + 0..8), its result
// sometimes tested.
func (g *gen) atomic(base asm.Register) ([]asm.Instruction, int) {
	r := g.r
	ops := []asm.AtomicOp{asm.AddAtomic, asm.FetchAdd, asm.AndAtomic, asm.FetchOr, asm.FetchXor, asm.Xchg, asm.CmpXchg}
	s, src := []asm.Size{asm.DWord, asm.Word}[r.Intn(2)], g.free(0)
	var u []asm.Instruction
	at, off := base, int16(0)
	switch {
	case base != asm.R10:
		off = int16(4 * r.Intn(3-s.Sizeof()/4))
	case r.Intn(2) == 0:
		at = g.free(1)
		u, off = g.ptr(at), g.off(s)
	default:
		off = g.off(s)
	}
	for src == at {
		src = g.free(0)
	}
	u = append(u, ops[r.Intn(len(ops))].Mem(at, src, s, off))
	if r.Intn(2) == 0 {
		return append(u, g.jump([]asm.Register{src, asm.R0}[r.Intn(2)])), 1 + r.Intn(6)
	}
	return u, 0
}
