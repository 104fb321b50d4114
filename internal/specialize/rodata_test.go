package specialize

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

func roLoad(dst asm.Register, off uint32) asm.Instruction {
	return asm.LoadMapValue(dst, 0, off).WithReference(".rodata")
}

func TestInlineRodataInsns(t *testing.T) {
	data := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01}
	jump := asm.JEq.Imm(asm.R1, 0, "")
	// From slot 0 to slot 15: the load through R6 (the pairs take 3 slots
	// each, after the jump's one; the load is a pair's third).
	jump.Offset = 15 - 1
	insns := asm.Instructions{
		jump,
		roLoad(asm.R1, 0), asm.LoadMem(asm.R1, asm.R1, 1, asm.Byte), // 0x22
		roLoad(asm.R2, 2), asm.LoadMem(asm.R2, asm.R2, 0, asm.Half), // 0x4433
		roLoad(asm.R3, 2), asm.LoadMem(asm.R3, asm.R3, 2, asm.DWord), // bytes 4..11
		roLoad(asm.R4, 0), asm.LoadMem(asm.R5, asm.R4, 0, asm.Word), // the address read again below: kept
		roLoad(asm.R6, 0), asm.LoadMem(asm.R6, asm.R6, 0, asm.Word), // a jump target: kept
		roLoad(asm.R7, 4), asm.LoadMem(asm.R8, asm.R7, 0, asm.Word), // the address dead after: 0x88776655 in R8
		asm.Mov.Imm(asm.R7, 0),
		asm.Mov.Reg(asm.R0, asm.R4),
		asm.Return(),
	}
	var before, after bytes.Buffer
	require.NoError(t, insns.Marshal(&before, binary.LittleEndian))

	insns, n, err := inlineRodataInsns(insns, data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	assert.Equal(t, int64(0x22), insns[1].Constant)
	assert.Equal(t, int64(0x4433), insns[3].Constant)
	dword := uint64(0xccbbaa9988776655)
	assert.Equal(t, int64(dword), insns[5].Constant)
	assert.Equal(t, int64(0x88776655), insns[11].Constant)
	assert.Equal(t, asm.R8, insns[11].Dst)
	for _, i := range []int{1, 3, 5, 11} {
		assert.Equal(t, asm.LoadImmOp(asm.DWord), insns[i].OpCode, "instruction %d", i)
		assert.Equal(t, asm.R0, insns[i].Src, "instruction %d: a plain immediate", i)
		assert.Empty(t, insns[i].Reference(), "instruction %d", i)
		assert.Equal(t, asm.Ja.Op(asm.ImmSource), insns[i+1].OpCode, "instruction %d", i+1)
		assert.Zero(t, insns[i+1].Offset, "instruction %d: ja +0", i+1)
	}
	assert.Equal(t, asm.PseudoMapValue, insns[7].Src, "an address read later stays")
	assert.Equal(t, asm.Mov.Imm32(asm.R5, 0x44332211).OpCode, insns[8].OpCode, "the load through it: a 32-bit move")
	assert.Equal(t, asm.R5, insns[8].Dst)
	assert.Equal(t, int64(0x44332211), insns[8].Constant)
	assert.Equal(t, asm.PseudoMapValue, insns[9].Src, "a load that is a jump target stays")
	// The same slots: every jump offset still holds.
	require.NoError(t, insns.Marshal(&after, binary.LittleEndian))
	assert.Equal(t, before.Len(), after.Len())

	_, _, err = inlineRodataInsns(asm.Instructions{roLoad(asm.R1, 12), asm.LoadMem(asm.R1, asm.R1, 0, asm.DWord)}, data, binary.LittleEndian)
	assert.EqualError(t, err, "load of 8 bytes at .rodata+12, past its 16 bytes")
	_, _, err = inlineRodataInsns(asm.Instructions{roLoad(asm.R1, 12), asm.LoadMem(asm.R2, asm.R1, 0, asm.DWord), asm.LoadMem(asm.R3, asm.R1, 0, asm.Byte), asm.Return()}, data, binary.LittleEndian)
	assert.EqualError(t, err, "load of 8 bytes at .rodata+12, past its 16 bytes")
}

