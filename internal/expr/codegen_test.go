package expr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// vm runs the instruction subset the predicate compiler emits, over a
// sparse memory of regions, with the four probe-read helpers. It is a
// reference independent of the code generator: the kernel's semantics of
// each instruction (and bpf_probe_read_*_str's return value, the bytes
// copied including the NUL).
type vm struct {
	regions []region
	inline  bool // runInline: running past the end returns r0
}

type region struct {
	base uint64
	data []byte
}

const (
	stackTop  = uint64(0x7000_0000)
	argsBase  = uint64(0x6000_0000)
	bssBase   = uint64(0x6100_0000) // the fault counters' map value
	kernelMem = uint64(0xffff_8880_0000_0000)
	userMem   = uint64(0x5555_0000_0000)
	vmCPU     = 3 // bpf_get_smp_processor_id in the vm
)

// testFaults: 4 rows of 64 bytes, the counter 40 bytes into each: the
// vm's CPU 3 counts at 40 + 3*64.
var testFaults = FaultCounter{Map: ".bss", Off: 40, Rows: 4, RowBytes: 64}

func compile(t *testing.T, plans map[uint32]*Plan) *Predicates {
	t.Helper()
	pr, err := CompilePredicates(plans, testFaults)
	require.NoError(t, err)
	return pr
}

func (m *vm) find(addr uint64, n int) []byte {
	for _, r := range m.regions {
		if addr >= r.base && addr+uint64(n) <= r.base+uint64(len(r.data)) {
			return r.data[addr-r.base : addr-r.base+uint64(n)]
		}
	}
	return nil
}

// runBoth runs pr's subprogram (run) and, when it has one, its inline
// form (runInline), which must decide the same.
func (m *vm) runBoth(t *testing.T, pr *Predicates, args [MaxArgs]uint64, ret, sel uint64) (pass bool, faults uint64) {
	t.Helper()
	pass, faults = m.run(t, pr.Insns, args, ret, sel)
	if pr.Inline != nil {
		ip, ifl := m.runInline(t, pr.Inline, args, ret, sel)
		assert.Equal(t, pass, ip, "the inline code decides as the subprogram (args %x ret %#x sel %d)", args, ret, sel)
		assert.Equal(t, faults, ifl, "the inline code reads no memory")
	}
	return pass, faults
}

// runInline runs code spliced in place of a call of xpred: it must
// touch neither r6-r9 nor the stack (the caller's), contain no exit and
// no call, and leave its result in r0 when it runs past its end.
func (m *vm) runInline(t *testing.T, insns asm.Instructions, args [MaxArgs]uint64, ret, sel uint64) (pass bool, faults uint64) {
	t.Helper()
	for i, ins := range insns {
		for _, r := range []asm.Register{ins.Dst, ins.Src} {
			if ins.OpCode.IsDWordLoad() && r == ins.Src {
				continue // a pseudo source, not a register
			}
			require.LessOrEqual(t, r, asm.R5, "insn %d: %v uses a register the caller keeps, or the stack", i, ins)
		}
		if ins.OpCode.Class().IsJump() {
			require.NotContains(t, []asm.JumpOp{asm.Exit, asm.Call}, ins.OpCode.JumpOp(), "insn %d: %v", i, ins)
		}
	}
	m.inline = true
	defer func() { m.inline = false }()
	return m.run(t, insns, args, ret, sel)
}

func (m *vm) run(t *testing.T, insns asm.Instructions, args [MaxArgs]uint64, ret, sel uint64) (pass bool, faults uint64) {
	t.Helper()
	insns = reencode(t, insns)
	bss := m.pushFrame(args)
	defer func() {
		m.regions = m.regions[3:]
		faults = binary.LittleEndian.Uint64(bss[testFaults.Off+vmCPU*testFaults.RowBytes:])
	}()
	x := &vmExec{m: m, insns: insns}
	x.idx, x.raw = rawIndex(insns)
	x.r[1], x.r[2], x.r[3], x.r[10] = argsBase, ret, sel, stackTop
	for steps := 0; ; steps++ {
		require.Less(t, steps, 100000, "runaway program")
		if m.inline && x.pc == len(insns) {
			require.LessOrEqual(t, x.r[0], uint64(1), "the inline code leaves 0 or 1")
			return x.r[0] == 1, 0
		}
		require.Less(t, x.pc, len(insns), "fell off the end")
		if exited, pass := x.step(t); exited {
			return pass, 0
		}
		x.pc = x.next
	}
}

