package attach

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/specialize"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

func params(n int) []symbols.Param {
	ps := make([]symbols.Param, n)
	for i := range ps {
		ps[i] = symbols.Param{Name: "a", Type: "long", Kind: symbols.ArgInt, Size: 8, CtxScalar: true}
	}
	return ps
}

func TestFuncSlots(t *testing.T) {
	for _, c := range []struct {
		name string
		f    *symbols.Func
		want uint64
		ok   bool
	}{
		{"no args", &symbols.Func{Proto: &symbols.Proto{}}, 0, true},
		{"four", &symbols.Func{Proto: &symbols.Proto{Params: params(4)}}, 4, true},
		{"twelve: six read", &symbols.Func{Proto: &symbols.Proto{Params: params(12)}}, 6, true},
		{"no BTF", &symbols.Func{ProtoErr: "no kernel BTF"}, 0, false},
		{"compiler copy", &symbols.Func{Proto: &symbols.Proto{Params: params(2)}, ProtoErr: "compiler copy f.isra.0"}, 0, false},
		{"struct by value", &symbols.Func{Proto: &symbols.Proto{Params: params(2), StructByValue: "q"}}, 0, false},
		{"variadic", &symbols.Func{Proto: &symbols.Proto{Params: params(2), Varargs: true}}, 0, false},
		{"ip_make_skb: a function pointer third", &symbols.Func{Proto: &symbols.Proto{Params: append(params(2), symbols.Param{Name: "getfrag", Type: "int (*)(void *, char *, int, int, int, struct sk_buff *)", Kind: symbols.ArgPtr, Size: 8})}}, 0, false},
		{"a refused seventh parameter is not read", &symbols.Func{Proto: &symbols.Proto{Params: append(params(6), symbols.Param{Name: "rtp", Kind: symbols.ArgPtr, Size: 8})}}, 6, true},
	} {
		n, ok := FuncSlots(c.f)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, n, c.name)
	}
}

// slotImms counts the immediates v (FTP_FN_SLOTS_ANY, FTP_FN_SCALARS_ANY)
// in each program of spec.
func slotImms(spec *ebpf.CollectionSpec, v uint64) map[string]int {
	out := map[string]int{}
	for name, ps := range spec.Programs {
		if n := specialize.CountImm(ps.Instructions, v); n > 0 {
			out[name] = n
		}
	}
	return out
}

// TestSlotsInLeanObject: the lean and filter objects' per-function
// trampoline programs read fn_slots() (fentry and fsession for the
// arguments; the filter object's fexit for the count its entry
// predicate's second decision reads), and only they (the multi programs
// keep it unpatched); only the filter object's read fn_scalars() (the
// entry predicate's arguments); the general and stat objects, where the
// arguments meet --arg arithmetic, have neither. forFunc sets both on a
// copy and leaves the spec and the programs of functions without a
// usable prototype alone.
func TestSlotsInLeanObject(t *testing.T) {
	lean, err := bpfobj.LoadTraceLean()
	require.NoError(t, err)
	filter, err := bpfobj.LoadTraceFilter()
	require.NoError(t, err)
	tramp := map[string]bool{"ftp_fentry": true, "ftp_fsession": true, "ftp_fentry_multi": true, "ftp_fsession_multi": true}
	for _, spec := range []*ebpf.CollectionSpec{lean, filter} {
		imms := slotImms(spec, specialize.FnSlotsAny)
		assert.NotZero(t, imms["ftp_fentry"], "ftp_fentry")
		assert.NotZero(t, imms["ftp_fsession"], "ftp_fsession")
		for name, n := range imms {
			if !tramp[name] && (spec == lean || (name != "ftp_fexit" && name != "ftp_fexit_multi")) {
				assert.Zero(t, n, "%s reads fn_slots(): only trampoline programs may", name)
			}
		}
	}
	assert.Empty(t, slotImms(lean, specialize.FnScalarsAny), "the lean object has no entry predicate")
	// One immediate per fetch_pred site (the entry's predicate, from the
	// cookie or xprogs alike; the fexit's second decision), and no other: a comparison with the
	// magic (`sc != FTP_FN_SCALARS_ANY` in the source) makes clang load it
	// again, forFunc patches that copy too, and the direct reads never run.
	sc := slotImms(filter, specialize.FnScalarsAny)
	assert.Equal(t, map[string]int{"ftp_fentry": 1, "ftp_fentry_multi": 1, "ftp_fexit": 1, "ftp_fexit_multi": 1,
		"ftp_fsession": 1, "ftp_fsession_multi": 1}, sc, "fn_scalars() immediates per program of the filter object")
	for _, load := range []func() (*ebpf.CollectionSpec, error){bpfobj.LoadTrace, bpfobj.LoadTraceStat} {
		spec, err := load()
		require.NoError(t, err)
		for _, v := range []uint64{specialize.FnSlotsAny, specialize.FnScalarsAny} {
			for name, n := range slotImms(spec, v) {
				assert.Zero(t, n, "%s of the general or stat object: its arguments may meet --arg arithmetic", name)
			}
		}
	}

	// f(struct file *, char *, size_t): only count is a scalar; the
	// filter object's fentry gets 3 and 0b100.
	vr := &symbols.Func{Proto: &symbols.Proto{Params: []symbols.Param{
		{Name: "file", Kind: symbols.ArgPtr, CtxScalar: true}, {Name: "buf", Kind: symbols.ArgCharPtr, CtxScalar: true},
		{Name: "count", Kind: symbols.ArgUint, CtxScalar: true}}}}
	assert.Equal(t, uint64(0b0100), FuncScalars(vr))
	fc, patched := forFunc(filter.Programs["ftp_fentry"], vr)
	assert.True(t, patched)
	assert.Zero(t, specialize.CountImm(fc.Instructions, specialize.FnScalarsAny), "fn_scalars patched")
	assert.Zero(t, specialize.CountImm(fc.Instructions, specialize.FnSlotsAny), "fn_slots patched")
	assert.Equal(t, sc["ftp_fentry"], specialize.CountImm(fc.Instructions, 0b0100), "the scalar mask in place of each fn_scalars()")
	assert.Equal(t, slotImms(filter, specialize.FnSlotsAny)["ftp_fentry"], specialize.CountImm(fc.Instructions, 3), "the count in place of each fn_slots()")
	assert.Zero(t, FuncScalars(&symbols.Func{ProtoErr: "no kernel BTF"}), "no prototype: no scalars")

	ps := lean.Programs["ftp_fentry"]
	three := &symbols.Func{Proto: &symbols.Proto{Params: params(3)}}
	c, patched := forFunc(ps, three)
	assert.True(t, patched)
	assert.Equal(t, 1, specialize.CountImm(c.Instructions, 3), "the copy reads 3")
	assert.Zero(t, specialize.CountImm(c.Instructions, specialize.FnSlotsAny), "and no longer the magic")
	assert.Equal(t, 1, specialize.CountImm(ps.Instructions, specialize.FnSlotsAny), "the spec keeps its immediate")
	c, patched = forFunc(ps, &symbols.Func{ProtoErr: "no kernel BTF"})
	assert.False(t, patched)
	assert.Equal(t, 1, specialize.CountImm(c.Instructions, specialize.FnSlotsAny), "no prototype: bpf_get_func_arg")
}

