package rings

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// testGeometry: 4 record elements of 256 bytes (and 64 of slack) per CPU.
func testGeometry(cpus ...int) Geometry {
	return Geometry{CPUs: cpus, Chunk: 256, Chunks: 4, ElemSize: 320}
}

// areasMap creates a BPF_F_MMAPABLE array laid out as g.
func areasMap(t testing.TB, g Geometry) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: uint32(g.ElemSize),
		MaxEntries: uint32(g.Slots() * g.Stride()), Flags: unix.BPF_F_MMAPABLE})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// producer writes records into one CPU's area of its own mapping of the
// areas map the way bpf/trace.bpf.c does: reserve at the head if the
// tail leaves room, write the record, store its length last.
type producer struct{ a area }

func newProducer(t testing.TB, m *ebpf.Map, g Geometry, cpu int) *producer {
	t.Helper()
	ps := os.Getpagesize()
	mem, err := unix.Mmap(m.FD(), 0, (g.Bytes()+ps-1)/ps*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(mem) })
	return &producer{a: newArea(mem, g, cpu)}
}

// try writes a 16-byte record (ts, seq); false when the area is full.
func (p *producer) try(ts, seq uint64) bool {
	h, tail := atomic.LoadUint64(p.a.head), atomic.LoadUint64(p.a.tail)
	const need = 8 + 16
	if h+need-tail > uint64(p.a.g.Chunk*p.a.g.Chunks) {
		return false
	}
	atomic.StoreUint64(p.a.head, h+need)
	at := p.a.at(h)
	binary.LittleEndian.PutUint64(p.a.mem[at+8:], ts)
	binary.LittleEndian.PutUint64(p.a.mem[at+16:], seq)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.a.mem[at])), 16)
	return true
}

// put writes records (ts, seq) for each ts; it fails the test on a full area.
func (p *producer) put(t *testing.T, seq *uint64, ts ...uint64) {
	t.Helper()
	for _, v := range ts {
		*seq++
		require.True(t, p.try(v, *seq), "record %d", *seq)
	}
}

// twoCPUs is an areas map for CPUs 0 and cpu1 with a producer on each.
func twoCPUs(t *testing.T, cpu1 int) (*ebpf.Map, Geometry, *producer, *producer) {
	g := testGeometry(0, cpu1)
	m := areasMap(t, g)
	return m, g, newProducer(t, m, g, 0), newProducer(t, m, g, cpu1)
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
	m, g, a, b := twoCPUs(t, 1)
	var seq uint64
	a.put(t, &seq, 10, 30, 50)
	b.put(t, &seq, 20, 40)
	r, err := NewReader(m, g, Options{Delay: time.Second, Timestamp: tsOf})
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
	m, g, a, b := twoCPUs(t, 3)
	var seq uint64
	a.put(t, &seq, 1000, 1300)
	b.put(t, &seq, 1100, 1250)
	r, err := NewReader(m, g, Options{Delay: 100 * time.Nanosecond, Timestamp: tsOf})
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

// manyCPUs is an areas map for n CPUs (ids 0, 2, 4, ...: not dense)
// with a producer on each.
func manyCPUs(t testing.TB, n int) (*ebpf.Map, Geometry, []*producer) {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 2 * i
	}
	g := testGeometry(ids...)
	m := areasMap(t, g)
	ps := make([]*producer, n)
	for i, id := range ids {
		ps[i] = newProducer(t, m, g, id)
	}
	return m, g, ps
}

// TestMergeManyCPUs: 16 CPUs' records, each CPU's timestamps rising by
// its own steps, come out as one stream in timestamp order, each CPU's in
// its own order, none lost or doubled.
func TestMergeManyCPUs(t *testing.T) {
	m, g, ps := manyCPUs(t, 16)
	var want []uint64
	for i, p := range ps {
		ts := uint64(i)
		for k := range 20 {
			ts += uint64(1 + (i*7+k*13)%50)
			// seq: CPU in the high bits, the CPU's count below.
			require.True(t, p.try(ts, uint64(i)<<32|uint64(k)))
			want = append(want, ts)
		}
	}
	slices.Sort(want)
	r, err := NewReader(m, g, Options{Delay: time.Second, Timestamp: tsOf})
	require.NoError(t, err)
	defer r.Close()
	r.Final()
	ts, seq := readAll(t, r)
	assert.Equal(t, want, ts, "one stream in timestamp order")
	last := map[uint64]int64{}
	for _, s := range seq {
		cpu, k := s>>32, int64(s&0xffffffff)
		prev, seen := last[cpu]
		assert.True(t, !seen && k == 0 || seen && k == prev+1, "CPU %d's record %d after %d", cpu, k, prev)
		last[cpu] = k
	}
	assert.Len(t, last, 16)
}

// BenchmarkMerge: the reader's cost per record merging 64 CPUs' records
// in timestamp order (40 records per CPU per round).
func BenchmarkMerge(b *testing.B) {
	m, g, ps := manyCPUs(b, 64)
	r, err := NewReader(m, g, Options{Delay: time.Second, Timestamp: tsOf})
	require.NoError(b, err)
	defer r.Close()
	r.Final()
	var rec ringbuf.Record
	ts := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		for k := range 40 {
			for i, p := range ps {
				ts++
				if !p.try(ts, uint64(i)<<32|uint64(k)) {
					b.Fatal("area full")
				}
			}
		}
		n := 0
		for r.ReadInto(&rec) == nil {
			n++
		}
		if n != 40*len(ps) {
			b.Fatalf("read %d records, want %d", n, 40*len(ps))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*40*len(ps)), "ns/record")
}