// reencode is what the kernel gets: the instructions as encoded (an
// immediate that does not fit would not survive), decoded again.
func reencode(t *testing.T, insns asm.Instructions) asm.Instructions {
	t.Helper()
	var enc bytes.Buffer
	require.NoError(t, insns.Marshal(&enc, binary.LittleEndian))
	insns, err := asm.AppendInstructions(nil, &enc, binary.LittleEndian, "linux")
	require.NoError(t, err)
	return insns
}

// pushFrame maps a run's stack (filled with garbage, so that a read of an
// unwritten slot shows), its args array and the fault counters' map value
// in front of m's regions, and returns the latter.
func (m *vm) pushFrame(args [MaxArgs]uint64) (bss []byte) {
	stack := make([]byte, 512)
	for i := range stack {
		stack[i] = 0xa5
	}
	ab := make([]byte, 8*MaxArgs)
	for i, a := range args {
		binary.LittleEndian.PutUint64(ab[8*i:], a)
	}
	bss = make([]byte, testFaults.Rows*testFaults.RowBytes)
	m.regions = append([]region{{stackTop - 512, stack}, {argsBase, ab}, {bssBase, bss}}, m.regions...)
	return bss
}

// rawIndex maps raw slots to instruction indexes (-1: the second slot of
// a 64-bit immediate load) and instruction indexes to raw slots: jump
// offsets count raw slots.
func rawIndex(insns asm.Instructions) (idx, raw []int) {
	for i, ins := range insns {
		idx = append(idx, i)
		if ins.Size() == 16 {
			idx = append(idx, -1)
		}
	}
	raw = make([]int, len(insns))
	for s, i := range idx {
		if i >= 0 {
			raw[i] = s
		}
	}
	return idx, raw
}

// vmExec is one run's machine state.
type vmExec struct {
	m        *vm
	insns    asm.Instructions
	idx, raw []int // rawIndex
	r        [11]uint64
	pc, next int
}

// step executes the instruction at pc, setting next; exited reports an
// exit instruction, with its result.
func (x *vmExec) step(t *testing.T) (exited, pass bool) {
	ins := x.insns[x.pc]
	op := ins.OpCode
	x.next = x.pc + 1
	switch cls := op.Class(); {
	case cls == asm.ALU64Class:
		x.alu(t, ins)
	case op.IsDWordLoad() && ins.Src == asm.PseudoMapValue:
		// The map's fd (unset here) in the low half, the offset
		// in its value in the high half.
		x.r[ins.Dst] = bssBase + uint64(ins.Constant)>>32
	case op.IsDWordLoad():
		require.Equal(t, asm.Register(0), ins.Src, "insn %d: %v", x.pc, ins)
		x.r[ins.Dst] = uint64(ins.Constant)
	case cls == asm.LdXClass:
		n := int(op.Size().Sizeof())
		b := x.m.find(x.r[ins.Src]+uint64(int64(ins.Offset)), n)
		require.NotNil(t, b, "insn %d: load outside memory: %v", x.pc, ins)
		var v [8]byte
		copy(v[:], b)
		x.r[ins.Dst] = binary.LittleEndian.Uint64(v[:])
	case cls == asm.StXClass && op.Mode() == asm.AtomicMode:
		require.Equal(t, asm.DWord, op.Size(), "insn %d: %v", x.pc, ins)
		require.Equal(t, int64(asm.AddAtomic), ins.Constant, "insn %d: %v", x.pc, ins)
		b := x.m.find(x.r[ins.Dst]+uint64(int64(ins.Offset)), 8)
		require.NotNil(t, b, "insn %d: atomic outside memory: %v", x.pc, ins)
		binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)+x.r[ins.Src])
	case cls == asm.StClass || cls == asm.StXClass:
		x.store(t, ins)
	case cls == asm.JumpClass:
		return x.jumpInsn(t, ins)
	default:
		t.Fatalf("insn %d: %v", x.pc, ins)
	}
	return false, false
}