// TestLoadForFuncNoFallback: a verifier refusal of the program with the
// argument count patched in is an error naming the program, the patch
// and the way out, never a second load as compiled; a failure without a
// patch is the load's own; a function without a usable prototype, or
// AsCompiled, loads as compiled, counted so.
func TestLoadForFuncNoFallback(t *testing.T) {
	lean, err := bpfobj.LoadTraceLean()
	require.NoError(t, err)
	ps := lean.Programs["ftp_fentry"]
	f := &symbols.Func{Name: "ip_make_skb", BTFName: "ip_make_skb", Proto: &symbols.Proto{Params: params(4)}}

	var seen []int // patched immediates left per load: 0 = patched
	load := func(fail error) func(c *ebpf.ProgramSpec) (*ebpf.Program, error) {
		return func(c *ebpf.ProgramSpec) (*ebpf.Program, error) {
			assert.Equal(t, f.BTFName, c.AttachTo)
			seen = append(seen, specialize.CountImm(c.Instructions, specialize.FnSlotsAny))
			if fail != nil {
				return nil, fail
			}
			return &ebpf.Program{}, nil
		}
	}
	refused := fmt.Errorf("load ftp_fentry: %w", &ebpf.VerifierError{Cause: errors.New("permission denied"), Log: []string{"invalid bpf_context access off=16 size=8"}})
	var n SlotLoads
	_, err = loadForFunc(ps, f, &n, load(refused))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ftp_fentry with its argument count patched in (4 registers read from ctx; FTPROBE_SPECIALIZE=off loads it as compiled)")
	var ve *ebpf.VerifierError
	assert.ErrorAs(t, err, &ve, "the verifier's error, wrapped")
	assert.Equal(t, []int{0}, seen, "one load, patched: no retry as compiled")
	assert.Zero(t, n.Direct.Load()+n.Compiled.Load(), "a failed load is not counted")

	p, err := loadForFunc(ps, f, &n, load(nil))
	require.NoError(t, err)
	assert.NotNil(t, p)
	assert.EqualValues(t, 1, n.Direct.Load(), "the patched copy loaded")

	seen = nil
	noProto := &symbols.Func{Name: "x", BTFName: "x", ProtoErr: "no kernel BTF"}
	f = noProto
	_, err = loadForFunc(ps, noProto, &n, load(errors.New("refused")))
	assert.EqualError(t, err, "refused", "nothing patched: the load's own error")
	_, err = loadForFunc(ps, noProto, &n, load(nil))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1}, seen, "unpatched: bpf_get_func_arg")
	assert.EqualValues(t, 1, n.Compiled.Load(), "counted as compiled")

	f = &symbols.Func{Name: "vfs_read", BTFName: "vfs_read", Proto: &symbols.Proto{Params: params(4)}}
	seen = nil
	off := SlotLoads{AsCompiled: true}
	_, err = loadForFunc(ps, f, &off, load(nil))
	require.NoError(t, err)
	assert.Equal(t, []int{1}, seen, "AsCompiled: a usable prototype, loaded as compiled all the same")
	assert.EqualValues(t, 0, off.Direct.Load())
	assert.EqualValues(t, 1, off.Compiled.Load())

	seen = nil
	_, err = loadForFunc(lean.Programs["ftp_kprobe"], f, &off, load(nil))
	require.NoError(t, err)
	assert.EqualValues(t, 1, off.Compiled.Load(), "a program without fn_slots() is not counted")
}
