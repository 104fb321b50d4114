package specialize

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// The differential test of Simplify: random forward-only programs (ALU on
// immediates and registers, 64-bit immediates, stores and loads of every
// size at r10-relative, misaligned and overlapping slots, stores through
// a pointer into the stack, atomics on stack slots (fetching into a
// register or r0, then often tested), conditional jumps, helper calls
// with and without arguments, probe_read_kernel into the stack, kfunc
// calls writing through r1, CO-RE-relocated immediates tested, which
// the interpreter runs with another value than the compiled one, as
// cilium/ebpf's relocation at load would) run on a small interpreter before and after
// Simplify, on the same inputs, must exit with the same r0, leave the
// same stack bytes and make the same helper calls: Simplify deletes only
// instructions no run reaches and register writes (stack loads included)
// no run reads, never a store or a call.

const (
	diffStackSize = 512
	diffFP        = 0x7f00_0000_0000 + diffStackSize // r10
)

var (
	diffVals  = []int64{0, 1, 2, 3, 7, 8, 16, 31, 32, 63, 64, 0x55, -1, -2, 0x7fffffff, -0x80000000}
	diffALU   = []asm.ALUOp{asm.Mov, asm.Add, asm.Sub, asm.And, asm.Or, asm.Xor, asm.LSh, asm.RSh}
	diffJumps = []asm.JumpOp{asm.JEq, asm.JNE, asm.JGT, asm.JGE, asm.JLT, asm.JLE, asm.JSGT, asm.JSGE, asm.JSLT, asm.JSLE, asm.JSet}
)

type diffMachine struct {
	reg   [11]uint64
	stack [diffStackSize]byte
	calls uint64
	trace []uint64 // each helper, and probe_read_kernel's r1-r3
}

func (m *diffMachine) addr(a uint64, size int) (int, bool) {
	at := int64(a - (diffFP - diffStackSize))
	return int(at), at >= 0 && at+int64(size) <= diffStackSize
}

// call runs a helper: r0 and the clobbered r1-r5 derive from the call
// count; probe_read_kernel(dst, n, src) writes n bytes of it and src to
// dst if that is on the stack.
func (m *diffMachine) call(fn asm.BuiltinFunc) error {
	m.calls++
	h := (m.calls*0x9e3779b97f4a7c15 ^ uint64(fn)) * 0xbf58476d1ce4e5b9
	m.trace, m.reg[0] = append(m.trace, uint64(fn)), h
	switch fn {
	case asm.FnGetCurrentPidTgid:
	case asm.FnGetFuncArg, asm.FnGetFuncRet: // (ctx, n, *value), (ctx, *value): 8 bytes
		p := map[asm.BuiltinFunc]uint64{asm.FnGetFuncArg: m.reg[3], asm.FnGetFuncRet: m.reg[2]}[fn]
		m.trace = append(m.trace, p)
		if at, ok := m.addr(p, 8); ok {
			binary.LittleEndian.PutUint64(m.stack[at:], h)
		}
	case asm.FnProbeReadKernel:
		dst, n, src := m.reg[1], m.reg[2], m.reg[3]
		m.trace, m.reg[0] = append(m.trace, dst, n, src), 0xfffffffffffffff2 // -EFAULT
		if at, ok := m.addr(dst, int(n)); ok && n <= diffStackSize {
			for k := range int(n) {
				m.stack[at+k] = byte(h>>(k%8*8)) ^ byte(src) ^ byte(k)
			}
			m.reg[0] = 0
		}
	default:
		return fmt.Errorf("helper %v", fn)
	}
	for r := 1; r <= 5; r++ {
		m.reg[r] = h + uint64(r)*0x1234567
	}
	return nil
}