// alu executes a 64-bit ALU instruction.
func (x *vmExec) alu(t *testing.T, ins asm.Instruction) {
	src := uint64(ins.Constant)
	if ins.OpCode.Source() == asm.RegSource {
		src = x.r[ins.Src]
	}
	d := &x.r[ins.Dst]
	switch ins.OpCode.ALUOp() {
	case asm.Mov:
		*d = src
	case asm.Add:
		*d += src
	case asm.And:
		*d &= src
	case asm.Or:
		*d |= src
	case asm.Xor:
		*d ^= src
	case asm.LSh:
		*d <<= src & 63
	case asm.RSh:
		*d >>= src & 63
	case asm.ArSh:
		*d = uint64(int64(*d) >> (src & 63))
	default:
		t.Fatalf("insn %d: ALU op %v", x.pc, ins)
	}
}

// store executes a store of an immediate or a register.
func (x *vmExec) store(t *testing.T, ins asm.Instruction) {
	n := int(ins.OpCode.Size().Sizeof())
	b := x.m.find(x.r[ins.Dst]+uint64(int64(ins.Offset)), n)
	require.NotNil(t, b, "insn %d: store outside memory: %v", x.pc, ins)
	v := uint64(ins.Constant)
	if ins.OpCode.Class() == asm.StXClass {
		v = x.r[ins.Src]
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], v)
	copy(b, w[:n])
}

// jumpInsn executes an exit, a helper call or a jump.
func (x *vmExec) jumpInsn(t *testing.T, ins asm.Instruction) (exited, pass bool) {
	r := &x.r
	jo := ins.OpCode.JumpOp()
	switch jo {
	case asm.Exit:
		require.LessOrEqual(t, r[0], uint64(1), "xpred returns 0 or 1")
		return true, r[0] == 1
	case asm.Call:
		r[0] = x.m.helper(t, asm.BuiltinFunc(ins.Constant), r[1], r[2], r[3])
		r[1], r[2], r[3], r[4], r[5] = 0xdead, 0xdead, 0xdead, 0xdead, 0xdead // clobbered
	case asm.Ja:
		x.jump(t, ins)
	default:
		a, b := r[ins.Dst], uint64(ins.Constant)
		if ins.OpCode.Source() == asm.RegSource {
			b = r[ins.Src]
		}
		sa, sb := int64(a), int64(b)
		cond := map[asm.JumpOp]bool{
			asm.JEq: a == b, asm.JNE: a != b, asm.JGT: a > b, asm.JGE: a >= b, asm.JLT: a < b, asm.JLE: a <= b,
			asm.JSGT: sa > sb, asm.JSGE: sa >= sb, asm.JSLT: sa < sb, asm.JSLE: sa <= sb,
		}
		c, ok := cond[jo]
		require.True(t, ok, "insn %d: jump %v", x.pc, ins)
		if c {
			x.jump(t, ins)
		}
	}
	return false, false
}

// jump sets next to the target of the taken jump ins.
func (x *vmExec) jump(t *testing.T, ins asm.Instruction) {
	target := x.raw[x.pc] + 1 + int(ins.Offset)
	if x.m.inline && target == len(x.idx) {
		x.next = len(x.insns) // past the end: the caller's next instruction
		return
	}
	require.True(t, target >= 0 && target < len(x.idx) && x.idx[target] >= 0, "jump into nowhere at %d: %v", x.pc, ins)
	x.next = x.idx[target]
}

// helper: probe reads; the user ones only read below the kernel half,
// the kernel ones only above (a wrong choice faults, as on a real kernel
// with a non-overlapping address space).
func (m *vm) helper(t *testing.T, fn asm.BuiltinFunc, dst, size, src uint64) uint64 {
	if fn == asm.FnGetSmpProcessorId {
		return vmCPU
	}
	user := src < 1<<63
	want := map[asm.BuiltinFunc]bool{asm.FnProbeReadUser: true, asm.FnProbeReadUserStr: true,
		asm.FnProbeReadKernel: false, asm.FnProbeReadKernelStr: false}
	isUser, ok := want[fn]
	require.True(t, ok, "helper %v", fn)
	d := m.find(dst, int(size))
	require.NotNil(t, d, "helper %v: dst %#x size %d outside the stack", fn, dst, size)
	efault := uint64(0xfffffffffffffff2) // -EFAULT
	if isUser != user {
		return efault
	}
	if fn == asm.FnProbeReadUser || fn == asm.FnProbeReadKernel {
		s := m.find(src, int(size))
		if s == nil {
			return efault
		}
		copy(d, s)
		return 0
	}
	for i := 0; i < int(size); i++ {
		s := m.find(src+uint64(i), 1)
		if s == nil {
			return efault
		}
		if i == int(size)-1 || s[0] == 0 {
			d[i] = 0
			return uint64(i + 1)
		}
		d[i] = s[0]
	}
	return 0
}

