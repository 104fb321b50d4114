package expr

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/cilium/ebpf/asm"
)

// PredicateFunc is the name of the BPF subprogram of bpf/trace.bpf.c
// whose body Predicates.Insns replaces before load (xpred).
const PredicateFunc = "xpred"

// Predicates is every traced function's --filter predicate compiled to
// BPF instructions: the body of bpf/trace.bpf.c's xpred(args, ret, sel)
// subprogram. sel picks one program (1-based); identical programs are
// shared, so a wildcard with one filter costs one program. A program
// returns 1 (pass) or 0 (reject); a faulted comparison is false and adds
// one to the fault counter (Faults) itself, so that the caller branches
// on the result only: a branch on a value that also carried the fault
// count would make the verifier tell apart every combination of faults
// (3^comparisons paths instead of 2^comparisons).
//
// Generated code, not an interpreter: a rejected call then costs the
// comparisons it makes (a few instructions each, plus one probe read per
// dereference), where interpreting the same predicate in BPF costs about
// 530 instructions per call. Calling
// convention: r1 = args (u64[MaxArgs] on the caller's stack), r2 = ret,
// r3 = sel; r6, r7 and r9 hold args, ret and the comparison bits; the
// stack holds one 8-byte read slot (fp-8), a string buffer (fp-80..fp-9)
// and the left value of a comparison of two values (fp-88).
type Predicates struct {
	Insns asm.Instructions
	// Inline is the same programs for splicing in place of each call
	// of xpred (r1 = args, r2 = ret, r3 = sel, the result in r0),
	// when none reads memory (no dereference, no string, no comparison
	// of two values: no helper call, no stack): they use r0-r5 only,
	// and every exit is a jump past the end. nil otherwise. It saves
	// the BPF-to-BPF call's prologue and epilogue per decision (~20
	// arm64 instructions, bpf_jit_comp.c build_prologue/build_epilogue).
	Inline asm.Instructions
	// Entry and Exit are each function's program number (struct
	// xprog's pentry and pexit) by function ID; absent: no predicate.
	Entry, Exit map[uint32]uint16
	// Programs is the number of distinct programs.
	Programs int
}

// FaultCounter is where a faulted comparison is counted: a per-CPU row
// of a global array (bpf/trace.bpf.c's ftp_stats, in the map Map): the
// counter of CPU c is at Off + (c & (Rows-1)) * RowBytes. Rows and
// RowBytes are powers of two.
type FaultCounter struct {
	Map      string // the map holding the global (".bss")
	Off      uint32 // byte offset of CPU 0's counter in the map's value
	Rows     uint32
	RowBytes uint32
}

// Stack layout of xpred.
const (
	slotRead = -8  // one probe read of at most 8 bytes
	slotStr  = -80 // string buffer, 72 bytes: a read of MaxStr+1 bytes fits
	slotLHS  = -88 // the left value of a comparison of two values
)

// CompilePredicates compiles the entry and exit predicates of plans (by
// function ID). Without any predicate it returns nil. Errors: a term the
// code generator cannot express (internal error).
func CompilePredicates(plans map[uint32]*Plan, faults FaultCounter) (*Predicates, error) {
	if faults.Rows == 0 || faults.Rows&(faults.Rows-1) != 0 || faults.RowBytes == 0 || faults.RowBytes&(faults.RowBytes-1) != 0 {
		return nil, fmt.Errorf("predicate code: fault counter rows %d of %d bytes: want powers of two", faults.Rows, faults.RowBytes)
	}
	set := predSet{index: map[string]uint16{}}
	out := &Predicates{Entry: map[uint32]uint16{}, Exit: map[uint32]uint16{}}
	ids := make([]uint32, 0, len(plans))
	for id := range plans {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		p := plans[id]
		if p == nil {
			continue
		}
		if len(p.EntryOps) > 0 {
			out.Entry[id] = set.add(p, p.EntryOps)
		}
		if len(p.ExitOps) > 0 {
			out.Exit[id] = set.add(p, p.ExitOps)
		}
	}
	if len(set.progs) == 0 {
		return nil, nil
	}
	if len(set.progs) > math.MaxUint16 {
		return nil, fmt.Errorf("%d distinct predicates, at most %d", len(set.progs), math.MaxUint16)
	}
	insns, err := set.assemble(faults, false)
	if err != nil {
		return nil, err
	}
	out.Insns, out.Programs = insns, len(set.progs)
	if set.inlinable() {
		// Beyond MaxInline slots the subprogram stays: each copy
		// lengthens the jumps around its call site (16-bit offsets).
		if in, err := set.assemble(faults, true); err == nil && RawSlots(in) <= MaxInline {
			out.Inline = in
		}
	}
	return out, nil
}

