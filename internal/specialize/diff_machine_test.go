package specialize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// The interpreter of the differential tests (fold_diff_test.go): BPF's
// semantics over a memory of regions (one stack per frame, ctx, the
// maps' values), every helper and kfunc the trace programs call, with
// their effect on r0 and memory, BPF-to-BPF calls with a frame each.

const (
	diffStackSize = 512
	diffFrames    = 3                                // the program, a subprogram, xpred
	diffFP        = 0x7f00_0000_0000 + diffStackSize // r10 of frame 0; frame k's is diffFP + k<<16
	diffMapBase   = 0x6000_0000_0000                 // region k's bytes at diffMapBase + k<<16
	diffHandle    = 0x5000_0000_0000                 // a map's pointer (rX = map): diffHandle + region
	diffSteps     = 100000                           // the instruction budget of a run
	diffCtxSlot   = -136                             // the program's spill of ctx (r1 at entry)
	diffArgsSlot  = -192                             // the u64[6] xpred reads its arguments from
	diffPoison    = 0xdead_beef_dead_beef            // r0 and r6-r9 entering a subprogram
	diffClobber   = 0x5a5a_0000                      // r1-r5 + r after a BPF-to-BPF call
)

// diffRegions are the memory besides the stacks, in region order: ctx
// (8 u64: the arguments, the return value at nargs), the frozen .rodata,
// the .bss global, the array map vals (4 values of 16 bytes), a ringbuf
// record, a task storage value, the session cookie.
var diffRegions = []struct {
	name string
	size int
	ro   bool
}{{"ctx", 64, true}, {".rodata", 64, true}, {".bss", 64, false}, {"vals", 64, false},
	{"ringbuf", 64, false}, {"task", 16, false}, {"cookie", 8, false}}

func diffRegion(name string) int {
	return slices.IndexFunc(diffRegions, func(r struct {
		name string
		size int
		ro   bool
	}) bool {
		return r.name == name
	})
}

// diffEnv is one run's world: r2-r9, the function's argument count, the
// regions' first bytes, and flags deciding helpers (a ringbuf reserve
// that fails, a missing task storage, a session's exit).
type diffEnv struct {
	args  [10]uint64
	nargs uint64
	mem   [][]byte
	flags uint64
}

// newDiffEnv draws an environment; rodata is the frozen .rodata (the
// same for every run of a program: InlineRodata reads it once).
func newDiffEnv(r *rand.Rand, k int, rodata []byte) *diffEnv {
	e := &diffEnv{nargs: uint64(r.Intn(7)), flags: r.Uint64()}
	for i := range e.args {
		e.args[i] = []uint64{r.Uint64(), uint64(r.Intn(4)), uint64(diffVal(r))}[k%3]
	}
	for _, reg := range diffRegions {
		b := make([]byte, reg.size)
		for i := range b {
			b[i] = byte([]int64{r.Int63(), int64(r.Intn(3)), diffVal(r)}[k%3] >> (i % 8 * 8))
		}
		if reg.name == ".rodata" {
			b = rodata
		}
		e.mem = append(e.mem, b)
	}
	return e
}

type diffMachine struct {
	reg    [11]uint64
	mem    [][]byte // diffRegions, then the stacks of frames 0..diffFrames-1
	frames []diffReturn
	calls  uint64
	trace  []uint64 // each helper with its arguments, kfunc, relocated instruction run
	env    *diffEnv
	rb     bool // a ringbuf record reserved
}

// diffReturn is a BPF-to-BPF call's return: where to, and the caller's
// r6-r9 (callee-saved).
type diffReturn struct {
	pc    int
	saved [4]uint64
}

func newDiffMachine(env *diffEnv) *diffMachine {
	m := &diffMachine{env: env}
	for _, b := range env.mem {
		m.mem = append(m.mem, slices.Clone(b))
	}
	for range diffFrames {
		s := make([]byte, diffStackSize)
		for i := range s {
			s[i] = byte(0xa5 ^ i)
		}
		m.mem = append(m.mem, s)
	}
	copy(m.reg[2:10], env.args[2:])
	m.reg[1], m.reg[10] = diffAddr("ctx"), diffFP
	return m
}