func le64(v uint64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return b
}

// put writes b at addr in a region of its own.
func (m *vm) put(addr uint64, b []byte) { m.regions = append(m.regions, region{addr, b}) }

func compileOne(t *testing.T, src string) (*Plan, *Predicates) {
	t.Helper()
	p, err := one(t, src, env())
	require.NoError(t, err)
	pr := compile(t, map[uint32]*Plan{7: p})
	require.NotNil(t, pr)
	return p, pr
}

func TestPredicateScalars(t *testing.T) {
	_, pr := compileOne(t, "count == 1")
	require.NotNil(t, pr.Inline, "reads no memory: inlined at each call")
	assert.Equal(t, "--filter compiled to 14 BPF instructions (1 distinct program), inlined where the programs decide (no memory read: no call)", pr.Describe())
	m := &vm{}
	for _, c := range []struct {
		count uint64
		pass  bool
	}{{1, true}, {0, false}, {4096, false}, {1 | 1<<40, false}} {
		pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{kernelMem, userMem, c.count}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, c.pass, pass, "count %d", c.count)
		assert.Zero(t, faults)
	}
	// No predicate selected: the call passes.
	pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{}, 0, 0)
	assert.True(t, pass)

	// Entry and exit halves; a signed ret compared with an errno.
	p, pr := compileOne(t, "count > 4096 && ret == -EAGAIN")
	assert.True(t, p.EntryRegsOnly())
	x := p.Encode()
	assert.Equal(t, uint8(1), x.EntryRegs)
	assert.Equal(t, uint8(3), x.PredNargs, "count is the third argument")
	p, mem := compileOne(t, "file->f_mode & 0x4")
	assert.Nil(t, mem.Inline, "a read of memory (a helper call): the subprogram only")
	assert.Equal(t, "--filter compiled to 35 BPF instructions (1 distinct program), a subprogram", mem.Describe())
	x = p.Encode()
	assert.Equal(t, uint8(0), x.EntryRegs, "a read of memory: the fexit cannot decide again")
	assert.Equal(t, uint8(1), x.PredNargs)
	for _, c := range []struct {
		count, ret  uint64
		entry, exit bool
	}{{8192, 0, true, false}, {4096, ^uint64(10), false, true}, {1 << 20, ^uint64(10), true, true}, {4097, ^uint64(1), true, false}} {
		pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, c.count}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, c.entry, pass, "entry count %d", c.count)
		pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{0, 0, c.count}, c.ret, uint64(pr.Exit[7]))
		assert.Equal(t, c.exit, pass, "exit ret %d", int64(c.ret))
	}

	// A 64-bit constant that needs a 64-bit immediate; signed < on a
	// pointer-sized int; a boolean program with ! and ||.
	_, pr = compileOne(t, "count == 0x5eedf11e5eedf11e || !(count < 3)")
	for _, c := range []struct {
		count uint64
		pass  bool
	}{{0x5eedf11e5eedf11e, true}, {2, false}, {3, true}, {0, false}} {
		pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, c.count}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, c.pass, pass, "count %#x", c.count)
	}
}

// The synthetic file of expr_test.go laid out in fake kernel memory at
// its BTF offsets: f_mode at 4, f_path.dentry at 72, f_name at 120;
// dentry's d_name.len at 36 and d_name.name at 40.
func fileMem(m *vm, file, dentry, name uint64, nameStr string, mode uint32, fname string) {
	f := make([]byte, 256)
	binary.LittleEndian.PutUint32(f[4:], mode)
	copy(f[72:], le64(dentry))
	copy(f[120:], fname)
	m.put(file, f)
	d := make([]byte, 96)
	binary.LittleEndian.PutUint32(d[36:], uint32(len(nameStr)))
	copy(d[40:], le64(name))
	m.put(dentry, d)
	m.put(name, append([]byte(nameStr), 0))
}

