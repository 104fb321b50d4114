package attach

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/specialize"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TestCookie checks the attach cookie against bpf/trace.bpf.c's reading
// of it: id in bits 0-31; in the flags (bits 32-63) the return type (bit
// 0 signed, bits 8-15 size), the first string argument + 1 in bits 16-18
// and the argument count in bits 24-27 (6 without BTF).
func TestCookie(t *testing.T) {
	openat2 := &symbols.Func{ID: 7, Name: "do_sys_openat2", Proto: &symbols.Proto{
		Params: []symbols.Param{{Name: "dfd", Kind: symbols.ArgInt, Size: 4}, {Name: "filename", Kind: symbols.ArgCharPtr, Size: 8},
			{Name: "how", Kind: symbols.ArgPtr, Size: 8}},
		RetKind: symbols.RetS32, RetSize: 4, RetSigned: true,
	}}
	c := Cookie(openat2)
	assert.EqualValues(t, 7, uint32(c), "function id")
	fl := uint32(c >> 32)
	assert.EqualValues(t, 1, fl&1, "signed")
	assert.EqualValues(t, 4, (fl>>8)&0xff, "4-byte return")
	assert.EqualValues(t, 2, (fl>>16)&7, "filename (argument 1) + 1")
	assert.EqualValues(t, 0, (fl>>19)&7, "no second string")
	assert.EqualValues(t, 3, (fl>>24)&15, "3 arguments")

	noBTF := &symbols.Func{ID: 65535, Name: "raw"}
	c = Cookie(noBTF)
	assert.EqualValues(t, 65535, uint32(c))
	assert.EqualValues(t, 6, (c>>(32+24))&15, "no BTF: every argument register")
	assert.EqualValues(t, 0, (c>>32)&0xffffff, "no return type known")

	void := &symbols.Func{ID: 1, Proto: &symbols.Proto{RetKind: symbols.RetVoid}}
	assert.EqualValues(t, 4, (Cookie(void)>>32)&0xff, "void")
	assert.EqualValues(t, 0, (Cookie(void)>>(32+24))&15, "no arguments")
}

// TestCookieWindowEntry: the --entry functions (Options.Entries) and
// only they carry FlagWindowEntry (bit 4 of the flags), beside the rest
// of the cookie, in every attach path's cookie and in kprobe.multi's.
func TestCookieWindowEntry(t *testing.T) {
	entry := &symbols.Func{ID: 3, Name: "do_sys_openat2", Proto: &symbols.Proto{RetKind: symbols.RetS32, RetSize: 4, RetSigned: true}}
	other := &symbols.Func{ID: 4, Name: "path_openat", Proto: &symbols.Proto{RetKind: symbols.RetPtr}}
	o := Options{Entries: map[uint32]bool{3: true}}
	assert.EqualValues(t, 16, FlagWindowEntry)
	assert.Equal(t, Cookie(entry)|uint64(FlagWindowEntry)<<32, o.cookie(entry))
	assert.Equal(t, Cookie(other), o.cookie(other))
	assert.Equal(t, Cookie(entry), Options{}.cookie(entry), "no --entry")
	m := o.multiOpts([]*symbols.Func{entry, other})
	assert.Equal(t, []uint64{o.cookie(entry), Cookie(other)}, m.Cookies)
}