// predProg is one distinct predicate program: its terms and the boolean
// ops over them (BoolPush operands numbered into terms).
type predProg struct {
	terms []Term
	ops   []byte
}

// predSet is the distinct programs, numbered from 1 in order of first
// use; index maps a program's key to its number.
type predSet struct {
	progs []predProg
	index map[string]uint16
}

// add returns the number of the program of p's ops, adding it unless an
// identical one is already there.
func (s *predSet) add(p *Plan, ops []byte) uint16 {
	prog := usedTerms(p, ops)
	key := prog.key()
	if n, ok := s.index[key]; ok {
		return n
	}
	s.progs = append(s.progs, prog)
	n := uint16(len(s.progs))
	s.index[key] = n
	return n
}

// usedTerms is the program of ops: the terms of p it uses, renumbered in
// order of use.
func usedTerms(p *Plan, ops []byte) predProg {
	var terms []Term
	remap := map[byte]byte{}
	var rops []byte
	for _, op := range ops {
		if op&0xf0 != BoolPush {
			rops = append(rops, op)
			continue
		}
		t := op & 0x0f
		if _, ok := remap[t]; !ok {
			remap[t] = byte(len(terms))
			terms = append(terms, p.Terms[t])
		}
		rops = append(rops, BoolPush|remap[t])
	}
	return predProg{terms, rops}
}

// key identifies the program by content: it holds the right-hand values'
// contents, not their addresses (each function's plan has its own).
func (p predProg) key() string {
	var flat []Term
	var rhs []Fetch
	for _, t := range p.terms {
		r := Fetch{}
		if t.RHS != nil {
			r = *t.RHS
		}
		t.RHS = nil
		flat, rhs = append(flat, t), append(rhs, r)
	}
	return fmt.Sprintf("%#v|%#v|%x", flat, rhs, p.ops)
}

// inlinable tells whether no program reads memory: no dereference, no
// string, no comparison of two values.
func (s *predSet) inlinable() bool {
	for _, p := range s.progs {
		for _, t := range p.terms {
			if len(t.Fetch.Loads) > 0 || t.RHS != nil || t.Op == OpSEQ || t.Op == OpSPFX {
				return false
			}
		}
	}
	return true
}

// assemble generates the code of every program, as xpred's body or, when
// inline, for splicing in place of its calls.
func (s *predSet) assemble(faults FaultCounter, inline bool) (asm.Instructions, error) {
	g := &gen{labels: map[string]int{}, faults: faults, args: asm.R6, ret: asm.R7, bits: asm.R9, inline: inline}
	if inline {
		// r3 (sel) is dead once a program is entered: its bits.
		g.args, g.ret, g.bits = asm.R4, asm.R5, asm.R3
	}
	g.emit(
		asm.Mov.Reg(g.args, asm.R1),
		asm.Mov.Reg(g.ret, asm.R2),
	)
	// Each program behind the test of its number, which jumps over
	// it when sel differs: every jump spans one program, however
	// many there are.
	for i, p := range s.progs {
		name := fmt.Sprintf("p%d", i+1)
		g.jump(asm.JNE.Imm(asm.R3, int32(i+1), ""), name+".skip")
		if err := g.program(name, p.terms, p.ops); err != nil {
			return nil, err
		}
		g.label(name + ".skip")
	}
	g.emit(asm.Mov.Imm(asm.R0, 1))
	g.exit()
	g.label(labelEnd)
	return g.finish()
}