// kfunc runs a kfunc (kfunc(ptr)): r0 and the clobbered r1-r5 derive
// from the call count, 8 bytes of it written at r1 if that is on the
// stack.
func (m *diffMachine) kfunc() {
	m.calls++
	h := m.calls * 0xd6e8feb86659fd93
	m.trace, m.reg[0] = append(m.trace, 1<<32, m.reg[1]), h
	if at, ok := m.addr(m.reg[1], 8); ok {
		binary.LittleEndian.PutUint64(m.stack[at:], h)
	}
	for r := 1; r <= 5; r++ {
		m.reg[r] = h + uint64(r)*0x7654321
	}
}

// atomic runs an atomic read-modify-write on the stack (the kernel's
// semantics, kernel/bpf/core.c): add/and/or/xor, with fetch the old value
// into src; xchg; cmpxchg with r0 (old value into r0). A Word operation
// works on the low 32 bits and zero-extends what it fetches.
func (m *diffMachine) atomic(ins asm.Instruction) error {
	size := ins.OpCode.Size().Sizeof()
	at, ok := m.addr(m.reg[ins.Dst]+uint64(int64(ins.Offset)), size)
	if !ok || (size != 4 && size != 8) {
		return fmt.Errorf("atomic outside the stack or of size %d: %v", size, ins)
	}
	var b [8]byte
	copy(b[:], m.stack[at:at+size])
	old, src, mask := binary.LittleEndian.Uint64(b[:]), m.reg[ins.Src], ^uint64(0)
	if size == 4 {
		mask = 0xffffffff
	}
	nv, fetch := old, true
	switch op := ins.OpCode.AtomicOp(); op {
	case asm.AddAtomic, asm.FetchAdd:
		nv, fetch = old+src, op == asm.FetchAdd
	case asm.AndAtomic, asm.FetchAnd:
		nv, fetch = old&src, op == asm.FetchAnd
	case asm.OrAtomic, asm.FetchOr:
		nv, fetch = old|src, op == asm.FetchOr
	case asm.XorAtomic, asm.FetchXor:
		nv, fetch = old^src, op == asm.FetchXor
	case asm.Xchg:
		nv = src
	case asm.CmpXchg:
		if old&mask == m.reg[0]&mask {
			nv = src
		}
		m.reg[0], fetch = old&mask, false
	default:
		return fmt.Errorf("atomic %v", ins)
	}
	if fetch {
		m.reg[ins.Src] = old & mask
	}
	binary.LittleEndian.PutUint64(b[:], nv)
	copy(m.stack[at:at+size], b[:size])
	return nil
}

