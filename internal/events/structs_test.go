package events

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// A struct shaped like the kernel's: nested structs, an anonymous union of
// an anonymous struct and a u64, arrays (char, int, of structs), a
// bitfield pair, an enum, typedefs and const, pointers.
var (
	fU8    = &btf.Int{Name: "unsigned char", Size: 1}
	fChar  = &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	fU16   = &btf.Int{Name: "short unsigned int", Size: 2}
	fU32   = &btf.Int{Name: "unsigned int", Size: 4}
	fInt   = &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	fU64   = &btf.Int{Name: "long long unsigned int", Size: 8}
	fBool  = &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	fModeT = &btf.Typedef{Name: "fmode_t", Type: &btf.Const{Type: fU32}}
	fState = &btf.Enum{Name: "state", Size: 4, Values: []btf.EnumValue{{Name: "ST_OPEN", Value: 1}, {Name: "ST_CLOSED", Value: 2}}}
	fQstr  = &btf.Struct{Name: "qstr", Size: 16, Members: []btf.Member{
		{Type: &btf.Union{Size: 8, Members: []btf.Member{
			{Type: &btf.Struct{Size: 8, Members: []btf.Member{{Name: "hash", Type: fU32}, {Name: "len", Type: fU32, Offset: 32}}}},
			{Name: "hash_len", Type: fU64},
		}}},
		{Name: "name", Type: &btf.Pointer{Target: &btf.Const{Type: fU8}}, Offset: 64},
	}}
	fPair = &btf.Struct{Name: "pair", Size: 4, Members: []btf.Member{{Name: "a", Type: fU16}, {Name: "b", Type: fU16, Offset: 16}}}
	fObj  = &btf.Struct{Name: "obj", Size: 72, Members: []btf.Member{
		{Name: "mode", Type: fModeT},
		{Name: "state", Type: fState, Offset: 32},
		{Name: "name", Type: fQstr, Offset: 64},
		{Name: "comm", Type: &btf.Array{Index: fU32, Type: fChar, Nelems: 8}, Offset: 192},
		{Name: "ra", Type: &btf.Array{Index: fU32, Type: fInt, Nelems: 3}, Offset: 256},
		{Name: "lo", Type: fU32, Offset: 352, BitfieldSize: 3},
		{Name: "hi", Type: fInt, Offset: 355, BitfieldSize: 5},
		{Name: "kind", Type: fState, Offset: 360, BitfieldSize: 2},
		{Name: "ok", Type: fBool, Offset: 368},
		{Name: "pairs", Type: &btf.Array{Index: fU32, Type: fPair, Nelems: 2}, Offset: 384},
		{Name: "next", Type: &btf.Pointer{Target: &btf.Void{}}, Offset: 448},
		{Name: "prev", Type: &btf.Pointer{Target: &btf.Void{}}, Offset: 512},
	}}
)

// objBytes is fObj's 72 bytes with known values.
func objBytes() []byte {
	b := make([]byte, 72)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 0x4a801d)
	le.PutUint32(b[4:], 2)
	le.PutUint32(b[8:], 0xc96a2e69) // hash
	le.PutUint32(b[12:], 8)         // len
	le.PutUint64(b[16:], 0xff29e3f4c1475938)
	copy(b[24:], "host\x00xyz")
	le.PutUint32(b[32:], uint32(0xffffffff)) // -1
	le.PutUint32(b[36:], 7)
	le.PutUint32(b[40:], 1<<31)
	b[44] = 5 | 0x1e<<3 // lo=5, hi=-2 (5-bit 0b11110)
	b[45] = 1           // kind=ST_OPEN
	b[46] = 1           // ok
	le.PutUint16(b[48:], 1)
	le.PutUint16(b[50:], 2)
	le.PutUint16(b[52:], 3)
	le.PutUint16(b[54:], 65535)
	le.PutUint64(b[56:], 0xffffffff81000000)
	return b
}

func TestAppendStruct(t *testing.T) {
	data := objBytes()
	assert.Equal(t, `{mode=0x4a801d, state=ST_CLOSED, name={hash=3379179113, len=8, hash_len=37738917481, name=0xff29e3f4c1475938}, `+
		`comm="host", ra=[-1, 7, -2147483648], lo=5, hi=-2, kind=ST_OPEN, ok=true, pairs=[{a=1, b=2}, {a=3, b=65535}], next=0xffffffff81000000, prev=NULL}`,
		string(AppendStruct(nil, fObj, data, false)))
	j := map[string]any{}
	require.NoError(t, json.Unmarshal(AppendStruct(nil, fObj, data, true), &j))
	assert.Equal(t, map[string]any{"mode": 4882461.0, "state": "ST_CLOSED",
		"name": map[string]any{"hash": 3379179113.0, "len": 8.0, "hash_len": 37738917481.0, "name": "0xff29e3f4c1475938"},
		"comm": "host", "ra": []any{-1.0, 7.0, -2147483648.0}, "lo": 5.0, "hi": -2.0, "kind": "ST_OPEN", "ok": true,
		"pairs": []any{map[string]any{"a": 1.0, "b": 2.0}, map[string]any{"a": 3.0, "b": 65535.0}},
		"next":  "0xffffffff81000000", "prev": nil}, j, "pointers as in args: hex strings, NULL null")

	// Truncated by the byte bound: "..." where the bytes end, in every
	// struct still open.
	assert.Equal(t, `{mode=0x4a801d, state=ST_CLOSED, name={hash=3379179113, len=8, hash_len=37738917481, ...}}`,
		string(AppendStruct(nil, fObj, data[:20], false)))
	assert.Equal(t, `{mode=0x4a801d, state=ST_CLOSED, name={hash=3379179113, len=8, hash_len=37738917481, name=0xff29e3f4c1475938}, comm="hos"...}`,
		string(AppendStruct(nil, fObj, data[:27], false)))
	assert.Equal(t, `{mode=0x4a801d, state=ST_CLOSED, name={hash=3379179113, len=8, hash_len=37738917481, name=0xff29e3f4c1475938}, comm="host", ra=[-1, ...]}`,
		string(AppendStruct(nil, fObj, data[:36], false)))
	assert.Equal(t, `{"mode":4882461,"...":true}`, string(AppendStruct(nil, fObj, data[:6], true)))

	// Unknown enum values print as numbers.
	d2 := objBytes()
	d2[4] = 9
	assert.Contains(t, string(AppendStruct(nil, fObj, d2, false)), "state=9,")
}