// MaxInline is the most slots (8-byte instructions) of predicate code
// spliced in place of each call of xpred (Predicates.Inline): a trace
// program has at most 3 call sites, so its jumps grow by at most 1,536
// slots, far inside the 32,767 a jump reaches.
const MaxInline = 512

// RawSlots is the number of 8-byte slots insns take (a 64-bit immediate
// load takes two): the unit of BPF jump offsets.
func RawSlots(insns asm.Instructions) int {
	n := 0
	for _, ins := range insns {
		n += int(ins.Size() / asm.InstructionSize)
	}
	return n
}

// labelEnd is the label past the last instruction: where the inline
// code's exits jump.
const labelEnd = "end"

// Table is the truth table of a boolean program over n terms: bit a is
// the program's value when term i has the value of bit i of a.
func Table(ops []byte, n int) ([4]uint64, error) {
	var tab [4]uint64
	if n > MaxTerms {
		return tab, fmt.Errorf("%d comparisons, at most %d", n, MaxTerms)
	}
	for a := 0; a < 1<<n; a++ {
		var st []bool
		for _, op := range ops {
			switch op & 0xf0 {
			case BoolPush:
				st = append(st, a>>(op&0x0f)&1 == 1)
			case BoolNot:
				if len(st) < 1 {
					return tab, fmt.Errorf("boolean program %x: stack underflow", ops)
				}
				st[len(st)-1] = !st[len(st)-1]
			case BoolAnd, BoolOr:
				if len(st) < 2 {
					return tab, fmt.Errorf("boolean program %x: stack underflow", ops)
				}
				x, y := st[len(st)-2], st[len(st)-1]
				st = st[:len(st)-1]
				if op&0xf0 == BoolAnd {
					st[len(st)-1] = x && y
				} else {
					st[len(st)-1] = x || y
				}
			default:
				return tab, fmt.Errorf("boolean program %x: op %#x", ops, op)
			}
		}
		if len(st) != 1 {
			return tab, fmt.Errorf("boolean program %x leaves %d values", ops, len(st))
		}
		if st[0] {
			tab[a>>6] |= 1 << (a & 63)
		}
	}
	return tab, nil
}

// gen assembles with labels resolved to raw jump offsets at the end (the
// code is spliced into a compiled program, so it carries no symbols).
type gen struct {
	insns  asm.Instructions
	labels map[string]int // label → instruction index
	fixups []fixup
	faults FaultCounter
	// args, ret and bits hold the argument array's address, the
	// return value and the comparison bits: r6, r7, r9 in the
	// subprogram, r4, r5, r3 inline (Predicates.Inline).
	args, ret, bits asm.Register
	inline          bool
}

// exit returns r0: an exit instruction in the subprogram, a jump past
// the end inline.
func (g *gen) exit() {
	if g.inline {
		g.jump(asm.Ja.Label(""), labelEnd)
		return
	}
	g.emit(asm.Return())
}

type fixup struct {
	at    int
	label string
}

func (g *gen) emit(ins ...asm.Instruction) { g.insns = append(g.insns, ins...) }

func (g *gen) label(l string) { g.labels[l] = len(g.insns) }

func (g *gen) jump(ins asm.Instruction, l string) {
	g.fixups = append(g.fixups, fixup{len(g.insns), l})
	g.insns = append(g.insns, ins)
}

func (g *gen) referenced(l string) bool {
	for _, f := range g.fixups {
		if f.label == l {
			return true
		}
	}
	return false
}

func (g *gen) finish() (asm.Instructions, error) {
	raw := make([]int, len(g.insns)+1)
	for i, ins := range g.insns {
		raw[i+1] = raw[i] + int(ins.Size()/asm.InstructionSize)
	}
	for _, f := range g.fixups {
		at, ok := g.labels[f.label]
		if !ok {
			return nil, fmt.Errorf("predicate code: no label %q", f.label)
		}
		off := raw[at] - raw[f.at] - 1
		if off < math.MinInt16 || off > math.MaxInt16 {
			return nil, fmt.Errorf("predicate code: jump to %q too far (%d)", f.label, off)
		}
		g.insns[f.at].Offset = int16(off)
	}
	return g.insns, nil
}