// diffRun runs insns from instruction 0 with r1-r9 = args[1:].
func diffRun(insns asm.Instructions, args [10]uint64) (*diffMachine, error) {
	m := &diffMachine{}
	copy(m.reg[1:10], args[1:])
	m.reg[10] = diffFP
	for i := range m.stack {
		m.stack[i] = byte(0xa5 ^ i)
	}
	slots, index := make([]int, len(insns)), make([]int, 2*len(insns)+1) // slot: instruction+1
	for i, pos := 0, 0; i < len(insns); i++ {
		slots[i], index[pos] = pos, i+1
		pos += int(insns[i].Size() / asm.InstructionSize)
	}
	for pc := 0; pc < len(insns); {
		ins := insns[pc]
		op, cls := ins.OpCode, ins.OpCode.Class()
		pc++
		if btf.CORERelocationMetadata(&ins) != nil {
			// relocated at load, after Simplify: another value than
			// the compiled one
			ins.Constant ^= 1
		}
		switch {
		case cls.IsALU():
			d, s, mask := m.reg[ins.Dst], uint64(ins.Constant), uint64(63)
			if op.Source() == asm.RegSource {
				s = m.reg[ins.Src]
			}
			if cls == asm.ALUClass {
				d, s, mask = uint64(uint32(d)), uint64(uint32(s)), 31
			}
			v := [16]uint64{asm.Add >> 4: d + s, asm.Sub >> 4: d - s, asm.Or >> 4: d | s, asm.And >> 4: d & s,
				asm.LSh >> 4: d << (s & mask), asm.RSh >> 4: d >> (s & mask), asm.Xor >> 4: d ^ s, asm.Mov >> 4: s}[op.ALUOp()>>4]
			if ins.Dst >= asm.R10 || ins.Offset != 0 || !slices.Contains(diffALU, op.ALUOp()) {
				return m, fmt.Errorf("alu %v", ins)
			}
			if m.reg[ins.Dst] = v; cls == asm.ALUClass {
				m.reg[ins.Dst] = uint64(uint32(v))
			}
		case op.IsDWordLoad() && ins.Src == asm.R0:
			m.reg[ins.Dst] = uint64(ins.Constant)
		case (cls == asm.LdXClass || cls == asm.StClass || cls == asm.StXClass) && op.Mode() == asm.MemMode:
			size, base, v, b := op.Size().Sizeof(), ins.Dst, uint64(ins.Constant), [8]byte{}
			if cls == asm.LdXClass {
				base = ins.Src
			}
			at, ok := m.addr(m.reg[base]+uint64(int64(ins.Offset)), size)
			if !ok {
				return m, fmt.Errorf("access outside the stack: %v", ins)
			}
			if cls == asm.LdXClass {
				copy(b[:], m.stack[at:at+size])
				m.reg[ins.Dst] = binary.LittleEndian.Uint64(b[:])
				break
			}
			if cls == asm.StXClass {
				v = m.reg[ins.Src]
			}
			binary.LittleEndian.PutUint64(b[:], v)
			copy(m.stack[at:at+size], b[:size])
		case cls == asm.StXClass && op.Mode() == asm.AtomicMode:
			if err := m.atomic(ins); err != nil {
				return m, err
			}
		case cls.IsJump() && op.JumpOp() == asm.Exit:
			return m, nil
		case cls.IsJump() && op.JumpOp() == asm.Call && ins.IsBuiltinCall():
			if err := m.call(asm.BuiltinFunc(ins.Constant)); err != nil {
				return m, err
			}
		case ins.IsKfuncCall():
			m.kfunc()
		case cls == asm.JumpClass && op.JumpOp() == asm.Ja || cls.IsJump() && slices.Contains(diffJumps, op.JumpOp()):
			a, b := m.reg[ins.Dst], uint64(ins.Constant)
			if op.Source() == asm.RegSource {
				b = m.reg[ins.Src]
			}
			sa, sb := int64(a), int64(b)
			if cls == asm.Jump32Class {
				a, b, sa, sb = uint64(uint32(a)), uint64(uint32(b)), int64(int32(a)), int64(int32(b))
			}
			taken := [16]bool{asm.Ja >> 4: true, asm.JEq >> 4: a == b, asm.JNE >> 4: a != b, asm.JGT >> 4: a > b,
				asm.JGE >> 4: a >= b, asm.JLT >> 4: a < b, asm.JLE >> 4: a <= b, asm.JSGT >> 4: sa > sb, asm.JSGE >> 4: sa >= sb,
				asm.JSLT >> 4: sa < sb, asm.JSLE >> 4: sa <= sb, asm.JSet >> 4: a&b != 0}[op.JumpOp()>>4]
			if to := slots[pc-1] + 1 + int(ins.Offset); taken && (to < 0 || to >= len(index) || index[to] == 0) {
				return m, fmt.Errorf("jump into nowhere: %v", ins)
			} else if taken {
				pc = index[to] - 1
			}
		default:
			return m, fmt.Errorf("instruction %v", ins)
		}
	}
	return m, fmt.Errorf("fell off the end")
}

// stImm is `*(size *)(dst + off) = imm` (asm.StoreImm refuses DWord,
// which the kernel takes, imm sign-extended).
func stImm(dst asm.Register, off int16, imm int64, size asm.Size) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(size), Dst: dst, Offset: off, Constant: imm}
}