func TestPredicateMemory(t *testing.T) {
	const file, dentry, name = kernelMem + 0x1000, kernelMem + 0x2000, kernelMem + 0x3000
	m := &vm{}
	fileMem(m, file, dentry, name, "hostname", 0x1d, "tmpfile")

	cases := []struct {
		src         string
		pass        bool
		faults      uint64
		withoutFile bool // file = NULL: every read faults
	}{
		{`file->f_path.dentry->d_name.name == "hostname"`, true, 0, false},
		{`file->f_path.dentry->d_name.name == "hostnam"`, false, 0, false},   // a prefix is not equal
		{`file->f_path.dentry->d_name.name == "hostnames"`, false, 0, false}, // longer
		{`file->f_path.dentry->d_name.name ~ "host*"`, true, 0, false},
		{`file->f_path.dentry->d_name.name ~ "hostname*"`, true, 0, false},
		{`file->f_path.dentry->d_name.name ~ "hostnamex*"`, false, 0, false},
		{`file->f_path.dentry->d_name.len == 8`, true, 0, false},
		{`file->f_path.dentry->d_name.len > 8`, false, 0, false},
		{`file->f_name ~ "tmp*"`, true, 0, false},
		{`file->f_name == "tmpfile"`, true, 0, false},
		{`file->f_mode & 0x4`, true, 0, false},
		{`file->f_mode & 0x2`, false, 0, false},
		{`(file->f_mode & 0x2) || file->f_path.dentry->d_name.len == 8`, true, 0, false},
		// NULL file: each comparison's read faults, is false, is counted.
		{`file->f_path.dentry->d_name.len == 8`, false, 1, true},
		{`!(file->f_path.dentry->d_name.len == 8)`, true, 1, true},
		{`file->f_mode & 0x4 || file->f_path.dentry->d_name.name == "hostname"`, false, 2, true},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			_, pr := compileOne(t, c.src)
			f := uint64(file)
			if c.withoutFile {
				f = 0
			}
			pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{f, userMem, 1}, 0, uint64(pr.Entry[7]))
			assert.Equal(t, c.pass, pass)
			assert.Equal(t, c.faults, faults)
		})
	}

	// A user-space string (buf): read with the user helper.
	m.put(userMem, []byte("abc\x00"))
	_, pr := compileOne(t, `buf == "abc"`)
	pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{0, userMem, 0}, 0, uint64(pr.Entry[7]))
	assert.True(t, pass)
	assert.Zero(t, faults)
}

// Comparisons of two values: both fetched, compared signed or unsigned
// as C converts them.
func TestPredicateTwoValues(t *testing.T) {
	const file, dentry, name = kernelMem + 0x1000, kernelMem + 0x2000, kernelMem + 0x3000
	m := &vm{}
	fileMem(m, file, dentry, name, "hostname", 0x1d, "tmpfile")
	p, err := one(t, "count > file->f_path.dentry->d_name.len", env())
	require.NoError(t, err)
	require.NotNil(t, p.Terms[0].RHS)
	assert.Equal(t, uint8(OpGT), p.Terms[0].Op, "size_t against unsigned int: unsigned")
	assert.False(t, p.EntryRegsOnly())
	pr, err := CompilePredicates(map[uint32]*Plan{7: p}, testFaults)
	require.NoError(t, err)
	for _, c := range []struct {
		count uint64
		pass  bool
	}{{9, true}, {8, false}, {1, false}, {1 << 33, true}} {
		pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{file, 0, c.count}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, c.pass, pass, "count %d", c.count)
		assert.Zero(t, faults)
	}
	// The right-hand read faults: false, counted.
	pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, 9}, 0, uint64(pr.Entry[7]))
	assert.False(t, pass)
	assert.Equal(t, uint64(1), faults)

	// ret (ssize_t, signed) against count (size_t): unsigned, as C does
	// for long against unsigned long; an int against an unsigned char:
	// signed (the char converts to int).
	p, err = one(t, "ret < count", env())
	require.NoError(t, err)
	assert.Equal(t, uint8(OpLT), p.Terms[0].Op)
	assert.True(t, p.ExitArgs)
	pr, err = CompilePredicates(map[uint32]*Plan{7: p}, testFaults)
	require.NoError(t, err)
	pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{0, 0, 5}, 3, uint64(pr.Exit[7]))
	assert.True(t, pass, "3 < 5")
	pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{0, 0, 5}, ^uint64(0), uint64(pr.Exit[7]))
	assert.False(t, pass, "-1 as unsigned is not < 5")
	assert.True(t, signedCompare(Fetch{Size: 4, Signed: true}, Fetch{Size: 1}))
	assert.False(t, signedCompare(Fetch{Size: 4, Signed: true}, Fetch{Size: 4}))
	assert.True(t, signedCompare(Fetch{Size: 8, Signed: true}, Fetch{Size: 4}))
	assert.True(t, signedCompare(Fetch{Size: 4, Signed: true}, Fetch{Size: 8, Signed: true}))
}

