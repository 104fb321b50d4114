package symbols

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fixture BTF: prototypes shaped like the arm64 7.3 kernel's.
func fixtureBTF() map[string]*btf.Func {
	i32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	i64 := &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}
	u64 := &btf.Int{Name: "long unsigned int", Size: 8}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	sizeT := &btf.Typedef{Name: "size_t", Type: u64}
	ssizeT := &btf.Typedef{Name: "ssize_t", Type: i64}
	file := &btf.Struct{Name: "file", Size: 256}
	how := &btf.Struct{Name: "open_how", Size: 24}
	cstr := &btf.Pointer{Target: &btf.Const{Type: char}}
	fn := func(name string, ret btf.Type, params ...btf.FuncParam) *btf.Func {
		return &btf.Func{Name: name, Type: &btf.FuncProto{Return: ret, Params: params}, Linkage: btf.GlobalFunc}
	}
	p := func(n string, t btf.Type) btf.FuncParam { return btf.FuncParam{Name: n, Type: t} }
	many := []btf.FuncParam{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		many = append(many, p(n, i64))
	}
	return map[string]*btf.Func{
		"do_sys_openat2":    fn("do_sys_openat2", i64, p("dfd", i32), p("filename", cstr), p("how", &btf.Pointer{Target: how})),
		"do_sys_open":       fn("do_sys_open", i64, p("dfd", i32), p("filename", cstr), p("flags", i32), p("mode", &btf.Int{Name: "umode_t", Size: 2})),
		"vfs_read":          fn("vfs_read", ssizeT, p("file", &btf.Pointer{Target: file}), p("buf", &btf.Pointer{Target: char}), p("count", sizeT), p("pos", &btf.Pointer{Target: i64})),
		"vfs_readv":         fn("vfs_readv", ssizeT, p("file", &btf.Pointer{Target: file})),
		"vfs_write":         fn("vfs_write", ssizeT, p("file", &btf.Pointer{Target: file})),
		"ksys_read":         fn("ksys_read", ssizeT, p("fd", &btf.Int{Name: "unsigned int", Size: 4}), p("buf", &btf.Pointer{Target: char}), p("count", sizeT)),
		"ksys_msgctl":       fn("ksys_msgctl", i64, p("msqid", i32)),
		"vfs_kern_mount":    fn("vfs_kern_mount", &btf.Pointer{Target: &btf.Struct{Name: "vfsmount"}}),
		"show_stat":         fn("show_stat", i32, p("p", &btf.Pointer{Target: &btf.Struct{Name: "seq_file"}})),
		"printk_varargs_fn": fn("printk_varargs_fn", i32, p("fmt", cstr), btf.FuncParam{Type: nil}),
		"many_args_fn":      fn("many_args_fn", i32, many...),
		"struct_arg_fn":     fn("struct_arg_fn", &btf.Void{}, p("how", how)),
		"ext4_file_open":    fn("ext4_file_open", i32, p("inode", &btf.Pointer{Target: &btf.Struct{Name: "inode"}}), p("filp", &btf.Pointer{Target: file})),
	}
}

func fixtureKernel(t *testing.T, arch string, maxArgs int) *Kernel {
	t.Helper()
	f, err := os.Open("testdata/kallsyms-arm64-7.3")
	require.NoError(t, err)
	defer f.Close()
	syms, err := ParseKallsyms(f)
	require.NoError(t, err)
	ff, err := os.Open("testdata/available_filter_functions-arm64-7.3")
	require.NoError(t, err)
	defer ff.Close()
	filter, err := ParseFilterFunctions(ff)
	require.NoError(t, err)
	fns := fixtureBTF()
	lookup := func(name, module string) (*btf.Func, error) {
		if fn, ok := fns[name]; ok {
			return fn, nil
		}
		return nil, btf.ErrNotFound
	}
	return NewKernel(syms, filter, lookup, arch, maxArgs)
}

