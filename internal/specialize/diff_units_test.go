package specialize

import (
	"github.com/cilium/ebpf/asm"

	"github.com/ftprobe/ftprobe/internal/expr"
)

// mapPtr is `dst = map` (a map's pointer, for a helper).
func mapPtr(dst asm.Register, name string) asm.Instruction {
	return asm.LoadMapPtr(dst, 0).WithReference(name)
}

// mapValue is `dst = map_value(name + off)`.
func mapValue(dst asm.Register, name string, off uint32) asm.Instruction {
	return asm.LoadMapValue(dst, 0, off).WithReference(name)
}

// through is a load, store or atomic through p (a map value, the
// caller's stack), at p + 0..limit-8, or a load tested.
func (g *gen) through(u []asm.Instruction, p asm.Register, limit int) ([]asm.Instruction, int) {
	r := g.r
	s := g.size()
	off := int16(r.Intn(limit - s.Sizeof() + 1))
	switch r.Intn(4) {
	case 0:
		return append(u, asm.StoreMem(p, off, g.reg(), s)), 0
	case 1:
		return append(u, stImm(p, off, g.val(), s)), 0
	case 2:
		a, dist := g.atomic(p)
		return append(u, a...), dist
	}
	return g.tested(append(u, asm.LoadMem(g.dst(), p, off, s)), g.last)
}

// memUnit reads memory other than the stack: ctx (the program's spill
// of r1 at entry), frozen .rodata (the shapes InlineRodata rewrites), a
// map value (.bss, looked up in vals: changed by the runs, never
// constant), the caller's stack from sub.
func (g *gen) memUnit() ([]asm.Instruction, int) {
	r := g.r
	switch k := r.Intn(6); {
	case k < 3 && g.inSub: // the caller's stack, through r6
		return g.through(nil, asm.R6, 8)
	case k < 1: // ctx: an argument or the return value
		a := g.free(0)
		u := []asm.Instruction{asm.LoadMem(a, asm.R10, diffCtxSlot, asm.DWord)}
		return g.tested(append(u, asm.LoadMem(g.dst(), a, int16(8*r.Intn(8)), asm.DWord)), g.last)
	case k < 3:
		return g.rodata()
	case k < 4: // .bss
		a := g.free(0)
		return g.through([]asm.Instruction{mapValue(a, ".bss", uint32(8*r.Intn(7)))}, a, 16)
	case k < 5: // the key at r10 + off (stored, or whatever is there), looked up; the value, when found
		ko := g.off(asm.Word)
		var u []asm.Instruction
		if r.Intn(4) > 0 {
			u = append(u, stImm(asm.R10, ko, int64(r.Intn(6)), asm.Word))
		}
		u = append(u, mapPtr(asm.R1, "vals"), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, int32(ko)),
			asm.FnMapLookupElem.Call(), asm.JEq.Imm(asm.R0, 0, ""))
		body, _ := g.through(nil, asm.R0, 16)
		if body[len(body)-1].OpCode.Class().IsJump() {
			body = body[:len(body)-1] // within the null check
		}
		return skipEnd(append(u, body...), len(u)-1), 0
	}
	// update (the value: 16 bytes of the stack) or delete
	ko := g.off(asm.Word)
	u := []asm.Instruction{stImm(asm.R10, ko, int64(r.Intn(6)), asm.Word), mapPtr(asm.R1, "vals"),
		asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, int32(ko))}
	if r.Intn(3) == 0 {
		return append(u, asm.FnMapDeleteElem.Call()), 0
	}
	u = append(u, asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(-16-8*r.Intn(7))), asm.Mov.Imm(asm.R4, 0))
	return g.tested(append(u, asm.FnMapUpdateElem.Call()), asm.R0)
}

