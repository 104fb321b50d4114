package rings

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// producer is a ringbuf and a raw_tracepoint program that writes its
// context's two u64 (a timestamp and a sequence number) to it as one
// 16-byte record, run with BPF_PROG_TEST_RUN.
type producer struct {
	m *ebpf.Map
	p *ebpf.Program
}

func newProducer(t *testing.T, size uint32) *producer {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: size})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.DWord), asm.StoreMem(asm.RFP, -16, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R1, 8, asm.DWord), asm.StoreMem(asm.RFP, -8, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -16),
		asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Imm(asm.R3, 16), asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(), asm.Return(),
	}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return &producer{m: m, p: p}
}

// put writes records (ts, seq) for each ts; it fails the test on a full ring.
func (pr *producer) put(t *testing.T, seq *uint64, ts ...uint64) {
	t.Helper()
	for _, v := range ts {
		*seq++
		ret, err := pr.p.Run(&ebpf.RunOptions{Context: []uint64{v, *seq}})
		require.NoError(t, err)
		require.Zero(t, ret, "bpf_ringbuf_output of record %d", *seq)
	}
}

func tsOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// readAll reads until the reader reports the deadline, returning the
// records' timestamps and sequence numbers.
func readAll(t *testing.T, r *Reader) (ts, seq []uint64) {
	t.Helper()
	var rec ringbuf.Record
	for {
		err := r.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return ts, seq
		}
		require.NoError(t, err)
		require.Len(t, rec.RawSample, 16)
		ts = append(ts, tsOf(rec.RawSample))
		seq = append(seq, binary.LittleEndian.Uint64(rec.RawSample[8:]))
	}
}

// TestMergeByTimestamp: two CPUs' rings come out as one stream in
// timestamp order once final, each ring's records in their own order.
func TestMergeByTimestamp(t *testing.T) {
	a, b := newProducer(t, 4096), newProducer(t, 4096)
	var seq uint64
	a.put(t, &seq, 10, 30, 50)
	b.put(t, &seq, 20, 40)
	r, err := NewReader([]Ring{{0, a.m}, {1, b.m}}, Options{Delay: time.Second, Timestamp: tsOf})
	require.NoError(t, err)
	defer r.Close()
	r.clock = func() uint64 { return 100 } // nothing is a second old
	r.SetDeadline(time.Now())
	ts, _ := readAll(t, r)
	assert.Empty(t, ts, "records younger than the delay wait")
	r.Final()
	ts, seq2 := readAll(t, r)
	assert.Equal(t, []uint64{10, 20, 30, 40, 50}, ts)
	assert.Equal(t, []uint64{1, 4, 2, 5, 3}, seq2)
}

// TestDelayReleasesOldRecords: a record leaves once the clock passes its
// timestamp plus the delay, the oldest first across the rings.
func TestDelayReleasesOldRecords(t *testing.T) {
	a, b := newProducer(t, 4096), newProducer(t, 4096)
	var seq uint64
	a.put(t, &seq, 1000, 1300)
	b.put(t, &seq, 1100, 1250)
	r, err := NewReader([]Ring{{0, a.m}, {3, b.m}}, Options{Delay: 100 * time.Nanosecond, Timestamp: tsOf})
	require.NoError(t, err)
	defer r.Close()
	now := uint64(1260)
	r.clock = func() uint64 { return now }
	r.SetDeadline(time.Now())
	ts, _ := readAll(t, r)
	assert.Equal(t, []uint64{1000, 1100}, ts, "due by 1260 with a 100 ns delay")
	now = 1360
	ts, _ = readAll(t, r)
	assert.Equal(t, []uint64{1250}, ts)
	now = 1400
	ts, _ = readAll(t, r)
	assert.Equal(t, []uint64{1300}, ts)
}