func diffAddr(region string) uint64 { return diffMapBase + uint64(diffRegion(region))<<16 }

// at returns the size bytes at address a, and whether they may be
// written; nil outside memory.
func (m *diffMachine) at(a uint64, size int) ([]byte, bool) {
	for k := range diffFrames {
		if lo := diffFP + uint64(k)<<16 - diffStackSize; a >= lo && a-lo+uint64(size) <= diffStackSize {
			return m.mem[len(diffRegions)+k][a-lo : a-lo+uint64(size)], true
		}
	}
	for k, reg := range diffRegions {
		if lo := diffMapBase + uint64(k)<<16; a >= lo && a-lo+uint64(size) <= uint64(reg.size) {
			return m.mem[k][a-lo : a-lo+uint64(size)], !reg.ro
		}
	}
	return nil, false
}

func (m *diffMachine) load(a uint64, size int) (uint64, error) {
	b, _ := m.at(a, size)
	if b == nil || size > 8 {
		return 0, fmt.Errorf("load of %d bytes at %#x, outside memory", size, a)
	}
	var v [8]byte
	copy(v[:], b)
	return binary.LittleEndian.Uint64(v[:]), nil
}

func (m *diffMachine) store(a uint64, size int, v uint64) error {
	b, w := m.at(a, size)
	if b == nil || !w || size > 8 {
		return fmt.Errorf("store of %d bytes at %#x, outside writable memory", size, a)
	}
	var x [8]byte
	binary.LittleEndian.PutUint64(x[:], v)
	copy(b, x[:size])
	return nil
}

// write writes n bytes of f(k) at a if it is writable memory (as a
// helper given a bad pointer would fault instead); it reports whether it
// wrote.
func (m *diffMachine) write(a, n uint64, f func(k int) byte) bool {
	if n > diffStackSize {
		return false
	}
	b, w := m.at(a, int(n))
	if b == nil || !w {
		return false
	}
	for k := range b {
		b[k] = f(k)
	}
	return true
}

// atomic runs an atomic read-modify-write (the kernel's semantics,
// kernel/bpf/core.c): add/and/or/xor, with fetch the old value into src;
// xchg; cmpxchg with r0 (old value into r0). A Word operation works on the
// low 32 bits and zero-extends what it fetches.
func (m *diffMachine) atomic(ins asm.Instruction) error {
	size := ins.OpCode.Size().Sizeof()
	a := m.reg[ins.Dst] + uint64(int64(ins.Offset))
	old, err := m.load(a, size)
	if err != nil || (size != 4 && size != 8) {
		return fmt.Errorf("atomic outside memory or of size %d: %v", size, ins)
	}
	src, mask := m.reg[ins.Src], ^uint64(0)
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
	return m.store(a, size, nv)
}

// alu runs an ALU instruction.
func (m *diffMachine) alu(ins asm.Instruction) error {
	op, cls := ins.OpCode, ins.OpCode.Class()
	d, s, mask := m.reg[ins.Dst], uint64(ins.Constant), uint64(63)
	if op.Source() == asm.RegSource {
		s = m.reg[ins.Src]
	}
	if cls == asm.ALUClass {
		d, s, mask = uint64(uint32(d)), uint64(uint32(s)), 31
	}
	v := [16]uint64{asm.Add >> 4: d + s, asm.Sub >> 4: d - s, asm.Or >> 4: d | s, asm.And >> 4: d & s,
		asm.LSh >> 4: d << (s & mask), asm.RSh >> 4: d >> (s & mask), asm.Xor >> 4: d ^ s, asm.Mov >> 4: s,
		asm.ArSh >> 4: uint64(int64(d) >> (s & mask))}[op.ALUOp()>>4]
	if cls == asm.ALUClass && op.ALUOp() == asm.ArSh {
		v = uint64(uint32(int32(uint32(d)) >> (s & mask)))
	}
	if ins.Dst >= asm.R10 || ins.Offset != 0 || !slices.Contains(diffALU, op.ALUOp()) && op.ALUOp() != asm.ArSh {
		return fmt.Errorf("alu %v", ins)
	}
	if m.reg[ins.Dst] = v; cls == asm.ALUClass {
		m.reg[ins.Dst] = uint64(uint32(v))
	}
	return nil
}

