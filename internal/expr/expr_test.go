package expr

import (
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Synthetic kernel types shaped like the real ones (the recorded fixtures
// keep structs reduced to name and size): a union of an anonymous struct,
// arrays, typedefs, const pointers, an enum.
var (
	u32T   = &btf.Int{Name: "unsigned int", Size: 4}
	u64T   = &btf.Int{Name: "long long unsigned int", Size: 8}
	intT   = &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	ucharT = &btf.Int{Name: "unsigned char", Size: 1}
	charT  = &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	sizeT  = &btf.Typedef{Name: "size_t", Type: &btf.Int{Name: "long unsigned int", Size: 8}}
	modeT  = &btf.Typedef{Name: "fmode_t", Type: u32T}
	stateE = &btf.Enum{Name: "file_state", Size: 4, Values: []btf.EnumValue{{Name: "FS_OPEN", Value: 1}, {Name: "FS_CLOSED", Value: 2}}}
	qstr   = &btf.Struct{Name: "qstr", Size: 16, Members: []btf.Member{
		{Name: "", Type: &btf.Union{Size: 8, Members: []btf.Member{
			{Name: "", Type: &btf.Struct{Size: 8, Members: []btf.Member{{Name: "hash", Type: u32T}, {Name: "len", Type: u32T, Offset: 32}}}},
			{Name: "hash_len", Type: u64T},
		}}},
		{Name: "name", Type: &btf.Pointer{Target: &btf.Const{Type: ucharT}}, Offset: 64},
	}}
	dentry = &btf.Struct{Name: "dentry", Size: 96, Members: []btf.Member{
		{Name: "d_flags", Type: u32T},
		{Name: "d_name", Type: qstr, Offset: 32 * 8},
		{Name: "d_iname", Type: &btf.Array{Index: u32T, Type: ucharT, Nelems: 40}, Offset: 56 * 8},
	}}
	pathS = &btf.Struct{Name: "path", Size: 16, Members: []btf.Member{
		{Name: "mnt", Type: &btf.Pointer{Target: &btf.Void{}}},
		{Name: "dentry", Type: &btf.Pointer{Target: dentry}, Offset: 64},
	}}
	fileS = &btf.Struct{Name: "file", Size: 256, Members: []btf.Member{
		{Name: "f_mode", Type: modeT, Offset: 4 * 8},
		{Name: "f_path", Type: pathS, Offset: 64 * 8},
		{Name: "f_state", Type: stateE, Offset: 80 * 8},
		{Name: "f_ra", Type: &btf.Array{Index: u32T, Type: intT, Nelems: 4}, Offset: 96 * 8},
		{Name: "f_bits", Type: u32T, Offset: 112 * 8, BitfieldSize: 3},
		{Name: "f_name", Type: &btf.Array{Index: u32T, Type: charT, Nelems: 16}, Offset: 120 * 8},
	}}
	vfsRead = &btf.FuncProto{Return: &btf.Typedef{Name: "ssize_t", Type: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}}, Params: []btf.FuncParam{
		{Name: "file", Type: &btf.Pointer{Target: fileS}},
		{Name: "buf", Type: &btf.Pointer{Target: charT}},
		{Name: "count", Type: sizeT},
		{Name: "pos", Type: &btf.Pointer{Target: &btf.Typedef{Name: "loff_t", Type: &btf.Int{Name: "long long", Size: 8, Encoding: btf.Signed}}}},
	}}
	voidFn = &btf.FuncProto{Return: &btf.Void{}, Params: []btf.FuncParam{{Name: "flags", Type: u32T}}}
)

func env() *Env { return &Env{Func: "vfs_read", Proto: vfsRead} }

func one(t *testing.T, src string, e *Env) (*Plan, error) {
	t.Helper()
	s, err := ParseSet(nil, []string{src})
	if err != nil {
		return nil, err
	}
	p, skip, err := s.CompileFunc(e)
	for _, r := range skip {
		return nil, r
	}
	return p, err
}

func val(t *testing.T, src string) Value {
	t.Helper()
	s, err := ParseSet([]string{src}, nil)
	require.NoError(t, err)
	p, skip, err := s.CompileFunc(env())
	require.NoError(t, err)
	require.Empty(t, skip)
	require.Len(t, p.Values, 1)
	return p.Values[0]
}

func TestValueOffsets(t *testing.T) {
	// file->f_path.dentry->d_name.name: read path.dentry at 64+8, then
	// qstr.name at 32+8 (a const unsigned char *: a string).
	v := val(t, "file->f_path.dentry->d_name.name")
	assert.Equal(t, Fetch{Src: 0, Loads: []int32{72, 40}, Size: 8, Str: true}, v.Fetch)
	assert.Equal(t, symbols.ArgCharPtr, v.Kind)

	// An anonymous struct in an anonymous union: len at 32+4.
	v = val(t, "file->f_path.dentry->d_name.len")
	assert.Equal(t, Fetch{Loads: []int32{72, 36}, Size: 4}, v.Fetch)
	assert.Equal(t, symbols.ArgUint, v.Kind)
	v = val(t, "file->f_path.dentry->d_name.hash_len")
	assert.Equal(t, []int32{72, 32}, v.Loads)

	// A char array is read in place: its address is the dentry + 56.
	v = val(t, "file->f_path.dentry->d_iname")
	assert.Equal(t, Fetch{Loads: []int32{72}, Tail: 56, Size: 8, Str: true}, v.Fetch)

	// Typedefs (fmode_t), arrays with a constant index, enums.
	v = val(t, "file->f_mode")
	assert.Equal(t, Fetch{Loads: []int32{4}, Size: 4}, v.Fetch)
	v = val(t, "file->f_ra[2]")
	assert.Equal(t, Fetch{Loads: []int32{96 + 8}, Size: 4, Signed: true}, v.Fetch)
	v = val(t, "file->f_state")
	assert.Equal(t, symbols.ArgEnum, v.Kind)
	require.Len(t, v.Enum, 2)

	// Arguments: no read, the register normalized to its size.
	v = val(t, "count")
	assert.Equal(t, Fetch{Src: 2, Size: 8}, v.Fetch)
	v = val(t, "*pos")
	assert.Equal(t, Fetch{Src: 3, Loads: []int32{0}, Size: 8, Signed: true}, v.Fetch)
	v = val(t, "pos[1]")
	assert.Equal(t, []int32{8}, v.Loads)
	v = val(t, "arg2")
	assert.Equal(t, Fetch{Src: 2, Size: 8}, v.Fetch)
	v = val(t, "file->f_mode & 0x3")
	assert.Equal(t, uint64(3), v.Mask)
	v = val(t, "vfs_read:buf")
	assert.True(t, v.Str)

	// A cast through the kernel's BTF.
	spec := specWith(t, fileS)
	s, err := ParseSet([]string{"((struct file *)arg0)->f_path.dentry"}, nil)
	require.NoError(t, err)
	p, _, err := s.CompileFunc(&Env{Func: "nobtf", Spec: spec})
	require.NoError(t, err)
	assert.Equal(t, Fetch{Loads: []int32{72}, Size: 8}, p.Values[0].Fetch)
}

func specWith(t *testing.T, ts ...btf.Type) *btf.Spec {
	b, err := btf.NewBuilder(ts, nil)
	require.NoError(t, err)
	raw, err := b.Marshal(nil, nil)
	require.NoError(t, err)
	spec, err := btf.LoadSpecFromReader(bytesReader(raw))
	require.NoError(t, err)
	return spec
}

func TestFilterPrograms(t *testing.T) {
	p, err := one(t, "count == 1", env())
	require.NoError(t, err)
	assert.Equal(t, []Term{{Fetch: Fetch{Src: 2, Size: 8}, Op: OpEQ, K: 1}}, p.Terms)
	assert.Equal(t, []byte{BoolPush}, p.EntryOps)
	assert.Empty(t, p.ExitOps)

	// Top-level && splits: count at entry, ret at exit.
	p, err = one(t, "count > 4096 && ret == -ENOENT", env())
	require.NoError(t, err)
	require.Len(t, p.Terms, 2)
	assert.Equal(t, []byte{BoolPush | 0}, p.EntryOps)
	assert.Equal(t, []byte{BoolPush | 1}, p.ExitOps)
	assert.Equal(t, int64(-2), int64(p.Terms[1].K)) // -ENOENT
	assert.Equal(t, uint8(OpEQ), p.Terms[1].Op)
	assert.False(t, p.ExitArgs)

	// A mixed || is decided at exit, reading saved arguments.
	p, err = one(t, "!(count < 2 || ret >= 0)", env())
	require.NoError(t, err)
	assert.Empty(t, p.EntryOps)
	assert.Equal(t, []byte{BoolPush | 0, BoolPush | 1, BoolOr, BoolNot}, p.ExitOps)
	assert.True(t, p.ExitArgs)
	assert.Equal(t, uint8(OpGE|OpSigned), p.Terms[1].Op)

	// Strings: equality, prefix, !=, a constant on the left, bit tests.
	p, err = one(t, `file->f_path.dentry->d_name.name == "zero" && file->f_name ~ "tmp*" && "x" != buf && (file->f_mode & 0x4) && 1 < count`, env())
	require.NoError(t, err)
	require.Len(t, p.Terms, 5)
	assert.Equal(t, Term{Fetch: Fetch{Loads: []int32{72, 40}, Size: 8, Str: true}, Op: OpSEQ, S: "zero"}, p.Terms[0])
	assert.Equal(t, Term{Fetch: Fetch{Tail: 120, Size: 8, Str: true}, Op: OpSPFX, S: "tmp"}, p.Terms[1])
	assert.Equal(t, uint8(OpSEQ), p.Terms[2].Op)
	assert.Equal(t, Term{Fetch: Fetch{Loads: []int32{4}, Size: 4, Mask: 4}, Op: OpNZ}, p.Terms[3])
	assert.Equal(t, Term{Fetch: Fetch{Src: 2, Size: 8}, Op: OpGT, K: 1}, p.Terms[4])
	assert.Equal(t, []byte{0x10, 0x11, 0x20, 0x12, 0x40, 0x20, 0x13, 0x20, 0x14, 0x20}, p.EntryOps)

	// Enum constants of the value's type, from BTF.
	e := env()
	e.Spec = specWith(t, fileS)
	p, err = one(t, "file->f_state == FS_CLOSED", e)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), p.Terms[0].K)

	// Scoped to another function: nothing applies.
	p, err = one(t, "vfs_write:count == 1", env())
	require.NoError(t, err)
	assert.Nil(t, p)
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"count ==", `"count ==": syntax error at column 9: want a name, a number, a string or '(', found the end`},
		{"count = 1", `"count = 1": syntax error at column 7: unexpected character '='`},
		{"vfs_read:count @ 1", `"vfs_read:count @ 1": syntax error at column 16: unexpected character '@'`},
		{`name == "abc`, `syntax error at column 9: unterminated literal`},
		{"file->f_pth", `vfs_read: "file->f_pth": type error: struct file has no field "f_pth" (did you mean f_path?)`},
		{"file->f_path.dentry->d_nmae.name", `struct dentry has no field "d_nmae" (did you mean d_name?)`},
		{"cont == 1", `vfs_read has no parameter "cont" (did you mean count?)`},
		{"count->x", `count->x: count is a size_t, not a pointer`},
		{"*count", `dereference of count, a size_t, not a pointer`},
		{"file.f_path", `file.f_path: file is a pointer (use '->')`},
		{"file->f_path->dentry", `f_path is a struct path, not a pointer`},
		{`count == "x"`, `string comparison on count, a size_t, not a char array or char pointer`},
		{`file->f_mode ~ "a*"`, `string comparison on file->f_mode`},
		{`buf < "x"`, `"<" on strings: use ==, != or ~ "prefix*"`},
		{`buf ~ "a*b"`, `only a trailing '*' (prefix match) is supported`},
		{"ret", ""},
		{"(int)file->f_bits == 1", `cast of a bitfield`},
		{"file->f_ra[4] == 1", `index 4 out of range of int[4]`},
		{"file->f_path == 1", `is a struct path: name one of its fields (mnt, dentry)`},
		{"count == pos", `"==" compares a size_t with a loff_t *: a pointer compares with a pointer, an integer with an integer`},
		{"count < file->f_name", `"<" compares two values, one a char array`},
		{"count ~ buf", `'~' matches a string pattern`},
		{"1 == 2", `"==" compares two constants`},
		{"arg7 == 1", `arg7 is argument 7: only the first 6 argument registers are recorded`},
		{"(struct nosuch *)arg0", `cast to struct nosuch *: no BTF to resolve it`},
		{"file->f_path.mnt->x", `dereference of a void pointer`},
	} {
		t.Run(c.src, func(t *testing.T) {
			_, err := one(t, c.src, env())
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	_, err := one(t, "ret == 0", &Env{Func: "migrate_disable", Proto: voidFn})
	require.ErrorIs(t, err, ErrType)
	assert.Equal(t, `--filter migrate_disable: "ret == 0": type error: migrate_disable returns void: there is no ret to test`, err.Error())
	_, err = one(t, "file->f_path.dentry->d_name.name->x->y", env())
	require.Error(t, err)
	_, err = ParseSet([]string{"a", "b", "c", "d", "e"}, nil)
	require.ErrorIs(t, err, ErrType)
	s, err := ParseSet([]string{"count == 1"}, nil)
	require.NoError(t, err)
	_, _, err = s.CompileFunc(env())
	assert.ErrorContains(t, err, "--arg vfs_read: \"count == 1\": type error: \"==\" gives a condition, not a value")
	// Too deep: five reads.
	deep := &btf.Struct{Name: "node", Size: 8}
	deep.Members = []btf.Member{{Name: "next", Type: &btf.Pointer{Target: deep}}}
	_, err = one(t, "n->next->next->next->next->next", &Env{Func: "f", Proto: &btf.FuncProto{Return: intT, Params: []btf.FuncParam{{Name: "n", Type: &btf.Pointer{Target: deep}}}}})
	assert.ErrorContains(t, err, "too deep for the verifier: at most 4 memory reads")
}

// TestRecorded checks expressions against the recorded lab kernels'
// prototypes (their structs are reduced to name and size).
func TestRecorded(t *testing.T) {
	for _, name := range []string{"arm64-7.3", "amd64-7.3", "arm64-6.12"} {
		t.Run(name, func(t *testing.T) {
			k, _, err := symbols.LoadRecorded(filepath.Join("..", "symbols", "testdata", name))
			require.NoError(t, err)
			fn := func(n string) []*symbols.Func { return []*symbols.Func{{Name: n}} }
			lookup := func(f *symbols.Func) (*btf.FuncProto, *btf.Spec) {
				bf, err := k.BTF(f.Name, f.Module)
				if err != nil {
					return nil, nil
				}
				return bf.Type.(*btf.FuncProto), nil
			}
			s, err := ParseSet([]string{"count", "buf"}, []string{"count == 1"})
			require.NoError(t, err)
			plans, err := s.Compile(fn("vfs_read"), lookup)
			require.NoError(t, err)
			p := plans[0]
			require.NotNil(t, p)
			assert.Equal(t, Fetch{Src: 2, Size: 8}, p.Values[0].Fetch)
			assert.True(t, p.Values[1].Str)
			assert.Equal(t, []byte{BoolPush}, p.EntryOps)

			s, err = ParseSet([]string{"filename"}, []string{"ret == -ENOENT"})
			require.NoError(t, err)
			plans, err = s.Compile(fn("do_sys_openat2"), lookup)
			require.NoError(t, err)
			p = plans[0]
			assert.Equal(t, uint8(1), p.Values[0].Src)
			assert.True(t, p.Values[0].Str)
			assert.Equal(t, []byte{BoolPush}, p.ExitOps)
			// int on 7.3, long on 6.12: compared as a signed value of its size
			tm := p.Terms[0]
			assert.Equal(t, []any{uint8(SrcRet), true, uint8(OpEQ), int64(-2)}, []any{tm.Src, tm.Signed, tm.Op, int64(tm.K)})

			// Reduced structs: a field of struct file is not in the fixture.
			s, _ = ParseSet([]string{"file->f_path"}, nil)
			_, err = s.Compile(fn("vfs_read"), lookup)
			assert.ErrorContains(t, err, `struct file has no field "f_path" (its BTF lists no fields)`)

			// A parameter no traced function has: the first one's reason.
			s, _ = ParseSet(nil, []string{"count == 1"})
			_, err = s.Compile(fn("do_sys_openat2"), lookup)
			assert.ErrorContains(t, err, `--filter do_sys_openat2: "count == 1": type error: do_sys_openat2 has no parameter "count"`)
			// ... but with several functions it applies to those that have it.
			fs := []*symbols.Func{{ID: 0, Name: "do_sys_openat2"}, {ID: 1, Name: "vfs_read"}}
			plans, err = s.Compile(fs, lookup)
			require.NoError(t, err)
			assert.Nil(t, plans[0])
			assert.NotNil(t, plans[1])

			// Two filters: each applies to the functions it names, and
			// both hold where both apply.
			s, _ = ParseSet(nil, []string{"vfs_read:count == 1", "do_sys_openat2:ret == -ENOENT", "ret != 7"})
			plans, err = s.Compile(fs, lookup)
			require.NoError(t, err)
			assert.Equal(t, []byte{BoolPush | 0}, plans[0].ExitOps[:1])
			assert.Equal(t, []byte{BoolPush | 0, BoolPush | 1, BoolAnd}, plans[0].ExitOps)
			assert.Equal(t, []byte{BoolPush | 0}, plans[1].EntryOps)
			assert.Equal(t, []byte{BoolPush | 1}, plans[1].ExitOps)

			// A whole struct file: its size on that kernel.
			s, _ = ParseSet([]string{"*file"}, nil)
			plans, err = s.Compile(fn("vfs_read"), lookup)
			require.NoError(t, err)
			assert.Equal(t, map[string]uint16{"arm64-7.3": 176, "amd64-7.3": 176, "arm64-6.12": 184}[name], plans[0].Values[0].Bytes)

			s, _ = ParseSet(nil, []string{"ret == 0"})
			_, err = s.Compile(fn("migrate_disable"), lookup)
			assert.ErrorContains(t, err, "migrate_disable returns void")
		})
	}
}

// Whole structs: the address is fetched (every read but the last), then
// Bytes bytes of it are read into the event's struct bytes, shared in
// order by a function's struct values.
func TestStructValues(t *testing.T) {
	v := val(t, "*file")
	assert.Equal(t, Fetch{Src: 0, Size: 8, Bytes: 256}, v.Fetch)
	assert.Equal(t, []any{symbols.ArgStruct, uint32(256), "struct file", btf.Type(fileS), uint32(0)}, []any{v.Kind, v.Size, v.Type, v.Struct, v.Off})
	assert.Equal(t, "arg0 → read 256 bytes at +0 → struct", v.Fetch.String())
	v = val(t, "file->f_path")
	assert.Equal(t, Fetch{Size: 8, Tail: 64, Bytes: 16}, v.Fetch)
	v = val(t, "*file->f_path.dentry")
	assert.Equal(t, Fetch{Loads: []int32{72}, Size: 8, Bytes: 96}, v.Fetch)
	assert.Equal(t, "arg0 → read 8 bytes at +72 → read 96 bytes at +0 → struct", v.Fetch.String())
	v = val(t, "file->f_path.dentry->d_name")
	assert.Equal(t, Fetch{Loads: []int32{72}, Tail: 32, Size: 8, Bytes: 16}, v.Fetch)
	// A scalar through '*' is still a value.
	v = val(t, "*buf")
	assert.Equal(t, Fetch{Src: 1, Loads: []int32{0}, Size: 1, Signed: true}, v.Fetch)

	// Two structs share the event's bytes: the second is truncated to
	// what is left, a third has no room.
	s, err := ParseSet([]string{"*file", "*file"}, nil)
	require.NoError(t, err)
	p, _, err := s.CompileFunc(env())
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 256, 512}, []uint32{p.Values[0].Off, p.Values[1].Off, uint32(p.StructBytes)})
	x := p.Encode()
	assert.Equal(t, [4]uint16{0, 256, 0, 0}, x.Boff)
	assert.Equal(t, [4]uint16{256, 256, 0, 0}, x.Blen)
	assert.Equal(t, uint16(512), x.Nbytes)
	assert.Equal(t, uint8(8), x.V[0].Flags)
	s, _ = ParseSet([]string{"*file", "*file", "*file"}, nil)
	_, _, err = s.CompileFunc(env())
	assert.EqualError(t, err, `--arg vfs_read: "*file": type error: no room for another struct: the struct values of one function take at most 512 bytes per event, used by the ones before`)

	// Larger than the bound: truncated, and -v/--dry-run says so.
	big := &btf.Struct{Name: "big", Size: 600, Members: []btf.Member{{Name: "x", Type: u32T}}}
	s, _ = ParseSet([]string{"*b", "count"}, nil)
	p, _, err = s.CompileFunc(&Env{Func: "f", Proto: &btf.FuncProto{Return: intT, Params: []btf.FuncParam{{Name: "b", Type: &btf.Pointer{Target: big}}, {Name: "count", Type: sizeT}}}})
	require.NoError(t, err)
	assert.Equal(t, uint16(512), p.Values[0].Bytes)
	assert.Equal(t, "--arg *b: struct big, arg0 → read 512 bytes at +0 → struct (truncated: 512 of its 600 bytes, at most 512 per event)", p.Describe()[0])
	assert.Equal(t, uint16(0), p.Values[1].Bytes)

	// '*' of a non-pointer names the function and the expression.
	s, _ = ParseSet([]string{"*count"}, nil)
	_, _, err = s.CompileFunc(env())
	assert.EqualError(t, err, `--arg vfs_read: "*count": type error: dereference of count, a size_t, not a pointer`)
	// A struct has no value to compare.
	_, err = one(t, "*file == 1", env())
	assert.ErrorContains(t, err, `is a struct file: name one of its fields`)
}