// TestUnorderedReadsRingByRing: without a delay records come as read,
// ring after ring, with no timestamp needed.
func TestUnorderedReadsRingByRing(t *testing.T) {
	m, g, a, b := twoCPUs(t, 1)
	var seq uint64
	a.put(t, &seq, 50, 10)
	b.put(t, &seq, 5)
	r, err := NewReader(m, g, Options{})
	require.NoError(t, err)
	defer r.Close()
	r.SetDeadline(time.Now())
	ts, s := readAll(t, r)
	assert.Equal(t, []uint64{50, 10, 5}, ts)
	assert.Equal(t, []uint64{1, 2, 3}, s)
}

// TestAreaWrapsAndFills: 3,000 records per CPU through areas of 1 KiB
// (42 records) read with a queue bound of a few records: the producers
// find the area full until the reader gives space back, the positions
// wrap around the elements many times, the queues compact, and every
// record comes out once, in timestamp order.
func TestAreaWrapsAndFills(t *testing.T) {
	const n = 3000
	m, g, a, b := twoCPUs(t, 1)
	r, err := NewReader(m, g, Options{Delay: time.Hour, Timestamp: tsOf, QueueBytes: 100})
	require.NoError(t, err)
	defer r.Close()
	r.Final()
	var got []uint64
	var rec ringbuf.Record
	full := 0
	for i := uint64(0); i < 2*n; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		for !p.try(i, 0) {
			full++
			// Read a few: Final delivers what is there.
			for j := 0; j < 10; j++ {
				if err := r.ReadInto(&rec); err != nil {
					require.ErrorIs(t, err, os.ErrDeadlineExceeded)
					break
				}
				got = append(got, tsOf(rec.RawSample))
			}
		}
	}
	ts, _ := readAll(t, r)
	got = append(got, ts...)
	assert.Greater(t, full, 100, "the producers found the area full")
	require.Len(t, got, 2*n)
	// Records taken while the producers waited are in order within what
	// was there; all of them, sorted, are 0..2n-1 once each.
	slices.Sort(got)
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("record %d has timestamp %d", i, v)
		}
	}
}

// TestNoCPUs: a reader of no CPU's records (none sent) waits until its
// deadline.
func TestNoCPUs(t *testing.T) {
	r, err := NewReader(nil, Geometry{}, Options{})
	require.NoError(t, err)
	defer r.Close()
	r.SetDeadline(time.Now().Add(10 * time.Millisecond))
	var rec ringbuf.Record
	require.ErrorIs(t, r.ReadInto(&rec), os.ErrDeadlineExceeded)
	r.Final()
	require.ErrorIs(t, r.ReadInto(&rec), os.ErrDeadlineExceeded)
}

// TestWaitsForData: a reader with nothing due sleeps until its deadline,
// and reports it.
func TestWaitsForData(t *testing.T) {
	g := testGeometry(0)
	r, err := NewReader(areasMap(t, g), g, Options{Delay: time.Millisecond, Timestamp: tsOf})
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
	m, g, a, b := twoCPUs(t, 1)
	var seq uint64
	for i := uint64(0); i < 30; i++ {
		a.put(t, &seq, i)
	}
	b.put(t, &seq, 1000)
	r, err := NewReader(m, g, Options{Delay: time.Hour, Timestamp: tsOf, QueueBytes: 100})
	require.NoError(t, err)
	defer r.Close()
	r.Final()
	ts, _ := readAll(t, r)
	require.Len(t, ts, 31)
	assert.True(t, slices.IsSorted(ts), "%v", ts)
	assert.Equal(t, uint64(1000), ts[30])
}

// TestCloseWhileReading: Close from another goroutine ends a ReadInto
// waiting on a far deadline with os.ErrClosed, before it unmaps the areas;
// later calls say closed too.
func TestCloseWhileReading(t *testing.T) {
	g := testGeometry(0, 1)
	r, err := NewReader(areasMap(t, g), g, Options{Delay: time.Millisecond, Timestamp: tsOf, Poll: time.Hour})
	require.NoError(t, err)
	r.SetDeadline(time.Now().Add(time.Hour))
	got := make(chan error, 1)
	go func() {
		var rec ringbuf.Record
		got <- r.ReadInto(&rec)
	}()
	time.Sleep(20 * time.Millisecond) // let it wait
	require.NoError(t, r.Close())
	select {
	case err := <-got:
		assert.ErrorIs(t, err, os.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("ReadInto still waiting after Close")
	}
	var rec ringbuf.Record
	assert.ErrorIs(t, r.ReadInto(&rec), os.ErrClosed)
	assert.NoError(t, r.Close())
}

func TestNewReaderBadInput(t *testing.T) {
	g := testGeometry(0)
	_, err := NewReader(areasMap(t, g), g, Options{Delay: time.Second})
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
