// Package rings reads the records ftprobe's trace programs write in place
// into the memory of each CPU (the areas map of bpf/trace.bpf.c, a
// BPF_F_MMAPABLE array mapped here) and merges them into one stream: in
// timestamp order, each record held at most a bounded delay after its
// timestamp (Options.Delay), or as they come (counting readers).
//
// Each CPU's programs reserve space with a compare-and-swap on that CPU's
// head and publish a record by storing its length last; the reader
// copies records out, zeroes them and advances the CPU's tail. CPUs never
// share a lock, and no record costs a helper call. Records are copied
// into a per-CPU queue as soon as they are seen, so the space is given back
// early, up to a bound per queue (QueueBytes); a record leaves its queue
// when it is the oldest of all queues' heads and its timestamp is older
// than the reader's clock minus the delay, or when the reader drains
// (Final).
package rings

import (
	"container/heap"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Options configure a Reader.
type Options struct {
	// Delay is how long after its timestamp a record waits for older
	// ones from other CPUs (0: no ordering, each CPU's records in their order, CPU
	// after CPU). A record committed later than Delay after its
	// timestamp (its producer preempted between the two) comes out of
	// order, never lost.
	Delay time.Duration
	// Timestamp returns a record's timestamp on CLOCK_MONOTONIC
	// (bpf_ktime_get_ns); needed with Delay.
	Timestamp func(rec []byte) uint64
	// QueueBytes bounds the bytes held per CPU (default DefaultQueueBytes):
	// beyond it, records wait in the CPU's area.
	QueueBytes int
	// Poll is how often the reader looks at the areas when nothing is
	// due (default DefaultPoll): the programs never wake it.
	Poll time.Duration
}

// DefaultDelay is the delay trace uses: twice DefaultPoll, so that a
// record committed on an idle CPU just after the reader looked is read
// before the records of the other CPUs that are younger than it go.
const DefaultDelay = 20 * time.Millisecond

// DefaultQueueBytes is the default bound of a CPU's queue.
const DefaultQueueBytes = 1 << 20

// DefaultPoll is the default interval between looks at idle areas.
const DefaultPoll = 10 * time.Millisecond

// Reader reads the records of several CPUs as one stream. One goroutine
// reads at a time; Close may be called from another, and makes a
// ReadInto in progress return os.ErrClosed. The caller must Close it.
type Reader struct {
	mu       sync.Mutex // held by ReadInto and by Close while it unmaps
	done     chan struct{}
	closed   atomic.Bool
	o        Options
	mem      []byte // the mapped areas map
	qs       []*queue
	heads    heads // the queues holding records, oldest head first
	deadline time.Time
	final    bool
	refill   *queue // emptied with records left behind its bound
	now      uint64 // CLOCK_MONOTONIC at the last look, ns
	// clock returns CLOCK_MONOTONIC in ns (replaced in tests).
	clock func() uint64
}

// NewReader maps m, the areas map laid out as g, and reads the records of
// g's CPUs (none: the reader only waits, for a trace that sends no
// records).
func NewReader(m *ebpf.Map, g Geometry, o Options) (*Reader, error) {
	if o.Delay > 0 && o.Timestamp == nil {
		return nil, errors.New("rings: ordering needs the records' timestamps")
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	r := &Reader{o: o, clock: monotonic, done: make(chan struct{})}
	if len(g.CPUs) == 0 {
		return r, nil
	}
	ps := os.Getpagesize()
	size := (g.Bytes() + ps - 1) / ps * ps
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("rings: mmap the records of %d CPUs (%d bytes): %w", len(g.CPUs), size, err)
	}
	r.mem = mem
	for _, cpu := range g.CPUs {
		r.qs = append(r.qs, &queue{area: newArea(mem, g, cpu)})
	}
	return r, nil
}

// SetDeadline makes ReadInto return os.ErrDeadlineExceeded when no record
// is due by t.
func (r *Reader) SetDeadline(t time.Time) { r.deadline = t }

// Final makes every record due at once: ReadInto then returns the records
// left in the areas and queues, in timestamp order, and
// os.ErrDeadlineExceeded when none is left (after the producers stopped).
func (r *Reader) Final() { r.final = true }

// ReadInto puts the next record into rec. rec.RawSample stays valid until
// the next call (it points into the reader's queue). It returns
// os.ErrDeadlineExceeded when nothing was due by the deadline (after
// Final: when nothing is left), os.ErrClosed once the reader is closed.
func (r *Reader) ReadInto(rec *ringbuf.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return os.ErrClosed
	}
	// A queue emptied while records waited behind its bound is refilled
	// before any other CPU's record is chosen: its next ones may be older.
	if q := r.refill; q != nil {
		r.refill = nil
		r.fillQueue(q)
	}
	for {
		if q := r.due(); q != nil {
			rec.RawSample = q.pop()
			rec.Remaining = 0
			if q.len() > 0 {
				heap.Fix(&r.heads, q.at)
			} else {
				heap.Remove(&r.heads, q.at)
				if q.more {
					r.refill = q
				}
			}
			return nil
		}
		if r.fill() {
			continue
		}
		if r.final {
			if r.empty() {
				return os.ErrDeadlineExceeded
			}
			continue
		}
		if err := r.wait(); err != nil {
			return err
		}
		if r.closed.Load() {
			return os.ErrClosed
		}
	}
}