// zero64 is *(u64 *)(fp + off) = 0 (BPF_ST | BPF_MEM | BPF_DW, which
// asm.StoreImm declines to build).
func zero64(off int16) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(asm.DWord), Dst: asm.R10, Offset: off}
}

func fitsImm(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// loadConst puts v in dst: a mov of a 32-bit immediate (sign-extended)
// when it fits, else a 64-bit immediate load.
func (g *gen) loadConst(dst asm.Register, v int64) {
	if fitsImm(v) {
		g.emit(asm.Mov.Imm(dst, int32(v)))
		return
	}
	g.emit(asm.LoadImm(dst, v, asm.DWord))
}

// program emits one predicate: each term's bit into r9, then its truth
// table indexed by r9.
func (g *gen) program(name string, terms []Term, ops []byte) error {
	tab, err := Table(ops, len(terms))
	if err != nil {
		return err
	}
	g.emit(asm.Mov.Imm(g.bits, 0))
	for i, t := range terms {
		if err := g.term(fmt.Sprintf("%s.t%d", name, i), t, i); err != nil {
			return err
		}
	}
	if len(terms) <= 6 {
		g.loadConst(asm.R0, int64(tab[0]))
		g.emit(asm.RSh.Reg(asm.R0, g.bits))
	} else {
		done := name + ".tab"
		g.emit(
			asm.Mov.Reg(asm.R1, g.bits),
			asm.RSh.Imm(asm.R1, 6),
			asm.Mov.Reg(asm.R2, g.bits),
			asm.And.Imm(asm.R2, 63),
		)
		for w := 0; w < 3; w++ {
			g.loadConst(asm.R0, int64(tab[w]))
			g.jump(asm.JEq.Imm(asm.R1, int32(w), ""), done)
		}
		g.loadConst(asm.R0, int64(tab[3]))
		g.label(done)
		g.emit(asm.RSh.Reg(asm.R0, asm.R2))
	}
	g.emit(asm.And.Imm(asm.R0, 1))
	g.exit()
	return nil
}

// countFault emits the atomic increment of this CPU's fault counter
// (clobbers r0-r5).
func (g *gen) countFault() {
	f := g.faults
	shift := int32(0)
	for 1<<shift < f.RowBytes {
		shift++
	}
	g.emit(
		asm.FnGetSmpProcessorId.Call(),
		asm.And.Imm(asm.R0, int32(f.Rows-1)),
		asm.LSh.Imm(asm.R0, shift),
		asm.LoadMapValue(asm.R1, 0, f.Off).WithReference(f.Map),
		asm.Add.Reg(asm.R1, asm.R0),
		asm.Mov.Imm(asm.R2, 1),
		asm.StoreXAdd(asm.R1, asm.R2, asm.DWord),
	)
}

// probeRead emits a probe read of size bytes at the address in r3 into
// the stack at off (fp+off), user or kernel by the address's sign (as
// bpf/trace.bpf.c's xread), and a jump to fault when it fails.
func (g *gen) probeRead(name string, off int16, size int32, str bool, fault string) {
	user, kernel := asm.FnProbeReadUser, asm.FnProbeReadKernel
	if str {
		user, kernel = asm.FnProbeReadUserStr, asm.FnProbeReadKernelStr
	}
	g.emit(
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, int32(off)),
		asm.Mov.Imm(asm.R2, size),
	)
	g.jump(asm.JSLT.Imm(asm.R3, 0, ""), name+".k")
	g.emit(user.Call())
	g.jump(asm.Ja.Label(""), name+".d")
	g.label(name + ".k")
	g.emit(kernel.Call())
	g.label(name + ".d")
	if str {
		g.jump(asm.JSLT.Imm(asm.R0, 0, ""), fault)
	} else {
		g.jump(asm.JNE.Imm(asm.R0, 0, ""), fault)
	}
}

