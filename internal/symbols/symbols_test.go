package symbols

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKallsyms(t *testing.T) {
	in := "ffff800080010000 T _text\n" +
		"ffff8000803a1b20 T do_sys_openat2\n" +
		"ffff8000803f0000 D some_data\n" +
		"ffff8000803c0000 t show_stat\n" +
		"ffff800000a10000 t ext4_file_open\t[ext4]\n" +
		"ffff800000a10100 t ext4_file_read_iter\t[ext4]"
	syms, err := ParseKallsyms(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, syms, 5, "text symbols only (the D symbol is dropped)")
	assert.Equal(t, Sym{Name: "do_sys_openat2", Addr: 0xffff8000803a1b20}, syms[1])
	assert.Equal(t, Sym{Name: "ext4_file_open", Addr: 0xffff800000a10000, Module: "ext4"}, syms[3])
	assert.Equal(t, Sym{Name: "ext4_file_read_iter", Addr: 0xffff800000a10100, Module: "ext4"}, syms[4], "last line without newline")
	_, err = ParseKallsyms(strings.NewReader("zz T bad\n"))
	assert.ErrorContains(t, err, "bad address")
	ff, err := ParseFilterFunctions(strings.NewReader("show_stat\nshow_stat\next4_file_open [ext4]\n\n"))
	require.NoError(t, err)
	assert.Equal(t, map[FilterKey]int{{"show_stat", ""}: 2, {"ext4_file_open", "ext4"}: 1}, ff)
}

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Pattern
	}{
		{"vfs_read", Pattern{Raw: "vfs_read", Glob: "vfs_read", Exact: true}},
		{"vfs_*", Pattern{Raw: "vfs_*", Glob: "vfs_*"}},
		{"ext4_file_open [ext4]", Pattern{Raw: "ext4_file_open [ext4]", Glob: "ext4_file_open", Module: "ext4", Exact: true}},
		{"ext4:ext4_file_*", Pattern{Raw: "ext4:ext4_file_*", Glob: "ext4_file_*", Module: "ext4"}},
		{"show_stat@ffff8000803c1000", Pattern{Raw: "show_stat@ffff8000803c1000", Glob: "show_stat", Addr: 0xffff8000803c1000, Exact: true}},
	} {
		got, err := ParsePattern(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	_, err := ParsePattern("vfs_[")
	assert.Error(t, err)
	_, err = ParsePattern("x@zz")
	assert.ErrorContains(t, err, "bad address")
}

func TestBaseNameDenied(t *testing.T) {
	assert.Equal(t, "foo", BaseName("foo.isra.0"))
	assert.Equal(t, "foo", BaseName("foo.constprop.0.isra.0"))
	assert.Equal(t, "foo", BaseName("foo"))
	assert.Equal(t, "migrate_disable", Denied("migrate_disable"))
	assert.Equal(t, "", Denied("vfs_read"))
}

// TestCTypeQualifiers: a const pointer to const prints each const once, in
// its place (ZSTD's `const BYTE* const iend` printed as "const const BYTE *"
// before); volatile alike; a plain const pointee and a const function
// pointer keep their spelling.
func TestCTypeQualifiers(t *testing.T) {
	byteT := &btf.Typedef{Name: "BYTE", Type: &btf.Int{Name: "unsigned char", Size: 1}}
	constPtrToConst := &btf.Const{Type: &btf.Pointer{Target: &btf.Const{Type: byteT}}}
	fn := &btf.Func{Name: "ZSTD_count", Type: &btf.FuncProto{Return: &btf.Int{Name: "size_t", Size: 8}, Params: []btf.FuncParam{
		{Name: "pIn", Type: &btf.Pointer{Target: &btf.Const{Type: byteT}}},
		{Name: "iend", Type: constPtrToConst},
		{Name: "flags", Type: &btf.Volatile{Type: &btf.Pointer{Target: &btf.Int{Name: "int", Size: 4}}}},
		{Name: "cb", Type: &btf.Const{Type: &btf.Pointer{Target: &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4}}}}},
	}}}
	p, err := ProtoFromBTF(fn)
	require.NoError(t, err)
	assert.Equal(t, "const BYTE *", p.Params[0].Type)
	assert.Equal(t, "const BYTE * const", p.Params[1].Type)
	assert.Equal(t, "int * volatile", p.Params[2].Type)
	assert.Equal(t, "int (*)(void)", p.Params[3].Type)
	assert.Equal(t, ArgCharPtr, p.Params[1].Kind, "a const pointer to a byte type is still a string candidate")
}