// due returns the queue whose head is the next record to deliver, or nil:
// the oldest head (without Delay any queue's), once the clock is Delay
// past it.
func (r *Reader) due() *queue {
	if len(r.heads) == 0 {
		return nil
	}
	best := r.heads[0]
	if r.o.Delay <= 0 || r.final {
		return best
	}
	due := best.headTS() + uint64(r.o.Delay)
	if due > r.now {
		r.now = r.clock()
		if due > r.now {
			return nil
		}
	}
	return best
}

// fill copies the committed records of every CPU into its queue, up to
// the queue's bound; it reports whether it copied any.
func (r *Reader) fill() bool {
	read := false
	for _, q := range r.qs {
		read = r.fillQueue(q) > 0 || read
	}
	r.now = r.clock()
	return read
}

// fillQueue fills q from its area and puts it among the heads if it was
// empty; it returns how many records it copied.
func (r *Reader) fillQueue(q *queue) int {
	was := q.len()
	n := q.fill(r.o)
	if was == 0 && n > 0 {
		heap.Push(&r.heads, q)
	}
	return n
}

// empty reports whether every queue and area is empty.
func (r *Reader) empty() bool {
	for _, q := range r.qs {
		if q.len() > 0 || q.area.pending(q.pos) {
			return false
		}
	}
	return true
}

// wait sleeps until the oldest queued record is due, the next look at
// the areas (Poll) or the deadline; past the deadline it returns
// os.ErrDeadlineExceeded.
func (r *Reader) wait() error {
	now := time.Now()
	if !r.deadline.IsZero() && !now.Before(r.deadline) {
		return os.ErrDeadlineExceeded
	}
	until := now.Add(r.o.Poll)
	if !r.deadline.IsZero() && r.deadline.Before(until) {
		until = r.deadline
	}
	if d, ok := r.untilDue(); ok && now.Add(d).Before(until) {
		until = now.Add(d)
	}
	t := time.NewTimer(until.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.done:
	}
	return nil
}

// untilDue is the time until the oldest queued record is due, if any.
func (r *Reader) untilDue() (time.Duration, bool) {
	if r.o.Delay <= 0 || len(r.heads) == 0 {
		return 0, false
	}
	due := r.heads[0].headTS() + uint64(r.o.Delay)
	if due <= r.now {
		return 0, true
	}
	return time.Duration(due - r.now), true
}

// Close ends a ReadInto in progress (os.ErrClosed), waits for it and
// unmaps the areas. Closing twice does nothing.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	close(r.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.qs, r.heads = nil, nil, nil
	return err
}

// monotonic is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