var intJumps = map[uint8]asm.JumpOp{
	OpEQ: asm.JEq, OpNE: asm.JNE, OpLT: asm.JLT, OpLE: asm.JLE, OpGT: asm.JGT, OpGE: asm.JGE,
	OpLT | OpSigned: asm.JSLT, OpLE | OpSigned: asm.JSLE, OpGT | OpSigned: asm.JSGT, OpGE | OpSigned: asm.JSGE,
}

// value emits the fetch f into r1 (the semantics of bpf/trace.bpf.c's
// xfetch), jumping to fault when a read faults.
func (g *gen) value(name string, f Fetch, fault string) error {
	if f.Src == SrcRet {
		g.emit(asm.Mov.Reg(asm.R1, g.ret))
	} else if int(f.Src) < MaxArgs {
		g.emit(asm.LoadMem(asm.R1, g.args, int16(8*int(f.Src)), asm.DWord))
	} else {
		return fmt.Errorf("predicate code: source %d", f.Src)
	}
	size := int(f.Size)
	if size < 1 || size > 8 {
		size = 8
	}
	for i, off := range f.Loads {
		n := int32(8)
		if i == len(f.Loads)-1 {
			n = int32(size)
		}
		g.emit(asm.Mov.Reg(asm.R3, asm.R1))
		if off != 0 {
			g.emit(asm.Add.Imm(asm.R3, off))
		}
		g.emit(zero64(slotRead))
		g.probeRead(fmt.Sprintf("%s.l%d", name, i), slotRead, n, false, fault)
		g.emit(asm.LoadMem(asm.R1, asm.R10, slotRead, asm.DWord))
	}
	if f.Bits > 0 {
		// A bitfield: down to bit 0, then cut to its width.
		if f.Shift > 0 {
			g.emit(asm.RSh.Imm(asm.R1, int32(f.Shift)))
		}
		sh := int32(64 - int(f.Bits))
		if f.Signed {
			g.emit(asm.LSh.Imm(asm.R1, sh), asm.ArSh.Imm(asm.R1, sh))
		} else {
			g.emit(asm.LSh.Imm(asm.R1, sh), asm.RSh.Imm(asm.R1, sh))
		}
	} else if size < 8 {
		sh := int32(64 - 8*size)
		switch {
		case f.Signed:
			g.emit(asm.LSh.Imm(asm.R1, sh), asm.ArSh.Imm(asm.R1, sh))
		case len(f.Loads) == 0:
			// A register holds garbage above the parameter's size (a
			// read into the zeroed slot does not).
			g.emit(asm.LSh.Imm(asm.R1, sh), asm.RSh.Imm(asm.R1, sh))
		}
	}
	if f.Tail != 0 {
		g.emit(asm.Add.Imm(asm.R1, f.Tail))
	}
	if f.Mask != 0 {
		if int64(f.Mask) >= 0 && fitsImm(int64(f.Mask)) {
			g.emit(asm.And.Imm(asm.R1, int32(f.Mask)))
		} else {
			g.emit(asm.LoadImm(asm.R2, int64(f.Mask), asm.DWord), asm.And.Reg(asm.R1, asm.R2))
		}
	}
	return nil
}