// TestInlineKeptAddress: clang keeps a variable's address for two reads
// (filter_tid: tested against zero, then compared); each read becomes a
// move of its value and the address, read by nothing else, two `ja +0`.
func TestInlineKeptAddress(t *testing.T) {
	data := make([]byte, 16)
	binary.LittleEndian.PutUint32(data[4:], 0xfffffff0) // a u32 with the top bit set
	binary.LittleEndian.PutUint64(data[8:], 1<<40)      // too wide for a move's immediate
	jeq := asm.JEq.Reg(asm.R0, asm.R1, "")
	jeq.Offset = 5 // slot 4 to the exit at slot 10
	insns := asm.Instructions{
		roLoad(asm.R0, 4),                         // slots 0-1
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),  // 2
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word),  // 3
		jeq,                                       // 4
		roLoad(asm.R2, 8),                         // 5-6
		asm.LoadMem(asm.R3, asm.R2, -8, asm.Half), // 7: .rodata+0: 0
		asm.LoadMem(asm.R4, asm.R2, 0, asm.DWord), // 8: too wide: the address stays
		asm.Mov.Imm(asm.R2, 0),                    // 9
		asm.Return(),                              // 10
		roLoad(asm.R6, 4),
		asm.LoadMem(asm.R7, asm.R6, 0, asm.Word),
		asm.Mov.Reg(asm.R0, asm.R6), // the address read as a value: stays
		asm.Return(),
	}
	var before, after bytes.Buffer
	require.NoError(t, insns.Marshal(&before, binary.LittleEndian))
	out, n, err := inlineRodataInsns(insns, data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	nop := asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
	require.Len(t, out, len(insns)+1, "the dead address: two instructions in its two slots")
	assert.Equal(t, []asm.Instruction{nop, nop}, []asm.Instruction(out[0:2]), "the address, dead: two ja +0")
	assert.Equal(t, asm.Mov.Imm32(asm.R1, -16), out[2], "0xfffffff0 zero-extended by the 32-bit move")
	assert.Equal(t, asm.Mov.Imm32(asm.R0, -16), out[3])
	assert.Equal(t, asm.PseudoMapValue, out[5].Src, "an address still read (the wide load) stays")
	assert.Equal(t, asm.Mov.Imm32(asm.R3, 0), out[6])
	assert.Equal(t, asm.LdXClass, out[7].OpCode.Class(), "8 bytes that no immediate holds: loaded")
	assert.Equal(t, asm.PseudoMapValue, out[10].Src, "an address read as a value stays")
	assert.Equal(t, asm.Mov.Imm32(asm.R7, -16), out[11])
	require.NoError(t, out.Marshal(&after, binary.LittleEndian))
	assert.Equal(t, before.Len(), after.Len(), "the same slots")
	assert.Equal(t, int16(5), out[4].Offset, "the jump's offset holds")
}

// TestInlineRodataValues: the values inlined are the ones set on the
// spec's variables (which cilium/ebpf keeps apart from the section's bytes
// until load), in the real trace object.
func TestInlineRodataValues(t *testing.T) {
	imms := func(insns asm.Instructions, v int64) int {
		n := 0
		for _, ins := range insns {
			if ins.OpCode == asm.LoadImmOp(asm.DWord) && ins.Src == asm.R0 && ins.Constant == v {
				n++
			}
		}
		return n
	}
	spec, err := bpfobj.LoadTrace()
	require.NoError(t, err)
	require.NoError(t, spec.Variables["min_duration_ns"].Set(uint64(0x5eed20000)))
	require.Zero(t, imms(spec.Programs["ftp_fexit"].Instructions, 0x5eed20000))
	before := spec.Programs["ftp_fexit"].Copy()

	n, err := InlineRodata(spec)
	require.NoError(t, err)
	assert.Greater(t, n, 100)
	assert.Positive(t, imms(spec.Programs["ftp_fexit"].Instructions, 0x5eed20000), "min_duration_ns in ftp_fexit")
	assert.Positive(t, imms(spec.Programs["ftp_kretprobe"].Instructions, 0x5eed20000), "min_duration_ns in ftp_kretprobe")
	assert.Zero(t, imms(before.Instructions, 0x5eed20000), "a copy made before keeps its loads")
}