// diffGen returns a random program of units, each with at most one jump
// (its last instruction) to a later unit, so that no jump lands inside a
// pointer store's or a helper's sequence. Offsets crowd -8..-32, and
// jumps often test a register just filled or written, so spills meet
// fills and the tests on them.
func diffGen(r *rand.Rand) asm.Instructions {
	g := &gen{r: r}
	units := [][]asm.Instruction{{asm.Mov.Imm(asm.R0, 0).WithSymbol("prog")}}
	jumpTo := []int{0} // per unit: how many units ahead its last instruction jumps; 0 none
	for n, want := 1, 10+r.Intn(51); n < want-1; {
		u, dist := g.unit()
		units, jumpTo, n = append(units, u), append(jumpTo, dist), n+len(u)
	}
	units, jumpTo = append(units, []asm.Instruction{asm.Return()}), append(jumpTo, 0)
	start, pos := make([]int, len(units)), 0 // the slot of each unit
	for i, u := range units {
		start[i] = pos
		for _, ins := range u {
			pos += int(ins.Size() / asm.InstructionSize)
		}
	}
	var out asm.Instructions
	for i, u := range units {
		if jumpTo[i] > 0 {
			u[len(u)-1].Offset = int16(start[min(i+jumpTo[i], len(units)-1)] - start[i+1])
		}
		out = append(out, u...)
	}
	return out
}

// gen draws the parts of diffGen's programs.
type gen struct {
	r    *rand.Rand
	last asm.Register // the register written last
	offs []int        // the stack offsets used so far
}

func (g *gen) reg() asm.Register { return asm.Register(g.r.Intn(10)) }
func (g *gen) dst() asm.Register { g.last = g.reg(); return g.last }
func (g *gen) val() int64        { return diffVal(g.r) }
func (g *gen) size() asm.Size {
	return []asm.Size{asm.DWord, asm.DWord, asm.Word, asm.Half, asm.Byte}[g.r.Intn(5)]
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

// jump is a conditional jump on d, its offset set by diffGen.
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
		if fn == asm.FnGetFuncRet {
			p = asm.R2
		}
		return append(g.ptr(p), fn.Call()), 0
	case k < 21:
		return g.atomic()
	case k < 22: // a kfunc: clobbers r0-r5, may write the stack through r1
		return append(g.ptr(asm.R1), asm.Instruction{OpCode: asm.Call.Op(asm.ImmSource), Src: asm.PseudoKfuncCall, Constant: 1}), 0
	case k < 23: // a CO-RE-relocated immediate (bpf_core_field_exists), then tested
		mov := btf.WithCORERelocationMetadata(asm.Mov.Imm(g.dst(), int32(r.Intn(2))), &btf.CORERelocation{})
		return []asm.Instruction{mov, g.jump(g.last)}, dist
	}
	// probe_read_kernel(r10 + off, 1..16, r3), or on whatever r1-r3 hold
	var u []asm.Instruction
	if r.Intn(4) > 0 {
		u = append(g.ptr(asm.R1), asm.Mov.Imm(asm.R2, int32([]int{8, 1 + r.Intn(16)}[r.Intn(2)])), asm.Mov.Imm(asm.R3, int32(r.Intn(256))))
	}
	u = append(u, asm.FnProbeReadKernel.Call())
	if r.Intn(8) == 0 {
		u = append(u, asm.Return())
	}
	return u, 0
}