// rodata reads frozen .rodata as clang does: the address and a load
// through it into the same register, or another one (the address read
// again, or not), or the address kept for two loads with a test
// between.
func (g *gen) rodata() ([]asm.Instruction, int) {
	r := g.r
	s := g.size()
	off := uint32(r.Intn(64 - 8))
	k := int16(r.Intn(9 - s.Sizeof()))
	a := g.free(0)
	u := []asm.Instruction{mapValue(a, ".rodata", off)}
	switch r.Intn(3) {
	case 0:
		u = append(u, asm.LoadMem(a, a, k, s))
		g.last = a
	case 1:
		u = append(u, asm.LoadMem(g.dst(), a, k, s))
		if r.Intn(2) == 0 {
			u = append(u, asm.Mov.Reg(g.free(0), a))
		}
	default:
		d := g.dst()
		for d == a {
			d = g.dst()
		}
		u = append(u, asm.LoadMem(d, a, k, s), g.jump(d), asm.LoadMem(g.dst(), a, int16(r.Intn(9-s.Sizeof())), s))
		u[2].Offset = 1 // over the second load
	}
	return g.tested(u, g.last)
}

// helperUnit calls the other helpers and kfuncs of bpf/trace.bpf.c.
func (g *gen) helperUnit() ([]asm.Instruction, int) {
	r := g.r
	ctx := asm.LoadMem(asm.R1, asm.R10, diffCtxSlot, asm.DWord)
	if g.inSub {
		ctx = asm.Mov.Imm(asm.R1, 0) // not ctx: the helpers here do not read it
	}
	noArg := []asm.BuiltinFunc{asm.FnKtimeGetNs, asm.FnGetSmpProcessorId, asm.FnGetCurrentTaskBtf, asm.FnGetCurrentPidTgid}
	switch k := r.Intn(11); k {
	case 0:
		return g.tested([]asm.Instruction{noArg[r.Intn(len(noArg))].Call()}, asm.R0)
	case 1, 2: // fn(ctx)
		fn := []asm.Instruction{asm.FnGetAttachCookie.Call(), asm.FnGetFuncArgCnt.Call(), kfunc(kfuncSessionReturn)}[r.Intn(3)]
		return g.tested([]asm.Instruction{ctx, fn}, asm.R0)
	case 3: // the session cookie, read or written
		return g.through([]asm.Instruction{ctx, kfunc(kfuncSessionCookie)}, asm.R0, 8)
	case 4: // get_current_comm(r10 + off, 1..16)
		return []asm.Instruction{asm.Mov.Reg(asm.R1, asm.R10), asm.Add.Imm(asm.R1, int32(-16-8*r.Intn(5))),
			asm.Mov.Imm(asm.R2, int32(1+r.Intn(16))), asm.FnGetCurrentComm.Call()}, 0
	case 5: // get_stack(ctx, r10 - 64, 8..64, 0)
		return g.tested([]asm.Instruction{ctx, asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, -64),
			asm.Mov.Imm(asm.R3, int32(8*(1+r.Intn(8)))), asm.Mov.Imm(asm.R4, 0), asm.FnGetStack.Call()}, asm.R0)
	case 6: // a record reserved, filled, submitted or discarded
		u := []asm.Instruction{mapPtr(asm.R1, "ringbuf"), asm.Mov.Imm(asm.R2, 16), asm.Mov.Imm(asm.R3, 0),
			asm.FnRingbufReserve.Call(), asm.JEq.Imm(asm.R0, 0, ""), asm.StoreMem(asm.R0, 0, g.reg(), asm.DWord),
			stImm(asm.R0, 8, g.val(), asm.Word), asm.Mov.Reg(asm.R1, asm.R0), asm.Mov.Imm(asm.R2, 0),
			[]asm.BuiltinFunc{asm.FnRingbufSubmit, asm.FnRingbufDiscard}[r.Intn(2)].Call()}
		return skipEnd(u, 4), 0
	case 7: // ringbuf_output(rb, r10 - 32, 8..32, 0), ringbuf_query(rb, 0)
		if r.Intn(3) == 0 {
			return g.tested([]asm.Instruction{mapPtr(asm.R1, "ringbuf"), asm.Mov.Imm(asm.R2, 0), asm.FnRingbufQuery.Call()}, asm.R0)
		}
		return []asm.Instruction{mapPtr(asm.R1, "ringbuf"), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, -32),
			asm.Mov.Imm(asm.R3, int32(8*(1+r.Intn(4)))), asm.Mov.Imm(asm.R4, 0), asm.FnRingbufOutput.Call()}, 0
	case 8: // the task's storage: got (created or not), then used; or deleted
		u := []asm.Instruction{asm.FnGetCurrentTaskBtf.Call(), asm.Mov.Reg(asm.R2, asm.R0), mapPtr(asm.R1, "task")}
		if r.Intn(4) == 0 {
			return append(u, asm.FnTaskStorageDelete.Call()), 0
		}
		u = append(u, asm.Mov.Imm(asm.R3, 0), asm.Mov.Imm(asm.R4, int32(r.Intn(2))), asm.FnTaskStorageGet.Call(), asm.JEq.Imm(asm.R0, 0, ""))
		body, _ := g.through(nil, asm.R0, 16)
		if body[len(body)-1].OpCode.Class().IsJump() {
			body = body[:len(body)-1]
		}
		return skipEnd(append(u, body...), len(u)-1), 0
	}
	return g.basicUnit()
}

