package events

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// A record with --arg values (struct rec_x, FTP_F_VALS): decoded, then
// printed by expression in text and JSON; a faulted read is <fault> (JSON:
// null and value_errors), a NULL string NULL, an enum by name.
func TestValues(t *testing.T) {
	assert.Equal(t, 32+16+48+304, ValsSize, "struct rec_x")
	fn := *openat2
	fn.Values = []symbols.Value{
		{Name: "filename", Kind: symbols.ArgCharPtr, Size: 8},
		{Name: "how->flags", Kind: symbols.ArgUint, Size: 8},
		{Name: "how->mode", Kind: symbols.ArgEnum, Size: 4, Enum: []symbols.EnumValue{{Name: "MODE_A", Value: 3}}},
		{Name: "how->resolve", Kind: symbols.ArgInt, Size: 4},
	}
	tbl := Table{&fn}
	e := sample(KindEntry, 0, 0)
	r := bpfobj.TraceRecX{H: bpfobj.TraceRecHdr{TsNs: e.TsNs, Tgid: e.Tgid, Tid: e.Tid, Kind: KindEntry, Mode: 1,
		Flags: FlagHasArgs | FlagVals, Nargs: 3}, Args: e.Args}
	r.X.V = [4]uint64{0xffffe2a627bc, 0x8000, 3, 0}
	r.X.Flags[0] = uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_STR)
	name := "/etc/hostname"
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r.X.S[0][0])), 64), name)
	r.X.Len[0] = int16(len(name) + 1)
	r.X.Len[3] = -14 // EFAULT
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), ValsSize)

	d := testDecoder()
	var ev bpfobj.TraceEvent
	ok, err := d.Decode(raw, &ev)
	require.NoError(t, err)
	require.True(t, ok)
	tx := &Text{Table: tbl}
	assert.Contains(t, string(tx.Append(nil, &ev)),
		`→ do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) {filename="/etc/hostname", how->flags=32768, how->mode=MODE_A, how->resolve=<fault>}`)
	j := decodeJSON(t, (&JSON{Table: tbl}).Append(nil, &ev))
	assert.Equal(t, map[string]any{"filename": "/etc/hostname", "how->flags": float64(32768), "how->mode": "MODE_A", "how->resolve": nil}, j["values"])
	assert.Equal(t, map[string]any{"how->resolve": "-EFAULT"}, j["value_errors"])

	// NULL string, truncated string.
	r.X.V[0], r.X.Len[0] = 0, 0
	ok, err = d.Decode(raw, &ev)
	require.True(t, ok)
	require.NoError(t, err)
	assert.Contains(t, string(tx.Append(nil, &ev)), "{filename=NULL,")
	r.X.V[0], r.X.Len[0] = 1, 64
	r.X.Flags[0] |= uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_TRUNCATED)
	long := strings.Repeat("x", 63)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r.X.S[0][0])), 64), long+"\x00")
	ok, err = d.Decode(raw, &ev)
	require.True(t, ok)
	require.NoError(t, err)
	assert.Contains(t, string(tx.Append(nil, &ev)), `{filename="`+long+`"…,`)

	// A wrong size is a malformed record.
	_, err = d.Decode(raw[:ValsSize-8], &ev)
	assert.ErrorContains(t, err, "record with values of 392 bytes, want 400")
}