func TestParseKallsyms(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	require.Len(t, k.Syms, 21, "text symbols only (the D symbol is dropped)")
	assert.Equal(t, Sym{Name: "do_sys_openat2", Addr: 0xffff8000803a1b20}, k.Syms[1])
	assert.Equal(t, Sym{Name: "ext4_file_open", Addr: 0xffff800000a10000, Module: "ext4"}, k.Syms[19])
	assert.Equal(t, 2, k.Filter[FilterKey{"show_stat", ""}])
	assert.Equal(t, 1, k.Filter[FilterKey{"ext4_file_open", "ext4"}])
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

func TestResolveExact(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	r, err := k.Resolve([]string{"do_sys_openat2", "vfs_read"}, nil, ModeFentry, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 2)
	assert.Equal(t, "do_sys_openat2", r.Funcs[0].Name)
	assert.EqualValues(t, 0, r.Funcs[0].ID)
	assert.EqualValues(t, 1, r.Funcs[1].ID)
	assert.Equal(t, uint64(0xffff8000803a8318), r.Funcs[1].Addr)
	require.NotNil(t, r.Funcs[0].Proto)
	assert.Equal(t, RetLong, r.Funcs[0].Proto.RetKind)
	assert.Equal(t, "dfd", r.Funcs[0].Proto.Params[0].Name)
	assert.Equal(t, ArgInt, r.Funcs[0].Proto.Params[0].Kind)
	assert.Equal(t, ArgCharPtr, r.Funcs[0].Proto.Params[1].Kind)
}

func TestResolveUnknownSuggests(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	_, err := k.Resolve([]string{"do_sys_openat"}, nil, ModeFentry, 0)
	require.ErrorIs(t, err, ErrNoMatch)
	assert.ErrorContains(t, err, "did you mean do_sys_openat2, do_sys_open")
	_, err = k.Resolve([]string{"nothing_*"}, nil, ModeKprobeMulti, 0)
	assert.ErrorIs(t, err, ErrNoMatch)
}

func TestResolveSuffixedCopy(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	// kprobe-multi traces the compiler copy found from the base name.
	r, err := k.Resolve([]string{"ksys_msgctl"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 1)
	assert.Equal(t, "ksys_msgctl.constprop.0", r.Funcs[0].Name)
	assert.Contains(t, r.Notes[0], "traced as compiler copy ksys_msgctl.constprop.0")
	// fentry refuses it with the reason, since an exact name was asked.
	_, err = k.Resolve([]string{"ksys_msgctl"}, nil, ModeFentry, 0)
	require.ErrorIs(t, err, ErrUntraceable)
	assert.ErrorContains(t, err, "compiler copy without BTF of its own")
	// An exact name with both the original and a copy takes the original.
	r, err = k.Resolve([]string{"vfs_kern_mount"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 1)
	assert.Equal(t, "vfs_kern_mount", r.Funcs[0].Name)
}

func TestResolveDuplicates(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	r, err := k.Resolve([]string{"show_stat"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 2, "kprobe-multi attaches every copy by address")
	assert.Equal(t, 2, r.Funcs[0].Copies)
	r, err = k.Resolve([]string{"show_stat"}, nil, ModeFentry, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 1, "fentry attaches by BTF id: one")
	assert.Contains(t, r.Notes[0], "ambiguous (2 copies: show_stat@0xffff8000803c0000, show_stat@0xffff8000803c1000)")
	r, err = k.Resolve([]string{"show_stat@ffff8000803c1000"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 1)
	assert.Equal(t, uint64(0xffff8000803c1000), r.Funcs[0].Addr)
}

func TestResolveModules(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	r, err := k.Resolve([]string{"ext4:ext4_file_*"}, nil, ModeKprobeMulti, 0)
	require.NoError(t, err)
	require.Len(t, r.Funcs, 2)
	assert.Equal(t, "ext4_file_open [ext4]", r.Funcs[0].Display())
	r, err = k.Resolve([]string{"ext4_file_open [ext4]"}, nil, ModeFentry, 0)
	require.NoError(t, err)
	assert.Equal(t, "ext4_file_open", r.Funcs[0].BTFName)
	_, err = k.Resolve([]string{"ext4_file_read_iter [ext4]"}, nil, ModeFentry, 0)
	assert.ErrorContains(t, err, "no BTF prototype")
}

func TestResolveWildcardSkips(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	r, err := k.Resolve([]string{"*"}, []string{"ext4_*", "_text"}, ModeFentry, 0)
	require.NoError(t, err)
	names := map[string]string{}
	for _, f := range r.Skipped {
		names[f.Name] = f.Skip[ModeFentry]
	}
	assert.Contains(t, names["vfs_read_iter_helper"], "not in available_filter_functions")
	assert.Contains(t, names["inlined_helper"], "not in available_filter_functions")
	assert.Contains(t, names["printk_varargs_fn"], "varargs")
	assert.Contains(t, names["many_args_fn"], "9 arguments, above the arm64 trampoline limit of 8")
	assert.Contains(t, names["struct_arg_fn"], "struct passed by value")
	assert.Contains(t, names["rcu_read_unlock_strict"], "deny-listed")
	assert.Contains(t, names["__bpf_prog_enter_recur"], "deny-listed")
	assert.Contains(t, names["ksys_msgctl.constprop.0"], "compiler copy")
	assert.Equal(t, 2, r.Reasons["not in available_filter_functions"])
	assert.Contains(t, r.SkipSummary(), "skipped 9: ")
	for _, f := range r.Funcs {
		assert.Empty(t, f.Skip[ModeFentry], f.Name)
	}
	// kprobe-multi only needs available_filter_functions and the deny list.
	r, err = k.Resolve([]string{"*"}, []string{"ext4_*", "_text"}, ModeKprobeMulti, 0)
	require.NoError(t, err)
	assert.Len(t, r.Skipped, 4)
	// amd64 6.6+ takes 12 arguments.
	k12 := fixtureKernel(t, "amd64", 12)
	r, err = k12.Resolve([]string{"many_args_fn"}, nil, ModeFentry, 0)
	require.NoError(t, err)
	assert.Len(t, r.Funcs, 1)
}

func TestResolveMaxFunctions(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	_, err := k.Resolve([]string{"vfs_*"}, nil, ModeKprobeMulti, 2)
	require.True(t, errors.Is(err, ErrTooMany))
	assert.ErrorContains(t, err, "more than --max-functions 2")
}

func TestBaseNameDenied(t *testing.T) {
	assert.Equal(t, "foo", BaseName("foo.isra.0"))
	assert.Equal(t, "foo", BaseName("foo.constprop.0.isra.0"))
	assert.Equal(t, "foo", BaseName("foo"))
	assert.Equal(t, "migrate_disable", Denied("migrate_disable"))
	assert.Equal(t, "", Denied("vfs_read"))
}

func TestMatchListsEveryMode(t *testing.T) {
	k := fixtureKernel(t, "arm64", 8)
	fs, err := k.Match([]string{"show_stat", "ksys_msgctl"}, nil)
	require.NoError(t, err)
	require.Len(t, fs, 3)
	assert.Equal(t, 2, fs[0].Copies)
	assert.Empty(t, fs[0].Skip[ModeKprobeMulti])
	assert.Contains(t, fs[2].Skip[ModeFentry], "compiler copy")
	assert.Empty(t, fs[2].Skip[ModeKprobeMulti])
}