// TestFtraceLocationsPerCopy: with available_filter_functions_addrs, each
// copy of a duplicated name is judged by its own address (ftrace locations
// sit a few bytes into the function), and fentry, which attaches by name
// to the lowest copy, refuses every copy when that one is not patchable.
func TestFtraceLocationsPerCopy(t *testing.T) {
	syms := []Sym{{Name: "a", Addr: 0x1000}, {Name: "t_stop", Addr: 0x2000}, {Name: "b", Addr: 0x2100}, {Name: "t_stop", Addr: 0x3000}, {Name: "c", Addr: 0x3100}}
	fn := &btf.Func{Name: "t_stop", Type: &btf.FuncProto{Return: &btf.Void{}, Params: []btf.FuncParam{{Name: "m", Type: &btf.Pointer{Target: &btf.Void{}}}}}}
	lookup := func(name, module string) (*btf.Func, error) { return fn, nil }
	k := NewKernel(syms, map[FilterKey]int{{Name: "t_stop"}: 1, {Name: "a"}: 1, {Name: "b"}: 1, {Name: "c"}: 1}, lookup, "arm64", RuleLimits{MaxArgs: 12})
	fs, err := k.Match([]string{"t_stop"}, nil)
	require.NoError(t, err)
	require.Len(t, fs, 2)
	assert.Empty(t, fs[0].Skip[ModeKprobeMulti], "by name only: both copies look patchable")
	k.SetFtraceLocations([]uint64{0x1008, 0x2108, 0x3008, 0x3108})
	fs, err = k.Match([]string{"t_stop"}, nil)
	require.NoError(t, err)
	assert.Contains(t, fs[0].Skip[ModeKprobeMulti], "not in available_filter_functions", "the lowest copy has no ftrace location")
	assert.Contains(t, fs[0].Skip[ModeFentryFexit], "not in available_filter_functions")
	assert.Empty(t, fs[1].Skip[ModeKprobeMulti], "the second copy is patchable")
	assert.Equal(t, "another copy: a trampoline attaches by name to the copy the kernel resolves (t_stop@0x2000, the lowest address), not this one", fs[1].Skip[ModeFentryFexit])
	_, err = k.Resolve([]string{"t_stop"}, nil, ModeFentryFexit, 0)
	assert.ErrorIs(t, err, ErrUntraceable)
	r, err := k.Resolve([]string{"t_stop"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 1)
	assert.EqualValues(t, 0x3000, r.Funcs[0].Addr)
}

// TestStructReturn: a function returning a struct by value (from_vfsuid
// returns kuid_t) is refused in the trampoline modes when the limits say
// so (the verifier through 7.3: "return type STRUCT is unsupported"), and
// taken when they do not; kprobe modes take it either way.
func TestStructReturn(t *testing.T) {
	kuid := &btf.Typedef{Name: "kuid_t", Type: &btf.Struct{Name: "", Size: 4}}
	fn := &btf.Func{Name: "from_vfsuid", Type: &btf.FuncProto{Return: kuid, Params: []btf.FuncParam{{Name: "idmap", Type: &btf.Pointer{Target: &btf.Void{}}}}}}
	lookup := func(name, module string) (*btf.Func, error) { return fn, nil }
	k := NewKernel([]Sym{{Name: "from_vfsuid", Addr: 0x1000}}, map[FilterKey]int{{Name: "from_vfsuid"}: 1}, lookup, "amd64", RuleLimits{MaxArgs: 12, MaxStruct: 16, Rule: "the rule"})
	fs, err := k.Match([]string{"from_vfsuid"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "returns a struct by value (kuid_t, 4 bytes; the rule: no struct return)", fs[0].Skip[ModeFentryFexit])
	assert.Equal(t, fs[0].Skip[ModeFentryFexit], fs[0].Skip[ModeFSession])
	assert.Empty(t, fs[0].Skip[ModeKprobeMulti])
	k.Limits = RuleLimits{MaxArgs: 12, MaxStruct: 16, MaxStructRet: 16, Rule: "a kernel that takes them"}
	fs, err = k.Match([]string{"from_vfsuid"}, nil)
	require.NoError(t, err)
	assert.Empty(t, fs[0].Skip[ModeFentryFexit])
}