// jump reports whether a jump (ja or conditional) is taken.
func (m *diffMachine) jump(ins asm.Instruction) bool {
	op, cls := ins.OpCode, ins.OpCode.Class()
	a, b := m.reg[ins.Dst], uint64(ins.Constant)
	if op.Source() == asm.RegSource {
		b = m.reg[ins.Src]
	}
	sa, sb := int64(a), int64(b)
	if cls == asm.Jump32Class {
		a, b, sa, sb = uint64(uint32(a)), uint64(uint32(b)), int64(int32(a)), int64(int32(b))
	}
	return [16]bool{asm.Ja >> 4: true, asm.JEq >> 4: a == b, asm.JNE >> 4: a != b, asm.JGT >> 4: a > b,
		asm.JGE >> 4: a >= b, asm.JLT >> 4: a < b, asm.JLE >> 4: a <= b, asm.JSGT >> 4: sa > sb, asm.JSGE >> 4: sa >= sb,
		asm.JSLT >> 4: sa < sb, asm.JSLE >> 4: sa <= sb, asm.JSet >> 4: a&b != 0}[op.JumpOp()>>4]
}

// mapLoad runs a 64-bit immediate: a plain one, a map's pointer or the
// address of a map's value (the regions of the same name).
func (m *diffMachine) mapLoad(ins asm.Instruction) error {
	k := diffRegion(ins.Reference())
	switch {
	case ins.Src == asm.R0 && ins.Reference() == "":
		m.reg[ins.Dst] = uint64(ins.Constant)
	case ins.Src == asm.PseudoMapFD && k >= 0:
		m.reg[ins.Dst] = diffHandle + uint64(k)
	case ins.Src == asm.PseudoMapValue && k >= 0:
		m.reg[ins.Dst] = diffMapBase + uint64(k)<<16 + uint64(ins.Constant)>>32
	default:
		return fmt.Errorf("64-bit load %v", ins)
	}
	return nil
}

// diffRun runs insns from instruction 0 in env.
func diffRun(insns asm.Instructions, env *diffEnv) (*diffMachine, error) {
	m := newDiffMachine(env)
	slots, index := make([]int, len(insns)), make([]int, 2*len(insns)+1) // slot: instruction+1
	syms := map[string]int{}
	for i, pos := 0, 0; i < len(insns); i++ {
		slots[i], index[pos] = pos, i+1
		pos += int(insns[i].Size() / asm.InstructionSize)
		if s := insns[i].Symbol(); s != "" {
			syms[s] = i
		}
	}
	for pc, steps := 0, 0; pc < len(insns); steps++ {
		if steps >= diffSteps {
			return m, fmt.Errorf("more than %d instructions run", diffSteps)
		}
		ins := insns[pc]
		pc++
		if btf.CORERelocationMetadata(&ins) != nil {
			// relocated at load, after the passes: another value than
			// the compiled one; and it must still be there
			ins.Constant ^= 1
			m.trace = append(m.trace, 3<<32, uint64(ins.OpCode), uint64(ins.Constant))
		}
		next, exited, err := m.step(ins, pc, syms)
		switch {
		case err != nil:
			return m, fmt.Errorf("at %d: %w", pc-1, err)
		case exited:
			return m, nil
		case next != pc && next >= 0:
			pc = next
		case next < 0: // a jump
			to := slots[pc-1] + 1 + jumpOffset(ins)
			if to < 0 || to >= len(index) || index[to] == 0 {
				return m, fmt.Errorf("jump into nowhere: %v", ins)
			}
			pc = index[to] - 1
		}
	}
	return m, fmt.Errorf("fell off the end")
}