// term emits one comparison: bit i of r9 set when true; a faulted read
// counted (the comparison is then false).
func (g *gen) term(name string, t Term, bit int) error {
	yes, next, fault := name+".yes", name+".next", name+".fault"
	if err := g.value(name, t.Fetch, fault); err != nil {
		return err
	}
	switch op := t.Op; {
	case op == OpNZ:
		g.jump(asm.JNE.Imm(asm.R1, 0, ""), yes)
	case op == OpSEQ || op == OpSPFX:
		if err := g.strTerm(name, t, yes, next, fault); err != nil {
			return err
		}
	default:
		j, ok := intJumps[op]
		if !ok {
			return fmt.Errorf("predicate code: operator %#x", op)
		}
		switch {
		case t.RHS != nil:
			g.emit(asm.StoreMem(asm.R10, slotLHS, asm.R1, asm.DWord))
			if err := g.value(name+".r", *t.RHS, fault); err != nil {
				return err
			}
			g.emit(asm.Mov.Reg(asm.R2, asm.R1), asm.LoadMem(asm.R1, asm.R10, slotLHS, asm.DWord))
			g.jump(j.Reg(asm.R1, asm.R2, ""), yes)
		case fitsImm(int64(t.K)):
			g.jump(j.Imm(asm.R1, int32(int64(t.K)), ""), yes)
		default:
			g.emit(asm.LoadImm(asm.R2, int64(t.K), asm.DWord))
			g.jump(j.Reg(asm.R1, asm.R2, ""), yes)
		}
	}
	g.jump(asm.Ja.Label(""), next)
	if g.referenced(fault) {
		// (Only when a read can fault: the verifier refuses
		// unreachable instructions.)
		g.label(fault)
		g.countFault()
		g.jump(asm.Ja.Label(""), next)
	}
	g.label(yes)
	g.emit(asm.Or.Imm(g.bits, int32(1)<<bit))
	g.label(next)
	return nil
}

// strTerm compares the string at the address in r1 with t.S: read with
// a probe read of len(S)+2 bytes (equality: a longer string reads more
// than len(S)+1) or len(S)+1 (prefix), then 8 bytes at a time, the last
// word masked. Jumps to yes when equal; falls through when not. A NULL
// pointer is a fault, as in bpf/trace.bpf.c.
func (g *gen) strTerm(name string, t Term, yes, next, fault string) error {
	s := t.S
	if len(s) >= MaxStr {
		return fmt.Errorf("predicate code: string operand of %d bytes, at most %d", len(s), MaxStr-1)
	}
	n := len(s) + 1
	if t.Op == OpSEQ {
		n++
	}
	g.jump(asm.JEq.Imm(asm.R1, 0, ""), fault)
	g.emit(asm.Mov.Reg(asm.R3, asm.R1))
	words := (len(s) + 7) / 8
	for w := 0; w < words; w++ {
		g.emit(zero64(int16(slotStr + 8*w)))
	}
	g.probeRead(name+".s", slotStr, int32(n), true, fault)
	if words == 0 {
		g.jump(asm.JEq.Imm(asm.R0, 1, ""), yes)
		return nil
	}
	g.jump(asm.JNE.Imm(asm.R0, int32(len(s)+1), ""), next)
	for w := 0; w < words; w++ {
		var b [8]byte
		chunk := s[8*w:]
		if len(chunk) > 8 {
			chunk = chunk[:8]
		}
		copy(b[:], chunk)
		want := binary.LittleEndian.Uint64(b[:]) // bpfel: both targets
		g.emit(asm.LoadMem(asm.R1, asm.R10, int16(slotStr+8*w), asm.DWord))
		g.loadConst(asm.R2, int64(want))
		g.emit(asm.Xor.Reg(asm.R1, asm.R2))
		if len(chunk) < 8 {
			mask := uint64(1)<<(8*len(chunk)) - 1
			g.loadConst(asm.R2, int64(mask))
			g.emit(asm.And.Reg(asm.R1, asm.R2))
		}
		if w < words-1 {
			g.jump(asm.JNE.Imm(asm.R1, 0, ""), next)
		} else {
			g.jump(asm.JEq.Imm(asm.R1, 0, ""), yes)
		}
	}
	return nil
}

// Describe is the programs' sizes for --dry-run and -v.
func (p *Predicates) Describe() string {
	if p == nil {
		return ""
	}
	progs := "programs"
	if p.Programs == 1 {
		progs = "program"
	}
	if p.Inline != nil {
		return fmt.Sprintf("--filter compiled to %d BPF instructions (%d distinct %s), inlined where the programs decide (no memory read: no call)", len(p.Inline), p.Programs, progs)
	}
	return fmt.Sprintf("--filter compiled to %d BPF instructions (%d distinct %s), a subprogram", len(p.Insns), p.Programs, progs)
}