// Bitfields: the byte holding the field read, shifted down, cut to its
// width, sign-extended when signed; refused as --arg values.
func TestPredicateBitfields(t *testing.T) {
	const file = kernelMem + 0x1000
	m := &vm{}
	f := make([]byte, 256)
	f[112] = 0b1111_1101 // f_bits (3 bits at bit 0) = 5, the bits above set
	m.put(file, f)
	p, err := one(t, "file->f_bits == 5", env())
	require.NoError(t, err)
	assert.Equal(t, Fetch{Loads: []int32{112}, Size: 1, Bits: 3}, p.Terms[0].Fetch)
	pr, err := CompilePredicates(map[uint32]*Plan{7: p}, testFaults)
	require.NoError(t, err)
	pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{file}, 0, uint64(pr.Entry[7]))
	assert.True(t, pass)
	assert.Zero(t, faults)
	f[112] = 0b0000_0010
	pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{file}, 0, uint64(pr.Entry[7]))
	assert.False(t, pass, "f_bits = 2")

	// A signed 4-bit field at bit 7 of a 2-byte read: 0b1010 is -6.
	t6 := Term{Fetch: Fetch{Src: 0, Loads: []int32{200}, Size: 2, Shift: 7, Bits: 4, Signed: true}, Op: OpEQ, K: ^uint64(5)}
	pr, err = CompilePredicates(map[uint32]*Plan{1: {Terms: []Term{t6}, EntryOps: []byte{BoolPush}}}, testFaults)
	require.NoError(t, err)
	f[200], f[201] = 0x00, 0b0000_0101 // bits 7..10 = 1010 (bit 7 in byte 0 is 0, bits 8..10 = 101)
	pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{file}, 0, uint64(pr.Entry[1]))
	assert.True(t, pass, "-6")

	// As an --arg value: the byte read, and the shift and width in the
	// fetch's tail for xfetch (bpf/trace.bpf.c, FTP_XF_BITS).
	s, err := ParseSet([]string{"file->f_bits"}, nil)
	require.NoError(t, err)
	vp, _, err := s.CompileFunc(env())
	require.NoError(t, err)
	require.Len(t, vp.Values, 1)
	x := vp.Encode()
	assert.Equal(t, uint8(bpfobj.TraceFtpXflagsFTP_XF_BITS), x.V[0].Flags)
	assert.Equal(t, int32(0|3<<8), x.V[0].Tail, "shift 0, 3 bits")
	assert.Equal(t, uint8(1), x.V[0].Size)
	assert.Equal(t, [4]int32{112}, x.V[0].Off)
}

