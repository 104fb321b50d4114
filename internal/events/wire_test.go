package events

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// encode writes e as the kernel would (bpf/trace.bpf.c): a full record
// when it carries --strings/--stack, else a compact one (header, then
// arguments on entries, duration and return value on exits).
func encode(e *bpfobj.TraceEvent) []byte {
	h := bpfobj.TraceRecHdr{TsNs: e.TsNs, Tgid: e.Tgid, Tid: e.Tid, FuncId: e.FuncId, Depth: e.Depth,
		Cpu: uint16(e.Cpu), Kind: e.Kind, Mode: e.Mode, Flags: e.Flags, Nargs: e.Nargs}
	if e.Flags&(FlagStrings|FlagStack) != 0 {
		r := bpfobj.TraceRecFull{H: h, DurationNs: e.DurationNs, Ret: e.Ret, Args: e.Args, Comm: e.Comm,
			StrLen: e.StrLen, StrArg: e.StrArg, StrFlags: e.StrFlags, StackLen: e.StackLen, Str: e.Str, Kstack: e.Kstack}
		r.H.Flags |= FlagFull
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), FullSize)...)
	}
	b := append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&h)), HeaderSize)...)
	u64 := func(v uint64) { b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 8)...) }
	if e.Kind == KindExit {
		u64(e.DurationNs)
		u64(uint64(e.Ret))
		if e.Flags&FlagHasArgs == 0 {
			return b
		}
	}
	for i := 0; i < int(e.Nargs); i++ {
		u64(e.Args[i])
	}
	return b
}

// commRecord is the kernel's comm record for e's thread.
func commRecord(e *bpfobj.TraceEvent) []byte {
	h := bpfobj.TraceRecHdr{TsNs: e.TsNs, Tgid: e.Tgid, Tid: e.Tid, Kind: KindComm}
	b := append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&h)), HeaderSize)...)
	return append(b, unsafe.Slice((*byte)(unsafe.Pointer(&e.Comm[0])), 16)...)
}

// testDecoder knows the comm of sample()'s thread.
func testDecoder() *Decoder {
	var d Decoder
	e := sample(KindEntry, 0, 0)
	var ev bpfobj.TraceEvent
	d.Decode(commRecord(&e), &ev)
	return &d
}

func TestWireSizes(t *testing.T) {
	assert.Equal(t, 32, HeaderSize, "struct rec_hdr")
	assert.Equal(t, 32+16+48+16+16+2*128+32*8, FullSize, "struct rec_full")
}

// TestDecodeCompact: an entry carries only its nargs arguments, an exit
// only its duration and return value; comm comes from the thread's comm
// record, and a comm record is not an event.
func TestDecodeCompact(t *testing.T) {
	var d Decoder
	en := sample(KindEntry, 0, 2)
	en.Nargs = 3
	en.Args = [6]uint64{1, 2, 3}
	var out bpfobj.TraceEvent
	isEv, err := d.Decode(commRecord(&en), &out)
	require.NoError(t, err)
	assert.False(t, isEv)
	assert.Len(t, encode(&en), 32+3*8)
	isEv, err = d.Decode(encode(&en), &out)
	require.NoError(t, err)
	assert.True(t, isEv)
	assert.Equal(t, en, out)
	assert.Equal(t, "workload", Comm(&out))

	ex := sample(KindExit, 0, 2)
	ex.Flags, ex.Nargs, ex.Args = 0, 0, [6]uint64{}
	assert.Len(t, encode(&ex), 32+16)
	_, err = d.Decode(encode(&ex), &out)
	require.NoError(t, err)
	// The exit gets its entry's arguments from the decoder (same thread,
	// depth and function), as if the kernel had sent them.
	paired := ex
	paired.Flags, paired.Nargs, paired.Args = FlagHasArgs, 3, [6]uint64{1, 2, 3}
	assert.Equal(t, paired, out)
	// A second exit at that depth has no entry left to pair with.
	_, err = d.Decode(encode(&ex), &out)
	require.NoError(t, err)
	assert.Equal(t, ex, out)

	// A deferred exit carries the entry's arguments.
	dx := sample(KindExit, 0, 0)
	dx.Flags |= FlagDeferred
	_, err = d.Decode(encode(&dx), &out)
	require.NoError(t, err)
	assert.Equal(t, dx, out)

	// Another thread without a comm record: empty comm, not a stale one.
	other := sample(KindEntry, 0, 0)
	other.Tid = 999
	other.Comm = [16]int8{}
	_, err = d.Decode(encode(&other), &out)
	require.NoError(t, err)
	assert.Equal(t, "", Comm(&out))

	// After a new comm record (exec), the thread's events carry the new comm.
	renamed := sample(KindEntry, 0, 0)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&renamed.Comm[0])), 16), "newname\x00\x00")
	d.Decode(commRecord(&renamed), &out)
	_, err = d.Decode(encode(&en), &out)
	require.NoError(t, err)
	assert.Equal(t, "newname", Comm(&out))
	assert.EqualValues(t, 2, d.Comms)

	for _, bad := range [][]byte{make([]byte, 10), encode(&en)[:40], append(encode(&ex), 0)} {
		_, err := d.Decode(bad, &out)
		assert.Error(t, err, "%d bytes", len(bad))
	}
}

