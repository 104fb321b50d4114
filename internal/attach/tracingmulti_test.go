package attach

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/specialize"
)

// The attribute layouts must match union bpf_attr as the 7.3 kernels'
// BTF gives it (offsets read there with a BTF dump in the lab).
func TestAttrLayouts(t *testing.T) {
	var p progLoadAttr
	assert.EqualValues(t, 48, unsafe.Offsetof(p.ProgName))
	assert.EqualValues(t, 68, unsafe.Offsetof(p.ExpectedAttachType))
	assert.EqualValues(t, 108, unsafe.Offsetof(p.AttachBTFID))
	assert.EqualValues(t, 112, unsafe.Offsetof(p.AttachBTFObjFd))
	assert.EqualValues(t, 120, unsafe.Offsetof(p.FdArray))
	assert.EqualValues(t, 144, unsafe.Sizeof(p))
	var m linkCreateTracingMulti
	assert.EqualValues(t, 8, unsafe.Offsetof(m.AttachType))
	assert.EqualValues(t, 16, unsafe.Offsetof(m.IDs))
	assert.EqualValues(t, 24, unsafe.Offsetof(m.Cookies))
	assert.EqualValues(t, 32, unsafe.Offsetof(m.Cnt))
	var tr linkCreateTracing
	assert.EqualValues(t, 16, unsafe.Offsetof(tr.TargetBTFID))
	assert.EqualValues(t, 24, unsafe.Offsetof(tr.Cookie))
}

type fakeFD int

func (f fakeFD) FD() int { return int(f) }

// fakeKernel is a BTF spec holding the kfunc the session programs call,
// after n filler types so its id is not 1.
func fakeKernel(t *testing.T, n int) (*FuncIDs, btf.TypeID) {
	b, err := btf.NewBuilder(nil, nil)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := b.Add(&btf.Int{Name: "filler" + string(rune('a'+i)), Size: 4})
		require.NoError(t, err)
	}
	proto := &btf.FuncProto{Return: &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool},
		Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}}
	_, err = b.Add(&btf.Func{Name: "bpf_session_is_return", Type: proto, Linkage: btf.GlobalFunc})
	require.NoError(t, err)
	cookieProto := &btf.FuncProto{Return: &btf.Pointer{Target: &btf.Int{Name: "u64", Size: 8}},
		Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}}
	_, err = b.Add(&btf.Func{Name: "bpf_session_cookie", Type: cookieProto, Linkage: btf.GlobalFunc})
	require.NoError(t, err)
	raw, err := b.Marshal(nil, nil)
	require.NoError(t, err)
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	require.NoError(t, err)
	ids := newFuncIDs(spec)
	id, err := ids.ID("bpf_session_is_return")
	require.NoError(t, err)
	return ids, id
}

// TestTrampolineCode checks the loader's relocation of the fsession trace
// program: every map load carries its map's fd, the kfunc call carries the
// kfunc's BTF id from the kernel's spec, and nothing else is rewritten.
func TestTrampolineCode(t *testing.T) {
	spec, err := bpfobj.LoadTrace()
	require.NoError(t, err)
	ids, kfuncID := fakeKernel(t, 5)
	cookieID, err := ids.ID("bpf_session_cookie")
	require.NoError(t, err)
	require.Greater(t, int(kfuncID), 5, "after the fillers: a wrong id source would give a small one")
	fds := fakeMapFDs()
	want := map[int32]bool{}
	for _, fd := range fds {
		want[int32(fd.FD())] = true
	}
	ps := spec.Programs["ftp_fsession"]
	code, err := trampolineCode(ps, fds, ids)
	require.NoError(t, err)
	require.Zero(t, len(code)%asm.InstructionSize)
	kfuncs, mapLoads := 0, 0
	for off := 0; off < len(code); off += asm.InstructionSize {
		op, regs := code[off], code[off+1]
		src := regs >> 4
		imm := int32(binary.LittleEndian.Uint32(code[off+4:]))
		switch {
		case op == 0x85 && src == 2: // call, BPF_PSEUDO_KFUNC_CALL
			kfuncs++
			assert.True(t, imm == int32(kfuncID) || imm == int32(cookieID), "kfunc call carries a BTF id: %d", imm)
		case op == 0x18 && (src == 1 || src == 2): // ld_imm64 map fd / map value
			mapLoads++
			assert.True(t, want[imm], "map load at %d carries fd %d", off/8, imm)
			off += asm.InstructionSize
		case op == 0x18:
			off += asm.InstructionSize
		}
	}
	assert.Equal(t, 2, kfuncs, "bpf_session_cookie and bpf_session_is_return")
	assert.Greater(t, mapLoads, 5)
	// The spec itself is left untouched for the next load.
	assert.Equal(t, "bpf_session_cookie", ps.Instructions[1].Reference())

	_, err = trampolineCode(ps, map[string]asm.FDer{}, ids)
	assert.ErrorContains(t, err, "no map")
	_, err = trampolineCode(spec.Programs["ftp_fork"], fds, ids)
	assert.ErrorContains(t, err, "CO-RE")
}

