package specialize

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func isNop(ins asm.Instruction) bool {
	return ins.OpCode.JumpOp() == asm.Ja && ins.OpCode.Class() == asm.JumpClass && ins.Offset == 0
}

// TestSimplifyFoldsSettings: a setting inlined as an immediate decides its
// branch before load: the jump is gone, the path it ruled out is deleted
// (check_cfg refuses unreachable instructions), the jump over it re-aimed,
// and the move that fed the jump, read by nothing else, is a nop.
func TestSimplifyFoldsSettings(t *testing.T) {
	in := asm.Instructions{
		asm.Mov.Imm(asm.R6, 0).WithSymbol("prog"), // 0: a setting, 0
		asm.Mov.Reg(asm.R7, asm.R1),               // 1: ctx
		asm.JEq.Imm(asm.R6, 0, "").WithSymbol(""), // 2: taken: 3-4 unreachable
		asm.Mov.Imm(asm.R0, 1),                    // 3
		asm.Return(),                              // 4
		asm.Mov.Imm32(asm.R2, 5),                  // 5: r2 = 5
		asm.JGT.Imm32(asm.R2, 9, ""),              // 6: never taken
		asm.LoadMem(asm.R0, asm.R7, 0, asm.DWord), // 7: the kept path reads ctx
		asm.Return(),                              // 8
		asm.Mov.Imm(asm.R0, 2),                    // 9: the target of 6, unreachable
		asm.Return(),                              // 10
	}
	in[2].Offset = 2 // to 5
	in[6].Offset = 2 // to 9
	out, n := Simplify(in)
	require.NotZero(t, n)
	var kept []asm.Instruction
	for _, ins := range out {
		if !isNop(ins) {
			kept = append(kept, ins)
		}
	}
	// What the verifier loads: ctx copied, read, returned; no setting's
	// move, no jump, no dead path.
	require.Len(t, kept, 3, "%v", out)
	assert.Equal(t, asm.Mov.Reg(asm.R7, asm.R1).OpCode, kept[0].OpCode)
	assert.Equal(t, asm.LoadMem(asm.R0, asm.R7, 0, asm.DWord).OpCode, kept[1].OpCode)
	assert.Equal(t, asm.Exit, kept[2].OpCode.JumpOp())
	assert.Equal(t, "prog", out[0].Symbol(), "the function's symbol stays on its first slot")
	// Every jump left lands on an instruction.
	slots, index, _ := layout(out)
	for i, ins := range out {
		if ins.OpCode.Class().IsJump() && ins.OpCode.JumpOp() != asm.Exit && ins.OpCode.JumpOp() != asm.Call {
			_, ok := index[slots[i]+1+jumpOffset(ins)]
			assert.True(t, ok, "jump %d: %v", i, ins)
		}
	}
}

// TestSimplifyKeepsUnknown: a jump on a value loaded from memory, a helper's
// result or an immediate ForFunc patches later (fn_slots) stays, and so do
// both its paths and what they read.
func TestSimplifyKeepsUnknown(t *testing.T) {
	for name, setup := range map[string]asm.Instruction{
		"memory":   asm.LoadMem(asm.R6, asm.R1, 0, asm.DWord),
		"fn_slots": asm.LoadImm(asm.R6, FnSlotsAny, asm.DWord),
	} {
		in := asm.Instructions{
			setup.WithSymbol("prog"),
			asm.Mov.Imm(asm.R0, 1),
			asm.JGT.Imm(asm.R6, 6, ""), // to the return of r0 = 1
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		}
		in[2].Offset = 1
		out, _ := Simplify(in)
		jumps := 0
		for _, ins := range out {
			if ins.OpCode.JumpOp() == asm.JGT {
				jumps++
			}
		}
		assert.Equal(t, 1, jumps, name)
		assert.Equal(t, in[1], out[len(out)-4], "%s: r0 = 1 is read on the taken path: %v", name, out)
	}
	// A helper's result: r0 after a call is unknown.
	in := asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"),
		asm.FnGetCurrentPidTgid.Call(),
		asm.JEq.Imm(asm.R0, 0, ""),
		asm.Return(),
		asm.Return(),
	}
	in[2].Offset = 1
	out, _ := Simplify(in)
	assert.Equal(t, asm.JEq, out[2].OpCode.JumpOp(), "%v", out)
}