// TestPredCookie: an entry predicate on registers travels in the cookie's
// bits 60-63 (program) and 37-39 (pred_nargs), leaving the function id and
// the other flags alone; one on memory, one past 15 or none does not.
func TestPredCookie(t *testing.T) {
	for _, c := range []struct {
		x    bpfobj.TraceXprog
		want uint64
	}{
		{bpfobj.TraceXprog{Pentry: 3, PredNargs: 2, EntryRegs: 1}, 3<<60 | 2<<37},
		{bpfobj.TraceXprog{Pentry: 15, PredNargs: 6, EntryRegs: 1}, 15<<60 | 6<<37},
		{bpfobj.TraceXprog{Pentry: 16, PredNargs: 1, EntryRegs: 1}, 0},
		{bpfobj.TraceXprog{Pentry: 3, PredNargs: 1, EntryRegs: 0}, 0},
		{bpfobj.TraceXprog{Pentry: 0, PredNargs: 0, EntryRegs: 1}, 0},
	} {
		if got := PredCookie(c.x); got != c.want {
			t.Errorf("PredCookie(pentry %d, pred_nargs %d, entry_regs %d) = %#x, want %#x", c.x.Pentry, c.x.PredNargs, c.x.EntryRegs, got, c.want)
		}
	}
	f := &symbols.Func{ID: 7, Name: "vfs_read"}
	o := Options{predCookie: map[uint32]uint64{7: PredCookie(bpfobj.TraceXprog{Pentry: 2, PredNargs: 3, EntryRegs: 1})}}
	got := o.cookie(f)
	if got&0xffffffff != 7 || got&^(uint64(0xf)<<60|uint64(7)<<37) != Cookie(f) || got>>60 != 2 || (got>>37)&7 != 3 {
		t.Errorf("cookie %#x: want Cookie(f) %#x with program 2 and pred_nargs 3", got, Cookie(f))
	}
}

// TestOnlyCookie: a trace of one function folds that function's whole
// cookie into the programs: its id (3), flags (a signed 4-byte return:
// 0x401; two arguments: 2<<24; an --entry function: 0x10), its entry
// predicate (program 5, pred_nargs 1: bits 60-63 and 37-39); a trace of
// several folds nothing (0 makes the programs ask the kernel).
func TestOnlyCookie(t *testing.T) {
	f := &symbols.Func{ID: 3, Name: "f", Proto: &symbols.Proto{
		Params:  []symbols.Param{{Name: "a", Kind: symbols.ArgUint, Size: 8}, {Name: "b", Kind: symbols.ArgUint, Size: 8}},
		RetKind: symbols.RetS32, RetSize: 4, RetSigned: true}}
	g := &symbols.Func{ID: 4, Name: "g"}
	o := Options{predCookie: map[uint32]uint64{3: 5<<60 | 1<<37}, Entries: map[uint32]bool{3: true}}
	if got := o.onlyCookie([]*symbols.Func{f}); got != 0x5200043100000003 {
		t.Errorf("onlyCookie(one function) = %#x, want 0x5200043100000003", got)
	}
	if got := o.onlyCookie([]*symbols.Func{f, g}); got != 0 {
		t.Errorf("onlyCookie(two functions) = %#x, want 0", got)
	}
	if got := o.onlyCookie(nil); got != 0 {
		t.Errorf("onlyCookie(none) = %#x, want 0", got)
	}
}

// TestOnlyCookieInlined: with only_cookie set (a 64-bit cookie, which
// no 32-bit immediate holds), inlineRodata leaves no load of it in any
// trace program of the objects that read it: each read becomes a 64-bit
// immediate, so the verifier knows the cookie (and the predicate number
// and argument count in it) and drops the branches it decides.
func TestOnlyCookieInlined(t *testing.T) {
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){
		"lean": bpfobj.LoadTraceLean, "filter": bpfobj.LoadTraceFilter, "stat": bpfobj.LoadTraceStat, "general": bpfobj.LoadTrace,
	} {
		spec, err := load()
		require.NoError(t, err)
		v := spec.Variables["only_cookie"]
		require.NotNil(t, v, name)
		require.NoError(t, v.Set(uint64(0x5200043100000003)))
		_, err = specialize.InlineRodata(spec)
		require.NoError(t, err)
		for pn, ps := range spec.Programs {
			for i, ins := range ps.Instructions {
				if ins.IsLoadFromMap() && ins.Reference() == ".rodata" && uint32(uint64(ins.Constant)>>32) == v.Offset {
					t.Errorf("%s %s: insn %d still loads only_cookie: %v", name, pn, i, ins)
				}
			}
		}
	}
}