// TestTrampolineCodePredicates: with a compiled --filter, every program
// calling xpred carries the generated body in place of the stub, and the
// trampoline loader resolves each BPF-to-BPF call to that body's first
// instruction.
func TestTrampolineCodePredicates(t *testing.T) {
	spec, err := bpfobj.LoadTrace()
	require.NoError(t, err)
	// A read of memory (arg0->+16): the subprogram, called.
	plan := &expr.Plan{Terms: []expr.Term{{Fetch: expr.Fetch{Src: 0, Loads: []int32{16}, Size: 8}, Op: expr.OpEQ, K: 0x5eedf11e5eedf11e}},
		EntryOps: []byte{expr.BoolPush}}
	pr, err := expr.CompilePredicates(map[uint32]*expr.Plan{0: plan}, mustFaults(t, spec))
	require.NoError(t, err)
	require.Nil(t, pr.Inline)
	require.NoError(t, specialize.PatchPredicates(spec, pr, true))
	// The body up to its fault counter's map address (which the loader
	// resolves).
	k := slices.IndexFunc(pr.Insns, func(ins asm.Instruction) bool { return ins.IsLoadFromMap() })
	require.Positive(t, k)
	var body bytes.Buffer
	require.NoError(t, pr.Insns[:k].Marshal(&body, binary.LittleEndian))

	ids, _ := fakeKernel(t, 5)
	fds := fakeMapFDs()
	for _, name := range []string{"ftp_fentry", "ftp_fexit", "ftp_fsession", "ftp_fentry_multi"} {
		code, err := trampolineCode(spec.Programs[name], fds, ids)
		require.NoError(t, err, name)
		at := bytes.Index(code, body.Bytes())
		require.Greater(t, at, 0, "%s: the generated body is in the program", name)
		calls := 0
		for off := 0; off < len(code); off += asm.InstructionSize {
			op, src := code[off], code[off+1]>>4
			imm := int32(binary.LittleEndian.Uint32(code[off+4:]))
			switch {
			case op == 0x85 && src == 1: // call, BPF_PSEUDO_CALL
				calls++
				assert.Equal(t, at/asm.InstructionSize, off/asm.InstructionSize+1+int(imm), "%s: call at %d", name, off/8)
			case op == 0x18:
				off += asm.InstructionSize
			}
		}
		assert.Positive(t, calls, name)
	}
}