// TestSimplifyDropsUncalled: a subprogram whose only call is on a path a
// setting rules out goes with it (a stranded function would be an
// unreachable instruction); a called one stays, reached by symbol.
func TestSimplifyDropsUncalled(t *testing.T) {
	in := asm.Instructions{
		asm.Mov.Imm(asm.R6, 1).WithSymbol("prog"),
		asm.JEq.Imm(asm.R6, 0, ""), // never taken: the call of "dead" goes
		asm.Call.Label("live"),
		asm.Return(),
		asm.Call.Label("dead"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 7).WithSymbol("live"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 8).WithSymbol("dead"),
		asm.Return(),
	}
	in[1].Offset = 2
	out, _ := Simplify(in)
	syms := map[string]bool{}
	for _, ins := range out {
		if s := ins.Symbol(); s != "" {
			syms[s] = true
		}
		assert.NotEqual(t, "dead", ins.Reference(), "%v", out)
	}
	assert.Equal(t, map[string]bool{"prog": true, "live": true}, syms)
	err := out.Marshal(discard{}, binary.LittleEndian)
	require.NoError(t, err, "function references resolve")
}

// TestSimplifyLiveness: a write overwritten before any read goes, and so
// does one a helper without arguments meets first (it reads none, clobbers
// r1-r5); a write read on one path only stays, and so do a call's
// possible arguments.
func TestSimplifyLiveness(t *testing.T) {
	in := asm.Instructions{
		asm.Mov.Imm(asm.R1, 3).WithSymbol("prog"), // 0: overwritten at 1
		asm.Mov.Imm(asm.R1, 9),                    // 1: the helper at 2 reads no argument
		asm.FnGetCurrentPidTgid.Call(),            // 2
		asm.Mov.Imm(asm.R2, 4),                    // 3: read at 6, on one path
		asm.Mov.Imm(asm.R3, 1),                    // 4: the lookup at 8 may read r1-r5
		asm.JEq.Imm(asm.R0, 0, ""),                // 5: unknown, to 8
		asm.Mov.Reg(asm.R0, asm.R2),               // 6
		asm.Return(),                              // 7
		asm.FnMapLookupElem.Call(),                // 8
		asm.Return(),                              // 9
	}
	in[5].Offset = 2
	out, n := dropDeadWrites(in)
	assert.Equal(t, 2, n)
	assert.True(t, isNop(out[0]), "r1 = 3: %v", out[0])
	assert.True(t, isNop(out[1]), "r1 = 9: %v", out[1])
	assert.Equal(t, "prog", out[0].Symbol(), "the symbol stays on the nop")
	assert.Equal(t, in[3], out[3], "r2 = 4")
	assert.Equal(t, in[4], out[4], "r3 = 1")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// branchOn returns the program pre..., `if reg == 0 goto +2; r0 = 1;
// exit; r0 = 2; exit`, its first instruction the symbol "prog".
func branchOn(reg asm.Register, pre ...asm.Instruction) asm.Instructions {
	in := append(asm.Instructions{}, pre...)
	in[0] = in[0].WithSymbol("prog")
	jump := asm.JEq.Imm(reg, 0, "")
	jump.Offset = 2
	return append(in, jump, asm.Mov.Imm(asm.R0, 1), asm.Return(), asm.Mov.Imm(asm.R0, 2), asm.Return())
}

// TestSimplifyInlinedSetting: the shape InlineRodata leaves, `rX = VALUE;
// ja +0` before the jump that tests the setting: the nop is no block start
// (its only other way in is the same state), so the jump folds; were every
// `ja +0` a block start, nothing would fold.
func TestSimplifyInlinedSetting(t *testing.T) {
	// the setting, as InlineRodata leaves it; the jump is taken
	out, _ := Simplify(branchOn(asm.R1, asm.LoadImm(asm.R1, 0, asm.DWord), asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}))
	for _, ins := range out {
		assert.NotEqual(t, asm.JEq, ins.OpCode.JumpOp(), "the setting's jump folds: %v", out)
		assert.NotEqual(t, int64(1), ins.Constant, "the path it rules out goes: %v", out)
	}
}

// TestSimplifyLoadAcquire: an atomic load-acquire writes its dst, so a
// value known before it is not known after.
func TestSimplifyLoadAcquire(t *testing.T) {
	out, _ := Simplify(branchOn(asm.R6, asm.Mov.Imm(asm.R6, 0), asm.LoadAcquire(asm.R6, asm.R1, asm.DWord, 0)))
	assert.Equal(t, asm.JEq, out[2].OpCode.JumpOp(), "%v", out)
}

// TestSimplifyCORE: an immediate with a CO-RE relocation
// (bpf_core_field_exists) is rewritten by cilium/ebpf at load, after
// Simplify: its jump stays and so does the instruction, relocation and
// all (folded on the compiled value, its relocation would sit on a nop,
// which the load refuses).
func TestSimplifyCORE(t *testing.T) {
	relo := &btf.CORERelocation{}
	in := branchOn(asm.R1, btf.WithCORERelocationMetadata(asm.Mov.Imm(asm.R1, 1), relo))
	out, _ := Simplify(in)
	require.Len(t, out, len(in))
	assert.Equal(t, in[0].OpCode, out[0].OpCode)
	assert.Same(t, relo, btf.CORERelocationMetadata(&out[0]))
	assert.Equal(t, asm.JEq, out[1].OpCode.JumpOp())
}