// TestOnlyNargs: only_nargs is the one function's parameter count, capped
// at MaxArgs, and FTP_NARGS_UNKNOWN (0xff) for several functions or a
// prototype whose parameters are not one register each; every trace
// object takes the value as its __u32 (a uint64 setting is refused at
// load, "doesn't marshal to 4 bytes"). With it set, the filter object's
// multi programs keep no load of it and no fn_slots()/fn_scalars() magic
// after simplifyPrograms.
func TestOnlyNargs(t *testing.T) {
	u := func(n int) []symbols.Param {
		ps := make([]symbols.Param, n)
		for i := range ps {
			ps[i] = symbols.Param{Name: fmt.Sprintf("a%d", i), Kind: symbols.ArgUint, Size: 8}
		}
		return ps
	}
	three := &symbols.Func{ID: 1, Name: "three", Proto: &symbols.Proto{Params: u(3)}}
	for _, c := range []struct {
		name string
		fs   []*symbols.Func
		want uint32
	}{
		{"three", []*symbols.Func{three}, 3},
		{"none", []*symbols.Func{{ID: 2, Name: "none", Proto: &symbols.Proto{}}}, 0},
		{"eight", []*symbols.Func{{ID: 3, Name: "eight", Proto: &symbols.Proto{Params: u(8)}}}, MaxArgs},
		{"two functions", []*symbols.Func{three, {ID: 4, Name: "g", Proto: &symbols.Proto{Params: u(1)}}}, 0xff},
		{"no BTF", []*symbols.Func{{ID: 5, Name: "nobtf"}}, 0xff},
		{"struct by value", []*symbols.Func{{ID: 6, Name: "sbv", Proto: &symbols.Proto{Params: u(2), StructByValue: "b"}}}, 0xff},
		{"variadic", []*symbols.Func{{ID: 7, Name: "va", Proto: &symbols.Proto{Params: u(2), Varargs: true}}}, 0xff},
		{"compiler copy", []*symbols.Func{{ID: 8, Name: "f.isra.0", Proto: &symbols.Proto{Params: u(2)}, ProtoErr: "a compiler copy"}}, 0xff},
	} {
		if got := onlyNargs(c.fs); got != c.want {
			t.Errorf("onlyNargs(%s) = %#x, want %#x", c.name, got, c.want)
		}
	}
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){
		"lean": bpfobj.LoadTraceLean, "filter": bpfobj.LoadTraceFilter, "stat": bpfobj.LoadTraceStat, "general": bpfobj.LoadTrace,
	} {
		spec, err := load()
		require.NoError(t, err)
		require.NoError(t, setSettings(spec, []setting{{"only_nargs", onlyNargs([]*symbols.Func{three})}}, nil), name)
		var got uint32
		require.NoError(t, spec.Variables["only_nargs"].Get(&got), name)
		require.Equal(t, uint32(3), got, name)
		if name != "filter" {
			continue
		}
		_, err = specialize.InlineRodata(spec)
		require.NoError(t, err)
		specialize.SimplifyPrograms(spec, isMultiProgram)
		off := spec.Variables["only_nargs"].Offset
		for pn := range multiPrograms {
			ps := spec.Programs[pn]
			require.NotNil(t, ps, pn)
			for i, ins := range ps.Instructions {
				if ins.IsLoadFromMap() && ins.Reference() == ".rodata" && uint32(uint64(ins.Constant)>>32) == off {
					t.Errorf("filter %s: insn %d still loads only_nargs: %v", pn, i, ins)
				}
			}
			if n := specialize.CountImm(ps.Instructions, specialize.FnSlotsAny) + specialize.CountImm(ps.Instructions, specialize.FnScalarsAny); n > 0 {
				t.Errorf("filter %s: %d fn_slots/fn_scalars magic immediates left", pn, n)
			}
		}
	}
}