// Nesting deeper than StructDepth prints as {...}; arrays show at most
// StructArrayElems elements.
func TestAppendStructBounds(t *testing.T) {
	var inner btf.Type = &btf.Struct{Name: "l", Size: 4, Members: []btf.Member{{Name: "v", Type: fU32}}}
	for i := 1; i < StructDepth+1; i++ {
		inner = &btf.Struct{Name: "l", Size: 4, Members: []btf.Member{{Name: "in", Type: inner}}}
	}
	assert.Equal(t, `{in={in={in={in={in={in={...}}}}}}}`, string(AppendStruct(nil, inner, make([]byte, 4), false)))
	arr := &btf.Struct{Name: "a", Size: 40, Members: []btf.Member{{Name: "x", Type: &btf.Array{Index: fU32, Type: fU16, Nelems: 20}}}}
	assert.Equal(t, `{x=[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...]}`, string(AppendStruct(nil, arr, make([]byte, 40), false)))
}

// A record with a whole struct: its bytes follow the values on the wire
// (only as many as used) and print inside {expr=...}.
func TestStructValueRecord(t *testing.T) {
	fn := *openat2
	fn.Values = []symbols.Value{
		{Name: "how->flags", Kind: symbols.ArgUint, Size: 8},
		{Name: "*how", Kind: symbols.ArgStruct, Size: 72, Type: fObj, Off: 0, Len: 72},
	}
	tbl := Table{&fn}
	e := sample(KindEntry, 0, 0)
	r := bpfobj.TraceRecX{H: bpfobj.TraceRecHdr{TsNs: e.TsNs, Tgid: e.Tgid, Tid: e.Tid, Kind: KindEntry, Mode: 1,
		Flags: FlagHasArgs | FlagVals, Nargs: 3}, Args: e.Args}
	r.X.V = [4]uint64{0x8000, 0xff29e3f4c2725a80}
	r.X.Flags[1] = uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_BYTES)
	r.X.Len[1] = 72
	copy(r.B[:], objBytes())
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), ValsSize+72)
	d := testDecoder()
	var ev bpfobj.TraceEvent
	ok, err := d.Decode(raw, &ev)
	require.NoError(t, err)
	require.True(t, ok)
	got := string((&Text{Table: tbl}).Append(nil, &ev))
	assert.Contains(t, got, `{how->flags=32768, *how={mode=0x4a801d, state=ST_CLOSED, name={hash=3379179113, len=8, `)
	assert.Contains(t, got, `prev=NULL}}`)
	j := decodeJSON(t, (&JSON{Table: tbl}).Append(nil, &ev))
	v := j["values"].(map[string]any)
	assert.Equal(t, "host", v["*how"].(map[string]any)["comm"])

	// A faulted read: <fault>, null and the errno.
	r.X.Len[1] = -14
	ok, err = d.Decode(raw[:ValsSize], &ev)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Contains(t, string((&Text{Table: tbl}).Append(nil, &ev)), `{how->flags=32768, *how=<fault>}`)
	j = decodeJSON(t, (&JSON{Table: tbl}).Append(nil, &ev))
	assert.Equal(t, map[string]any{"*how": "-EFAULT"}, j["value_errors"])

	_, err = d.Decode(raw[:ValsSize-1], &ev)
	assert.ErrorContains(t, err, "record with values of 399 bytes, want 400 to 912")
	big := make([]byte, ValsSize+MaxStructBytes+1)
	copy(big, raw[:ValsSize])
	_, err = d.Decode(big, &ev)
	assert.ErrorContains(t, err, "record with values of 913 bytes, want 400 to 912")
}

// Text shows flag sets in hex and file modes in octal; JSON keeps numbers.
func TestAppendStructBases(t *testing.T) {
	umode := &btf.Typedef{Name: "umode_t", Type: &btf.Int{Name: "unsigned short", Size: 2}}
	gfp := &btf.Typedef{Name: "gfp_t", Type: fU32}
	s := &btf.Struct{Name: "x", Size: 16, Members: []btf.Member{
		{Name: "i_mode", Type: umode},
		{Name: "gfp", Type: gfp, Offset: 32},
		{Name: "f_flags", Type: fU32, Offset: 64},
		{Name: "count", Type: fU32, Offset: 96},
	}}
	data := []byte{0xa4, 0x81, 0, 0, 0xc0, 0x0c, 0, 0, 0x00, 0x80, 0, 0, 7, 0, 0, 0}
	assert.Equal(t, `{i_mode=0100644, gfp=0xcc0, f_flags=0x8000, count=7}`, string(AppendStruct(nil, s, data, false)))
	assert.Equal(t, `{"i_mode":33188,"gfp":3264,"f_flags":32768,"count":7}`, string(AppendStruct(nil, s, data, true)))
}