// folds reports whether Simplify decides branchOn's jump in pre's program
// (no conditional jump left) and, if so, whether the taken path (r0 = 2)
// is the one kept.
func folds(t *testing.T, reg asm.Register, pre ...asm.Instruction) (decided, taken bool) {
	t.Helper()
	out, _ := Simplify(branchOn(reg, pre...))
	decided = true
	for _, ins := range out {
		if c := ins.OpCode.Class(); c.IsJump() && ins.OpCode.JumpOp() == asm.JEq {
			decided = false
		}
		if ins.OpCode.Class().IsALU() && ins.Dst == asm.R0 && ins.Constant == 2 {
			taken = true
		}
	}
	return decided, taken
}

// TestSimplifyAcrossBlocks: a value every path into a block gives the
// same is known there (the cookie's fields decided on one side of a
// branch and tested after the join); one the paths give
// differently is not.
func TestSimplifyAcrossBlocks(t *testing.T) {
	join := func(a, b int32) []asm.Instruction {
		br := asm.JNE.Imm(asm.R1, 0, "") // r1 unknown: both paths
		br.Offset = 2
		over := asm.Ja.Label("")
		over.Offset = 1
		return []asm.Instruction{
			asm.Mov.Reg(asm.R2, asm.R1),
			br,                     // to r6 = b
			asm.Mov.Imm(asm.R6, a), // fall: r6 = a
			over,                   // past r6 = b
			asm.Mov.Imm(asm.R6, b),
		}
	}
	decided, taken := folds(t, asm.R6, join(0, 0)...)
	assert.True(t, decided && taken, "r6 = 0 on both paths: folds, taken")
	decided, _ = folds(t, asm.R6, join(0, 1)...)
	assert.False(t, decided, "r6 = 0 on one path, 1 on the other: kept")
}

// TestSimplifyStack: a known value spilled to the stack and filled back
// is known (the cookie spilled across blocks in the trace programs), past
// a helper without arguments, stores elsewhere and bpf_get_func_arg into
// another slot (the fetch loops between the predicate's settings and
// their tests); a store through a pointer that may alias the slot, a
// narrower store over it, or a helper that may write there make it
// unknown.
func TestSimplifyStack(t *testing.T) {
	spill := asm.StoreMem(asm.RFP, -8, asm.R6, asm.DWord)
	atomic := asm.StoreXAdd(asm.RFP, asm.R2, asm.DWord)
	atomic.Offset = -8
	fill := asm.LoadMem(asm.R7, asm.RFP, -8, asm.DWord)
	for _, c := range []struct {
		name    string
		between []asm.Instruction
		decided bool
	}{
		{"spill, fill", nil, true},
		{"no-argument helper", []asm.Instruction{asm.FnGetCurrentPidTgid.Call()}, true},
		{"store elsewhere on the stack", []asm.Instruction{asm.StoreImm(asm.RFP, -16, 5, asm.Word)}, true},
		{"store through a pointer", []asm.Instruction{asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, -8), asm.StoreImm(asm.R1, 0, 5, asm.Word)}, false},
		{"narrower store over it", []asm.Instruction{asm.StoreImm(asm.RFP, -4, 5, asm.Word)}, false},
		// The slot is [-8, 0): the stores that end or start at its edges.
		{"8-byte store just below it", []asm.Instruction{asm.StoreMem(asm.RFP, -16, asm.R6, asm.DWord)}, true},
		{"byte just below it", []asm.Instruction{asm.StoreMem(asm.RFP, -9, asm.R6, asm.Byte)}, true},
		{"byte at its first address", []asm.Instruction{asm.StoreMem(asm.RFP, -8, asm.R6, asm.Byte)}, false},
		{"byte at its last address", []asm.Instruction{asm.StoreMem(asm.RFP, -1, asm.R6, asm.Byte)}, false},
		{"half-word across its lower edge", []asm.Instruction{asm.StoreMem(asm.RFP, -9, asm.R6, asm.Half)}, false},
		{"store through a pointer elsewhere", []asm.Instruction{asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, -16), asm.StoreImm(asm.R1, 0, 5, asm.Word)}, true},
		{"store through an unknown pointer", []asm.Instruction{asm.StoreImm(asm.R1, 0, 5, asm.Word)}, false},
		{"helper with arguments", []asm.Instruction{asm.FnProbeReadKernel.Call()}, false},
		{"bpf_get_func_arg into another slot", []asm.Instruction{asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -16), asm.FnGetFuncArg.Call()}, true},
		{"bpf_get_func_arg into the slot", []asm.Instruction{asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -8), asm.FnGetFuncArg.Call()}, false},
		{"bpf_get_func_arg into an unknown address", []asm.Instruction{asm.FnGetFuncArg.Call()}, false},
		{"bpf_get_func_ret into the slot", []asm.Instruction{asm.Mov.Reg(asm.R2, asm.RFP), asm.Sub.Imm(asm.R2, 8), asm.FnGetFuncRet.Call()}, false},
		{"atomic on the slot", []asm.Instruction{asm.Mov.Imm(asm.R2, 1), atomic}, false},
	} {
		pre := append([]asm.Instruction{asm.Mov.Imm(asm.R6, 0), spill}, c.between...)
		pre = append(pre, fill)
		decided, taken := folds(t, asm.R7, pre...)
		assert.Equal(t, c.decided, decided, c.name)
		if c.decided {
			assert.True(t, taken, c.name)
		}
	}
}