// TestTrampolineCodeInlinePredicates: a predicate that reads no memory
// is spliced in place of each call of xpred (expr.Predicates.Inline):
// the marshalled programs hold one copy per former call site, no
// BPF-to-BPF call and no xpred stub. (The jumps around the sites are
// checked by the kernel: the lab's filter tests.)
func TestTrampolineCodeInlinePredicates(t *testing.T) {
	spec, err := bpfobj.LoadTrace()
	require.NoError(t, err)
	sites := map[string]int{}
	for name, ps := range spec.Programs {
		for _, ins := range ps.Instructions {
			if ins.IsFunctionCall() && ins.Reference() == expr.PredicateFunc {
				sites[name]++
			}
		}
	}
	plan := &expr.Plan{Terms: []expr.Term{{Fetch: expr.Fetch{Src: 2, Size: 8}, Op: expr.OpEQ, K: 0x5eedf11e5eedf11e}},
		EntryOps: []byte{expr.BoolPush}}
	pr, err := expr.CompilePredicates(map[uint32]*expr.Plan{0: plan}, mustFaults(t, spec))
	require.NoError(t, err)
	require.NotNil(t, pr.Inline)
	require.NoError(t, specialize.PatchPredicates(spec, pr, true))
	var body bytes.Buffer
	require.NoError(t, pr.Inline.Marshal(&body, binary.LittleEndian))
	ids, _ := fakeKernel(t, 5)
	fds := fakeMapFDs()
	for _, name := range []string{"ftp_fentry", "ftp_fexit", "ftp_fsession", "ftp_fentry_multi"} {
		require.Positive(t, sites[name], "%s calls xpred", name)
		for _, ins := range spec.Programs[name].Instructions {
			assert.NotEqual(t, expr.PredicateFunc, ins.Symbol(), "%s: the stub is dropped", name)
		}
		code, err := trampolineCode(spec.Programs[name], fds, ids)
		require.NoError(t, err, name)
		assert.Equal(t, sites[name], bytes.Count(code, body.Bytes()), "%s: one copy per call site", name)
		for off := 0; off < len(code); off += asm.InstructionSize {
			op, src := code[off], code[off+1]>>4
			assert.False(t, op == 0x85 && src == 1, "%s: a BPF-to-BPF call at %d", name, off/8)
			if op == 0x18 {
				off += asm.InstructionSize
			}
		}
	}
}

// TestInlinePredicatesTooFar: inline code so long that a jump around a
// call site no longer fits its 16-bit offset is refused with the spec
// left as it was, and patchPredicates then calls the subprogram.
func TestInlinePredicatesTooFar(t *testing.T) {
	spec, err := bpfobj.LoadTraceFilter()
	require.NoError(t, err)
	before := map[string]asm.Instructions{}
	for name, ps := range spec.Programs {
		before[name] = slices.Clone(ps.Instructions)
	}
	long := make(asm.Instructions, 40000)
	for i := range long {
		long[i] = asm.Mov.Imm(asm.R0, 1)
	}
	err = specialize.InlinePredicates(spec, long)
	require.ErrorContains(t, err, "a jump of")
	for name, ps := range spec.Programs {
		assert.Equal(t, before[name], ps.Instructions, "%s unchanged", name)
	}
	pr := &expr.Predicates{Insns: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}, Inline: long, Programs: 1}
	require.NoError(t, specialize.PatchPredicates(spec, pr, true))
	calls := 0
	for _, ins := range spec.Programs["ftp_fentry"].Instructions {
		if ins.IsFunctionCall() && ins.Reference() == expr.PredicateFunc {
			calls++
		}
	}
	assert.Positive(t, calls, "the subprogram, called")
}

// fakeMapFDs is a fake fd (100, 101, ...) for each map of the trace
// object.
func fakeMapFDs() map[string]asm.FDer {
	fds := map[string]asm.FDer{}
	for i, name := range []string{".rodata", ".bss", "areas", "tframes", "stacks", "zero_stack", "aggs", "errs", "tgids", "xprogs", "xscratch"} {
		fds[name] = fakeFD(100 + i)
	}
	return fds
}

func mustFaults(t *testing.T, spec *ebpf.CollectionSpec) expr.FaultCounter {
	t.Helper()
	fc, err := FaultCounterOf(spec)
	require.NoError(t, err)
	return fc
}