// TestDecodeFull: a full record decodes with its tail and comm; a
// compact record after it does not show the stale tail.
func TestDecodeFull(t *testing.T) {
	d := testDecoder()
	in := sample(KindEntry, 0, 0)
	setStr(&in, 0, 1, "/etc/hostname", 14, StrUser)
	var out bpfobj.TraceEvent
	_, err := d.Decode(encode(&in), &out)
	require.NoError(t, err)
	in.Flags |= FlagFull
	assert.Equal(t, in, out)
	plain := sample(KindEntry, 0, 0)
	_, err = d.Decode(encode(&plain), &out)
	require.NoError(t, err)
	assert.Equal(t, uint8(FlagHasArgs), out.Flags, "compact: no tail flags")
	assert.Contains(t, string((&Text{Table: table}).Append(nil, &out)), "filename=0xffffe2a627bc", "the stale tail is not shown")
}

// TestDecodeCall: a call record (a leaf call's entry and exit in one,
// attach.Options.LiveEntries unset) decodes into the entry, at the exit's
// time minus the duration with the arguments, and then (Next) the exit,
// paired with those arguments, as two compact records would.
func TestDecodeCall(t *testing.T) {
	d := testDecoder()
	ex := sample(KindExit, 1, 2) // ends at 1_003_066_000 ns after 3,066,000 ns
	ex.Nargs, ex.Args, ex.Ret = 2, [6]uint64{0xffff000012345678, 4096}, -2
	rec := encode(&ex) // header, duration, ret, the two arguments
	require.Len(t, rec, 32+16+2*8)
	rec[unsafe.Offsetof(bpfobj.TraceRecHdr{}.Kind)] = KindCall

	var out bpfobj.TraceEvent
	isEv, err := d.Decode(rec, &out)
	require.NoError(t, err)
	require.True(t, isEv)
	assert.Equal(t, KindEntry, out.Kind)
	assert.Equal(t, ex.TsNs-3066000, out.TsNs)
	assert.Equal(t, uint8(2), out.Nargs)
	assert.Equal(t, [6]uint64{0xffff000012345678, 4096}, out.Args)
	assert.Equal(t, uint16(2), out.Depth)
	assert.Equal(t, "workload", Comm(&out))

	require.True(t, d.Next(&out))
	assert.Equal(t, KindExit, out.Kind)
	assert.Equal(t, ex.TsNs, out.TsNs)
	assert.Equal(t, uint64(3066000), out.DurationNs)
	assert.Equal(t, int64(-2), out.Ret)
	assert.Equal(t, FlagHasArgs, out.Flags&FlagHasArgs)
	assert.Equal(t, [6]uint64{0xffff000012345678, 4096}, out.Args)
	assert.Equal(t, "workload", Comm(&out))
	assert.False(t, d.Next(&out), "once")

	// An exit record after it gives no second exit.
	_, err = d.Decode(encode(&ex), &out)
	require.NoError(t, err)
	assert.False(t, d.Next(&out))

	for _, bad := range [][]byte{rec[:50], append(rec, 0)} {
		_, err := d.Decode(bad, &out)
		assert.Error(t, err, "%d bytes", len(bad))
	}
	long := append([]byte(nil), rec...)
	*(*uint64)(unsafe.Pointer(&long[32])) = ex.TsNs + 1
	_, err = d.Decode(long, &out)
	assert.EqualError(t, err, "call record of 1003066001 ns that ended at 1003066000 ns")
}

// BenchmarkDecodeTextCalls: the records of one ksys_read -> vfs_read call
// as the kernel sends them by default (leaf_records): the outer entry,
// the inner call's call record, the outer exit; 4 events from 3 records,
// decoded and formatted as text.
func BenchmarkDecodeTextCalls(b *testing.B) {
	call := sample(KindExit, 1, 1)
	call.Nargs = 2
	rec := encode(&call)
	rec[unsafe.Offsetof(bpfobj.TraceRecHdr{}.Kind)] = KindCall
	outerEx := sample(KindExit, 0, 0)
	outerEx.Flags, outerEx.Nargs = 0, 0
	outerEn := sample(KindEntry, 0, 0)
	recs := [][]byte{encode(&outerEn), rec, encode(&outerEx)}
	tx := &Text{Table: table}
	var ev bpfobj.TraceEvent
	dec := testDecoder()
	buf := make([]byte, 0, 256)
	events := 0
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := dec.Decode(recs[i%3], &ev); err != nil {
			b.Fatal(err)
		}
		buf = tx.Append(buf[:0], &ev)
		events++
		if dec.Next(&ev) {
			buf = tx.Append(buf[:0], &ev)
			events++
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}