// TestValueBitfieldEncode: a signed bitfield across a byte boundary as an
// --arg value: read as the bytes holding it, shift and width in the tail,
// printed as its declared type (int: 4 bytes, signed).
func TestValueBitfieldEncode(t *testing.T) {
	bf := &btf.Struct{Name: "bf", Size: 8, Members: []btf.Member{
		{Name: "a", Type: u32T},
		{Name: "y", Type: intT, Offset: 32 + 6, BitfieldSize: 5}, // bits 38..42: bytes 4 and 5
	}}
	e := &Env{Func: "f", Proto: &btf.FuncProto{Return: intT, Params: []btf.FuncParam{
		{Name: "p", Type: &btf.Pointer{Target: bf}}}}}
	s, err := ParseSet([]string{"p->y"}, nil)
	require.NoError(t, err)
	p, _, err := s.CompileFunc(e)
	require.NoError(t, err)
	require.Len(t, p.Values, 1)
	v := p.Values[0]
	assert.Equal(t, symbols.ArgInt, v.Kind)
	assert.Equal(t, uint32(4), v.Size)
	x := p.Encode()
	assert.Equal(t, uint8(bpfobj.TraceFtpXflagsFTP_XF_BITS|bpfobj.TraceFtpXflagsFTP_XF_SIGNED), x.V[0].Flags)
	assert.Equal(t, int32(6|5<<8), x.V[0].Tail)
	assert.Equal(t, uint8(2), x.V[0].Size, "bytes 4 and 5")
	assert.Equal(t, [4]int32{4}, x.V[0].Off)
}

func TestPredicateSharing(t *testing.T) {
	// Two functions with the same predicate share one program; a third
	// with another gets its own; exit-only predicates have no entry one.
	plans := map[uint32]*Plan{}
	for id, src := range map[uint32]string{1: "count == 1", 2: "count == 1", 3: "count == 2", 4: "ret == -ENOENT"} {
		p, err := one(t, src, env())
		require.NoError(t, err)
		plans[id] = p
	}
	pr, err := CompilePredicates(plans, testFaults)
	require.NoError(t, err)
	assert.Equal(t, 3, pr.Programs)
	assert.Equal(t, pr.Entry[1], pr.Entry[2])
	assert.NotEqual(t, pr.Entry[1], pr.Entry[3])
	_, ok := pr.Entry[4]
	assert.False(t, ok)
	m := &vm{}
	for id, want := range map[uint32][2]bool{1: {true, false}, 3: {false, true}} {
		for i, count := range []uint64{1, 2} {
			pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, count}, 0, uint64(pr.Entry[id]))
			assert.Equal(t, want[i], pass, "function %d count %d", id, count)
		}
	}
	pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{}, ^uint64(1), uint64(pr.Exit[4]))
	assert.True(t, pass)
	pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{}, ^uint64(2), uint64(pr.Exit[4]))
	assert.False(t, pass)

	none, err := CompilePredicates(map[uint32]*Plan{1: {Values: []Value{{Expr: "count"}}}}, testFaults)
	require.NoError(t, err)
	assert.Nil(t, none)
}

func TestPredicateTruthTable(t *testing.T) {
	// Eight comparisons: the table spans four words.
	src := "count != 1 && count != 2 && count != 3 && count != 4 && count != 5 && count != 6 && count != 7 && !(count == 8)"
	_, pr := compileOne(t, src)
	m := &vm{}
	for count := uint64(0); count < 12; count++ {
		pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, count}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, count == 0 || count > 8, pass, fmt.Sprint("count ", count))
	}
	tab, err := Table([]byte{BoolPush | 0, BoolPush | 1, BoolOr, BoolNot}, 2)
	require.NoError(t, err)
	assert.Equal(t, uint64(0b0001), tab[0]) // true only when both are false
}

// Identical predicates of two values share one program (the key holds
// the right-hand value's contents), and a thousand distinct programs
// still compile: each jump spans one program.
// countPlans is n functions' plans, function id's `count == id`: n
// distinct one-comparison programs.
func countPlans(t *testing.T, n uint32) map[uint32]*Plan {
	t.Helper()
	plans := map[uint32]*Plan{}
	for id := uint32(0); id < n; id++ {
		p, err := one(t, fmt.Sprintf("count == %d", id), env())
		require.NoError(t, err)
		plans[id] = p
	}
	return plans
}