// TestInlineKeptAddressBlocks: the scan goes on past a conditional jump
// (the address must be dead where it goes) and, for r6-r9, past a call;
// a jump or an exit that reads the address, or a jump into the block,
// keeps it.
func TestInlineKeptAddressBlocks(t *testing.T) {
	data := make([]byte, 8)
	binary.LittleEndian.PutUint32(data[4:], 77)
	nop := asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
	prog := func(jump asm.Instruction, atTarget asm.Instruction) asm.Instructions {
		jump.Offset = 3 // slot 3 to slot 7
		return asm.Instructions{
			roLoad(asm.R1, 4),                        // slots 0-1
			asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // 2
			jump,                                     // 3
			asm.LoadMem(asm.R1, asm.R1, 0, asm.Word), // 4: past the jump, same block
			asm.Mov.Reg(asm.R0, asm.R1),              // 5
			asm.Return(),                             // 6
			atTarget,                                 // 7
			asm.Return(),                             // 8
		}
	}
	for name, jump := range map[string]asm.Instruction{
		"jmp":   asm.JEq.Imm(asm.R2, 0, ""),
		"jmp32": asm.JEq.Imm32(asm.R2, 0, ""),
	} {
		// R1 written where the jump goes: dead there.
		out, n, err := inlineRodataInsns(prog(jump, asm.Mov.Imm(asm.R1, 0)), data, binary.LittleEndian)
		require.NoError(t, err, name)
		assert.Equal(t, 2, n, name)
		assert.Equal(t, []asm.Instruction{nop, nop}, []asm.Instruction(out[0:2]), name)
		assert.Equal(t, asm.Mov.Imm32(asm.R2, 77), out[2], name)
		assert.Equal(t, asm.Mov.Imm32(asm.R1, 77), out[4], name)

		// The jump goes where R1 is read: the loads go, the address stays.
		out, n, err = inlineRodataInsns(prog(jump, asm.Mov.Reg(asm.R0, asm.R1)), data, binary.LittleEndian)
		require.NoError(t, err, name)
		assert.Equal(t, 2, n, name)
		assert.Equal(t, asm.PseudoMapValue, out[0].Src, name)
	}
	// A jump that compares the address itself: it stays, and the scan stops
	// there (the load after it is left).
	out, n, err := inlineRodataInsns(prog(asm.JEq.Reg(asm.R2, asm.R1, ""), asm.Mov.Imm(asm.R1, 0)), data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, asm.PseudoMapValue, out[0].Src)
	assert.Equal(t, asm.LdXClass, out[3].OpCode.Class())

	// A jump into the block (to the second load): the scan stops before
	// it, so only the first load goes and the address stays.
	into := asm.Ja.Label("")
	into.Offset = -3 // slot 6 back to slot 4
	p := asm.Instructions{
		roLoad(asm.R1, 4),                        // 0-1
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // 2
		asm.Mov.Imm(asm.R3, 0),                   // 3
		asm.LoadMem(asm.R4, asm.R1, 0, asm.Word), // 4: a jump target
		asm.Return(),                             // 5
		into,                                     // 6
	}
	out, n, err = inlineRodataInsns(p, data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, asm.PseudoMapValue, out[0].Src)
	assert.Equal(t, asm.LdXClass, out[3].OpCode.Class(), "the load at the jump target stays")

	// The address in r0 at the exit: returned, so kept.
	out, n, err = inlineRodataInsns(asm.Instructions{roLoad(asm.R0, 4), asm.LoadMem(asm.R2, asm.R0, 0, asm.Word), asm.Return()}, data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, asm.PseudoMapValue, out[0].Src)

}

// TestInlineKeptAddressCalls: r6-r9 survive helper and BPF-to-BPF calls,
// the address in r1-r5 is dead at a helper without arguments and read by
// one with arguments.
func TestInlineKeptAddressCalls(t *testing.T) {
	data := make([]byte, 8)
	binary.LittleEndian.PutUint32(data[4:], 77)
	nop := asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}
	calls := asm.Instructions{
		roLoad(asm.R6, 4),
		asm.LoadMem(asm.R2, asm.R6, 0, asm.Word),
		asm.FnKtimeGetNs.Call(),
		asm.Call.Label("sub"),                    // a BPF-to-BPF call: r6 survives it too
		asm.LoadMem(asm.R3, asm.R6, 0, asm.Word), // r6 survives the calls
		asm.Mov.Imm(asm.R6, 0),
		roLoad(asm.R1, 4),
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word),
		asm.FnGetAttachCookie.Call(), // reads r1: the address stays
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("sub"),
		asm.Return(),
	}
	calls[3].Constant = 7 // slot 4 (after the first address's two) to "sub" at slot 12
	out, n, err := inlineRodataInsns(calls, data, binary.LittleEndian)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []asm.Instruction{nop, nop}, []asm.Instruction(out[0:2]))
	assert.Equal(t, asm.Mov.Imm32(asm.R3, 77), out[5])
	assert.Equal(t, asm.PseudoMapValue, out[7].Src)
	assert.Equal(t, asm.Mov.Imm32(asm.R2, 77), out[8])

	// A helper without arguments reads no register and clobbers r1-r5:
	// the address in r1 is dead at it (the fexit body's only_cookie read
	// before bpf_get_current_pid_tgid); one with arguments may read it.
	for fn, dead := range map[asm.BuiltinFunc]bool{asm.FnGetCurrentPidTgid: true, asm.FnKtimeGetNs: true, asm.FnMapLookupElem: false} {
		out, n, err = inlineRodataInsns(asm.Instructions{
			roLoad(asm.R1, 4),
			asm.LoadMem(asm.R2, asm.R1, 0, asm.Word),
			fn.Call(),
			asm.Return(),
		}, data, binary.LittleEndian)
		require.NoError(t, err, fn)
		assert.Equal(t, 1, n, fn)
		if dead {
			assert.Equal(t, asm.LoadImm(asm.R2, 77, asm.DWord), out[0], fn)
		} else {
			assert.Equal(t, asm.PseudoMapValue, out[0].Src, fn)
			assert.Equal(t, asm.Mov.Imm32(asm.R2, 77), out[1], fn)
		}
	}
}