// TestUnorderedReadsRingByRing: without a delay records come as read,
// ring after ring, with no timestamp needed.
func TestUnorderedReadsRingByRing(t *testing.T) {
	a, b := newProducer(t, 4096), newProducer(t, 4096)
	var seq uint64
	a.put(t, &seq, 50, 10)
	b.put(t, &seq, 5)
	r, err := NewReader([]Ring{{0, a.m}, {1, b.m}}, Options{})
	require.NoError(t, err)
	defer r.Close()
	r.SetDeadline(time.Now())
	ts, s := readAll(t, r)
	assert.Equal(t, []uint64{50, 10, 5}, ts)
	assert.Equal(t, []uint64{1, 2, 3}, s)
}

// TestQueueBoundAndCompaction: a queue bound of a few records makes the
// reader go back to the ring many times and compact its arena; every
// record comes out once, in order.
func TestQueueBoundAndCompaction(t *testing.T) {
	const n = 3000
	a, b := newProducer(t, 1<<20), newProducer(t, 1<<20)
	var seq uint64
	for i := uint64(0); i < n; i++ {
		a.put(t, &seq, 2*i)
		b.put(t, &seq, 2*i+1)
	}
	r, err := NewReader([]Ring{{0, a.m}, {1, b.m}}, Options{Delay: time.Hour, Timestamp: tsOf, QueueBytes: 100})
	require.NoError(t, err)
	defer r.Close()
	r.Final()
	ts, _ := readAll(t, r)
	require.Len(t, ts, 2*n)
	for i, v := range ts {
		if v != uint64(i) {
			t.Fatalf("record %d has timestamp %d", i, v)
		}
	}
}

// TestNoRings: a reader of no rings (no records sent) waits until its
// deadline.
func TestNoRings(t *testing.T) {
	r, err := NewReader(nil, Options{})
	require.NoError(t, err)
	defer r.Close()
	r.SetDeadline(time.Now().Add(10 * time.Millisecond))
	var rec ringbuf.Record
	require.ErrorIs(t, r.ReadInto(&rec), os.ErrDeadlineExceeded)
	r.Final()
	require.ErrorIs(t, r.ReadInto(&rec), os.ErrDeadlineExceeded)
}

// TestWaitsForData: a reader with nothing due waits on the rings' epoll
// until its deadline, and reports it.
func TestWaitsForData(t *testing.T) {
	a := newProducer(t, 4096)
	r, err := NewReader([]Ring{{0, a.m}}, Options{Delay: time.Millisecond, Timestamp: tsOf})
	require.NoError(t, err)
	defer r.Close()
	start := time.Now()
	r.SetDeadline(start.Add(30 * time.Millisecond))
	var rec ringbuf.Record
	require.ErrorIs(t, r.ReadInto(&rec), os.ErrDeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

// TestBoundedQueueRefilledFirst: a CPU whose older records wait behind
// its queue's bound is read again before another CPU's newer record goes.
func TestBoundedQueueRefilledFirst(t *testing.T) {
	a, b := newProducer(t, 4096), newProducer(t, 4096)
	var seq uint64
	for i := uint64(0); i < 30; i++ {
		a.put(t, &seq, i)
	}
	b.put(t, &seq, 1000)
	r, err := NewReader([]Ring{{0, a.m}, {1, b.m}}, Options{Delay: time.Hour, Timestamp: tsOf, QueueBytes: 100})
	require.NoError(t, err)
	defer r.Close()
	r.Final()
	ts, _ := readAll(t, r)
	require.Len(t, ts, 31)
	assert.True(t, slices.IsSorted(ts), "%v", ts)
	assert.Equal(t, uint64(1000), ts[30])
}

func TestNewReaderBadInput(t *testing.T) {
	a := newProducer(t, 4096)
	_, err := NewReader([]Ring{{0, a.m}}, Options{Delay: time.Second})
	assert.EqualError(t, err, "rings: ordering needs the records' timestamps")
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("0-3,6,8-9\n")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 3, 6, 8, 9}, got)
	for _, bad := range []string{"", "a", "3-1", "1-", "-1"} {
		_, err := ParseCPUList(bad)
		assert.Error(t, err, bad)
	}
}