// storeThrough is a store through a pointer into the stack, sometimes
// loaded back.
func (g *gen) storeThrough() []asm.Instruction {
	r := g.r
	p, s := asm.Register(1+r.Intn(9)), g.size()
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
// pointer, its result sometimes tested.
func (g *gen) atomic() ([]asm.Instruction, int) {
	r := g.r
	ops := []asm.AtomicOp{asm.AddAtomic, asm.FetchAdd, asm.AndAtomic, asm.FetchOr, asm.FetchXor, asm.Xchg, asm.CmpXchg}
	s, src := []asm.Size{asm.DWord, asm.Word}[r.Intn(2)], asm.Register(r.Intn(10))
	at := asm.R10
	var u []asm.Instruction
	if r.Intn(2) == 0 {
		at = asm.Register(1 + r.Intn(9))
		u = g.ptr(at)
		for src == at {
			src = asm.Register(r.Intn(10))
		}
	}
	u = append(u, ops[r.Intn(len(ops))].Mem(at, src, s, g.off(s)))
	if r.Intn(2) == 0 {
		return append(u, g.jump([]asm.Register{src, asm.R0}[r.Intn(2)])), 1 + r.Intn(6)
	}
	return u, 0
}

// diffCheck runs orig and simp on the same inputs and reports how they differ.
func diffCheck(orig, simp asm.Instructions, args [10]uint64) error {
	a, err := diffRun(orig, args)
	if err != nil {
		return fmt.Errorf("original: %w (a generator or interpreter bug)", err)
	}
	b, err := diffRun(simp, args)
	switch {
	case err != nil:
		return fmt.Errorf("simplified: %w", err)
	case a.reg[0] != b.reg[0]:
		return fmt.Errorf("r0 %#x, simplified %#x", a.reg[0], b.reg[0])
	case a.stack != b.stack:
		return fmt.Errorf("stacks differ:\n%x\n%x", a.stack[diffStackSize-64:], b.stack[diffStackSize-64:])
	case !slices.Equal(a.trace, b.trace):
		return fmt.Errorf("helper calls %v, simplified %v", a.trace, b.trace)
	}
	return nil
}

// diffSeed checks seed's program on three inputs: random, small, and from
// the immediates; changed is how many instructions Simplify changed.
func diffSeed(seed int64) (changed int, err error) {
	r := rand.New(rand.NewSource(seed))
	orig := diffGen(r)
	simp, changed := Simplify(orig)
	for k := range 3 {
		var args [10]uint64
		for i := range args {
			args[i] = []uint64{r.Uint64(), uint64(r.Intn(4)), uint64(diffVal(r))}[k]
		}
		if err := diffCheck(orig, simp, args); err != nil {
			return changed, fmt.Errorf("seed %d, r1-r9 %#x: %w\noriginal:\n%v\nsimplified:\n%v", seed, args[1:], err, orig, simp)
		}
	}
	return changed, nil
}

func diffVal(r *rand.Rand) int64 { return diffVals[r.Intn(len(diffVals))] }

// TestFoldDiff checks the programs of seeds 0..n-1 (FOLD_DIFF_N=n).
func TestFoldDiff(t *testing.T) {
	n := 50000
	if v, err := strconv.Atoi(os.Getenv("FOLD_DIFF_N")); err == nil {
		n = v
	} else if testing.Short() {
		n = 5000
	}
	var changed atomic.Int64
	t.Cleanup(func() { t.Logf("%d programs, 3 runs each, %d instructions changed", n, changed.Load()) })
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			t.Parallel()
			for seed := int64(w); seed < int64(n); seed += int64(workers) {
				c, err := diffSeed(seed)
				if changed.Add(int64(c)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func FuzzFoldDiff(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) {
		if _, err := diffSeed(seed); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFoldDiffCatches: the check sees a jump folded on a spill a helper
// has since overwritten.
func TestFoldDiffCatches(t *testing.T) {
	orig := asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"),
		stImm(asm.R10, -8, 5, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R6, asm.R10, -8, asm.DWord),
		{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R6, Constant: 5, Offset: 1}, // not taken
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
	}
	wrong := slices.Clone(orig)
	wrong[7] = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource), Offset: 1}
	if err := diffCheck(orig, orig, [10]uint64{}); err != nil {
		t.Fatal(err)
	}
	if err := diffCheck(orig, wrong, [10]uint64{}); err == nil {
		t.Fatal("a jump folded as taken on a stale spill went unseen")
	}
}