// TestSimplifyMaterializes: a computation of known operands becomes the
// move of its result (the verifier knows it, the JIT would still emit
// the arithmetic), and the writes that fed it then go; a 64-bit result no
// sign-extended 32-bit immediate holds stays computed.
func TestSimplifyMaterializes(t *testing.T) {
	in := asm.Instructions{
		asm.LoadImm(asm.R6, 0x1500082000000000, asm.DWord).WithSymbol("prog"), // the cookie
		asm.Mov.Reg(asm.R7, asm.R6),
		asm.RSh.Imm(asm.R7, 60), // 1
		asm.Mov.Reg(asm.R8, asm.R6),
		asm.LSh.Imm(asm.R8, 4), // 0x5000820000000000: no imm32
		asm.Mov.Reg(asm.R0, asm.R7),
		asm.Add.Reg(asm.R0, asm.R8),
		asm.Return(),
	}
	out, _ := Simplify(in)
	var kept asm.Instructions
	for _, ins := range out {
		if !isNop(ins) {
			kept = append(kept, ins)
		}
	}
	require.NotEmpty(t, kept)
	// r0 = r7 is r0 = 1; r7's copy and shift, read by nothing else, go
	assert.Contains(t, kept, asm.Mov.Imm(asm.R0, 1), "%v", out)
	assert.NotContains(t, kept, asm.RSh.Imm(asm.R7, 60), "%v", out)
	assert.NotContains(t, kept, asm.Mov.Reg(asm.R7, asm.R6), "%v", out)
	assert.Contains(t, kept, asm.LSh.Imm(asm.R8, 4), "%v", out)
	assert.Equal(t, asm.Add.Reg(asm.R0, asm.R8).OpCode, kept[len(kept)-2].OpCode, "%v", out)
}

// TestSimplifyCOREStack: a CO-RE-relocated load or store at r10 (a local
// copy of a kernel struct read or written by field) has its offset
// rewritten at load, after Simplify: the slot it reads is not known, the
// slots it writes are all forgotten, and a dead relocated load stays an
// instruction (a nop carrying the relocation fails the load). None of
// the committed objects has one: synthetic programs.
func TestSimplifyCOREStack(t *testing.T) {
	relo := &btf.CORERelocation{}
	fill := branchOn(asm.R1,
		asm.Mov.Imm(asm.R6, 0),
		asm.StoreMem(asm.RFP, -8, asm.R6, asm.DWord),
		btf.WithCORERelocationMetadata(asm.LoadMem(asm.R1, asm.RFP, -8, asm.DWord), relo),
	)
	store := branchOn(asm.R1,
		asm.Mov.Imm(asm.R6, 0),
		asm.Mov.Imm(asm.R7, 1),
		asm.StoreMem(asm.RFP, -8, asm.R6, asm.DWord),
		btf.WithCORERelocationMetadata(asm.StoreMem(asm.RFP, -16, asm.R7, asm.DWord), relo), // may be -8 at load
		asm.LoadMem(asm.R1, asm.RFP, -8, asm.DWord),
	)
	for name, in := range map[string]asm.Instructions{"relocated fill": fill, "relocated store": store} {
		out, _ := Simplify(in)
		kept := false
		for _, ins := range out {
			if ins.OpCode.JumpOp() == asm.JEq {
				kept = true
			}
			if btf.CORERelocationMetadata(&ins) != nil {
				assert.NotEqual(t, asm.JumpClass, ins.OpCode.Class(), "%s: relocation on a nop: %v", name, out)
			}
		}
		assert.True(t, kept, "%s: the jump stays: %v", name, out)
	}
	dead := asm.Instructions{
		btf.WithCORERelocationMetadata(asm.LoadMem(asm.R1, asm.RFP, -8, asm.DWord), relo).WithSymbol("prog"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
	out, _ := Simplify(dead)
	assert.Equal(t, asm.LdXClass, out[0].OpCode.Class(), "a dead relocated fill stays: %v", out)
}