// flowUnit is a bounded loop (its counter in r6-r9, a block as its body,
// a back edge), a call of sub (r1 = the caller's stack, r2 a value), or
// of xpred (r1 = u64 args[6] on the stack, r2 = ret, r3 = sel).
func (g *gen) flowUnit() ([]asm.Instruction, int) {
	r := g.r
	switch k := r.Intn(3); {
	case k == 0 && !g.loop:
		c := g.free(6)
		g.loop, g.avoid = true, g.avoid|1<<c
		body := g.block(3 + r.Intn(10))
		g.loop, g.avoid = false, g.avoid&^(1<<c)
		u := append([]asm.Instruction{asm.Mov.Imm(c, int32(1+r.Intn(3)))}, body...)
		back := []asm.Instruction{asm.JNE.Imm(c, 0, ""), asm.JSGT.Imm(c, 0, ""), asm.JNE.Imm32(c, 0, "")}[r.Intn(3)]
		back.Offset = int16(-expr.RawSlots(body) - 2)
		return append(u, asm.Sub.Imm(c, 1), back), 0
	case k == 1 && !g.inSub:
		g.sub = true
		off := g.off(asm.DWord)
		u := []asm.Instruction{asm.Mov.Reg(asm.R1, asm.R10), asm.Add.Imm(asm.R1, int32(off)), asm.Mov.Reg(asm.R2, g.reg()), asm.Call.Label("sub")}
		if r.Intn(2) == 0 { // a known value at what r1 points to
			u = append([]asm.Instruction{stImm(asm.R10, off, g.val(), asm.DWord)}, u...)
		}
		if r.Intn(2) == 0 { // what sub may have written, filled
			return append(u, asm.LoadMem(g.dst(), asm.R10, off, asm.DWord), g.jump(g.last)), 1 + r.Intn(6)
		}
		return g.tested(u, asm.R0)
	case k == 2 && !g.inSub:
		g.pred = true
		var u []asm.Instruction
		for i := range int16(6) {
			u = append(u, asm.StoreMem(asm.R10, diffArgsSlot+8*i, g.reg(), asm.DWord))
			if r.Intn(2) == 0 {
				u[len(u)-1] = stImm(asm.R10, diffArgsSlot+8*i, g.val(), asm.DWord)
			}
		}
		sel := asm.Mov.Imm(asm.R3, int32(r.Intn(5)))
		if r.Intn(4) == 0 {
			sel = asm.Mov.Reg(asm.R3, g.reg())
		}
		u = append(u, asm.Mov.Reg(asm.R2, g.reg()), sel, asm.Mov.Reg(asm.R1, asm.R10), asm.Add.Imm(asm.R1, diffArgsSlot),
			asm.Call.Label("xpred"))
		for reg := asm.R1; reg <= asm.R5; reg++ {
			// r1-r5 as the subprogram leaves them (clobbered; the
			// verifier refuses a read): the same when spliced in
			u = append(u, asm.Mov.Imm(reg, diffClobber+int32(reg)))
		}
		return g.tested(u, asm.R0)
	}
	return g.basicUnit()
}