// step runs ins, pc being the next instruction's index: it returns the
// instruction to go on at (-1: ins's jump target), or exited.
func (m *diffMachine) step(ins asm.Instruction, pc int, syms map[string]int) (next int, exited bool, err error) {
	op, cls := ins.OpCode, ins.OpCode.Class()
	switch {
	case cls.IsALU():
		return pc, false, m.alu(ins)
	case op.IsDWordLoad():
		return pc, false, m.mapLoad(ins)
	case cls == asm.LdXClass && op.Mode() == asm.MemMode:
		m.reg[ins.Dst], err = m.load(m.reg[ins.Src]+uint64(int64(ins.Offset)), op.Size().Sizeof())
		return pc, false, err
	case (cls == asm.StClass || cls == asm.StXClass) && op.Mode() == asm.MemMode:
		v := uint64(ins.Constant)
		if cls == asm.StXClass {
			v = m.reg[ins.Src]
		}
		return pc, false, m.store(m.reg[ins.Dst]+uint64(int64(ins.Offset)), op.Size().Sizeof(), v)
	case cls == asm.StXClass && op.Mode() == asm.AtomicMode:
		return pc, false, m.atomic(ins)
	case cls.IsJump() && op.JumpOp() == asm.Exit:
		if len(m.frames) == 0 {
			return pc, true, nil
		}
		f := m.frames[len(m.frames)-1]
		m.frames = m.frames[:len(m.frames)-1]
		copy(m.reg[6:10], f.saved[:])
		for r := 1; r <= 5; r++ {
			m.reg[r] = diffClobber + uint64(r) // r1-r5: clobbered
		}
		m.reg[10] -= 1 << 16
		return f.pc, false, nil
	case ins.IsFunctionCall():
		to, ok := syms[ins.Reference()]
		if !ok || len(m.frames)+1 >= diffFrames {
			return pc, false, fmt.Errorf("call of %q at depth %d", ins.Reference(), len(m.frames))
		}
		f := diffReturn{pc: pc}
		copy(f.saved[:], m.reg[6:10])
		m.frames = append(m.frames, f)
		m.reg[0], m.reg[6], m.reg[7], m.reg[8], m.reg[9] = diffPoison, diffPoison, diffPoison, diffPoison, diffPoison
		m.reg[10] += 1 << 16
		return to, false, nil
	case ins.IsBuiltinCall():
		return pc, false, m.call(asm.BuiltinFunc(ins.Constant))
	case ins.IsKfuncCall():
		m.kfunc(ins.Constant)
		return pc, false, nil
	case cls == asm.JumpClass && op.JumpOp() == asm.Ja || cls.IsJump() && slices.Contains(diffJumps, op.JumpOp()):
		if m.jump(ins) {
			return -1, false, nil
		}
		return pc, false, nil
	}
	return pc, false, fmt.Errorf("instruction %v", ins)
}

// diffSame reports how two runs differ: r0, memory (every stack, every
// map value), the calls made.
func diffSame(a, b *diffMachine) error {
	if a.reg[0] != b.reg[0] {
		return fmt.Errorf("r0 %#x, then %#x", a.reg[0], b.reg[0])
	}
	for k := range a.mem {
		if !bytes.Equal(a.mem[k], b.mem[k]) {
			name := fmt.Sprintf("the stack of frame %d", k-len(diffRegions))
			if k < len(diffRegions) {
				name = diffRegions[k].name
			}
			return fmt.Errorf("%s differs:\n%x\n%x", name, a.mem[k][max(0, len(a.mem[k])-64):], b.mem[k][max(0, len(b.mem[k])-64):])
		}
	}
	if !slices.Equal(a.trace, b.trace) {
		return fmt.Errorf("calls %x, then %x", a.trace, b.trace)
	}
	return nil
}