func TestPredicateManyPrograms(t *testing.T) {
	plans := map[uint32]*Plan{}
	for id := uint32(0); id < 3; id++ {
		p, err := one(t, "count > file->f_path.dentry->d_name.len", env())
		require.NoError(t, err)
		plans[id] = p
	}
	assert.Equal(t, 1, compile(t, plans).Programs)

	// 40 one-comparison programs (~10 slots each): inlined.
	pr40 := compile(t, countPlans(t, 40))
	require.NotNil(t, pr40.Inline)
	assert.LessOrEqual(t, RawSlots(pr40.Inline), MaxInline)
	pass, _ := (&vm{}).runBoth(t, pr40, [MaxArgs]uint64{0, 0, 39}, 0, uint64(pr40.Entry[39]))
	assert.True(t, pass, "the last program, its own count")

	pr := compile(t, countPlans(t, 1000))
	assert.Equal(t, 1000, pr.Programs)
	assert.Nil(t, pr.Inline, "beyond MaxInline slots: the subprogram only")
	m := &vm{}
	for _, id := range []uint32{0, 517, 999} {
		pass, _ := m.runBoth(t, pr, [MaxArgs]uint64{0, 0, uint64(id)}, 0, uint64(pr.Entry[id]))
		assert.True(t, pass, "function %d, its own count", id)
		pass, _ = m.runBoth(t, pr, [MaxArgs]uint64{0, 0, uint64(id + 1)}, 0, uint64(pr.Entry[id]))
		assert.False(t, pass, "function %d, another count", id)
	}
}

// Bitfields through the checker: offsets in bits inside an anonymous
// union's struct, a signed field across a byte boundary, the read ending
// at the field's last byte, and C's promotion of narrow fields to int.
func TestPredicateBitfieldLayout(t *testing.T) {
	bf := &btf.Struct{Name: "bf", Size: 16, Members: []btf.Member{
		{Name: "a", Type: u32T},
		{Name: "", Type: &btf.Union{Size: 8, Members: []btf.Member{
			{Name: "", Type: &btf.Struct{Size: 8, Members: []btf.Member{
				{Name: "x", Type: u32T, BitfieldSize: 3},              // bits 32..34 of bf
				{Name: "y", Type: intT, Offset: 6, BitfieldSize: 5},   // bits 38..42: across bytes 4 and 5
				{Name: "w", Type: u32T, Offset: 11, BitfieldSize: 20}, // bits 43..62: bytes 5..7
			}}},
			{Name: "raw", Type: u64T},
		}}, Offset: 32},
	}}
	e := &Env{Func: "f", Proto: &btf.FuncProto{Return: intT, Params: []btf.FuncParam{
		{Name: "p", Type: &btf.Pointer{Target: bf}}, {Name: "s", Type: intT}}}}
	p, err := one(t, "p->y == -3", e)
	require.NoError(t, err)
	assert.Equal(t, Fetch{Loads: []int32{4}, Size: 2, Shift: 6, Bits: 5, Signed: true}, p.Terms[0].Fetch)
	p, err = one(t, "p->w == 0xfffff", e)
	require.NoError(t, err)
	assert.Equal(t, Fetch{Loads: []int32{5}, Size: 3, Shift: 3, Bits: 20}, p.Terms[0].Fetch, "3 bytes: none past the field")

	const addr = kernelMem + 0x4000
	mem := make([]byte, 16)
	raw := uint64(5) | uint64(0b11101)<<6 | uint64(0xfffff)<<11 // from byte 4 (bit 32): x=5, y=-3, w=all ones
	binary.LittleEndian.PutUint64(mem[4:], raw)
	m := &vm{}
	m.put(addr, mem)
	for _, c := range []struct {
		src  string
		s    int64
		pass bool
	}{
		{"p->x == 5", 0, true},
		{"p->y == -3", 0, true},
		{"p->y < 0", 0, true},
		{"p->w == 0xfffff", 0, true},
		{"p->x > s", -1, true}, // x (3 bits) promotes to int: 5 > -1
		{"p->w > s", -1, true}, // w (20 bits) too
		{"p->x > s", 5, false},
		{"p->x == 4", 0, false},
	} {
		p, err := one(t, c.src, e)
		require.NoError(t, err, c.src)
		pr := compile(t, map[uint32]*Plan{7: p})
		pass, faults := m.runBoth(t, pr, [MaxArgs]uint64{addr, uint64(c.s)}, 0, uint64(pr.Entry[7]))
		assert.Equal(t, c.pass, pass, c.src)
		assert.Zero(t, faults, c.src)
	}
	assert.True(t, signedCompare(Fetch{Size: 4, Bits: 31}, Fetch{Size: 4, Signed: true}), "unsigned w:31 against int: int")
	assert.False(t, signedCompare(Fetch{Size: 4, Bits: 32}, Fetch{Size: 4, Signed: true}), "unsigned w:32 against int: unsigned")
}
