// Package rings reads records from one BPF ringbuf per CPU and merges them
// into one stream: in timestamp order, each record held at most a bounded
// delay after its timestamp (Ordered), or as they come (counting readers).
//
// One ringbuf per CPU keeps producers on different CPUs off each other's
// ringbuf lock (kernel/bpf/ringbuf.c __bpf_ringbuf_reserve takes the ring's
// spinlock for every record). Records are copied out of each ring into a
// per-CPU queue as soon as they are seen, so the kernel's space is freed
// early, up to a bound per queue (QueueBytes); a record leaves its queue
// when it is the oldest of all queues' heads and its timestamp is older
// than the reader's clock minus the delay, or when the reader drains
// (Final).
package rings

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Ring is the ringbuf of one CPU.
type Ring struct {
	CPU int
	Map *ebpf.Map // BPF_MAP_TYPE_RINGBUF
}

// Options configure a Reader.
type Options struct {
	// Delay is how long after its timestamp a record waits for older
	// ones from other CPUs (0: no ordering, records in ring order, CPU
	// after CPU). A record committed later than Delay after its
	// timestamp (its producer preempted between the two) comes out of
	// order, never lost.
	Delay time.Duration
	// Timestamp returns a record's timestamp on CLOCK_MONOTONIC
	// (bpf_ktime_get_ns); needed with Delay.
	Timestamp func(rec []byte) uint64
	// QueueBytes bounds the bytes held per CPU (default DefaultQueueBytes):
	// beyond it, records wait in the kernel's ring.
	QueueBytes int
}

// DefaultDelay is the delay trace uses: ten times the longest a record was
// seen to take from its timestamp to its commit under emulation (TCG).
const DefaultDelay = 20 * time.Millisecond

// DefaultQueueBytes is the default bound of a CPU's queue.
const DefaultQueueBytes = 1 << 20

// Reader reads the rings of several CPUs as one stream of records. It is
// not safe for concurrent use; the caller must Close it.
type Reader struct {
	o        Options
	qs       []*queue
	epfd     int
	evs      []unix.EpollEvent
	deadline time.Time
	final    bool
	refill   *queue // emptied with records left behind its bound
	now      uint64 // CLOCK_MONOTONIC at the last look, ns
	// clock returns CLOCK_MONOTONIC in ns (replaced in tests).
	clock func() uint64
}

// NewReader opens a Reader on rs (none: the reader only waits, for a
// trace that sends no records).
func NewReader(rs []Ring, o Options) (_ *Reader, err error) {
	if o.Delay > 0 && o.Timestamp == nil {
		return nil, errors.New("rings: ordering needs the records' timestamps")
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	r := &Reader{o: o, epfd: -1, clock: monotonic}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("rings: epoll_create1: %w", err)
	}
	for i, ring := range rs {
		rd, err := ringbuf.NewReader(ring.Map)
		if err != nil {
			return nil, fmt.Errorf("rings: reader of CPU %d's ringbuf: %w", ring.CPU, err)
		}
		r.qs = append(r.qs, &queue{cpu: ring.CPU, rd: rd})
		// Edge-triggered: a ring whose queue is full keeps its unread
		// records without waking the reader again and again.
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(i)}
		if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, ring.Map.FD(), &ev); err != nil {
			return nil, fmt.Errorf("rings: epoll_ctl on CPU %d's ringbuf: %w", ring.CPU, err)
		}
	}
	r.evs = make([]unix.EpollEvent, max(len(rs), 1))
	return r, nil
}

// SetDeadline makes ReadInto return os.ErrDeadlineExceeded when no record
// is due by t.
func (r *Reader) SetDeadline(t time.Time) { r.deadline = t }

// Final makes every record due at once: ReadInto then returns the records
// left in the rings and queues, in timestamp order, and
// os.ErrDeadlineExceeded when none is left (after the producers stopped).
func (r *Reader) Final() { r.final = true }

// ReadInto puts the next record into rec. rec.RawSample stays valid until
// the next call (it points into the reader's queue). It returns
// os.ErrDeadlineExceeded when nothing was due by the deadline, or an
// error of a ring's reader.
func (r *Reader) ReadInto(rec *ringbuf.Record) error {
	// A queue emptied while records waited behind its bound is refilled
	// before any other CPU's record is chosen: its next ones may be older.
	if q := r.refill; q != nil {
		r.refill = nil
		if _, err := q.fill(r.o); err != nil {
			return err
		}
	}
	for {
		if q := r.due(); q != nil {
			rec.RawSample = q.pop()
			rec.Remaining = 0
			if q.len() == 0 && q.more {
				r.refill = q
			}
			return nil
		}
		read, err := r.fill()
		if err != nil {
			return err
		}
		if read {
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
	}
}

// due returns the queue whose head is the next record to deliver, or nil.
func (r *Reader) due() *queue {
	var best *queue
	var bestTS uint64
	for _, q := range r.qs {
		if q.len() == 0 {
			continue
		}
		if r.o.Delay <= 0 {
			return q
		}
		if ts := q.headTS(); best == nil || ts < bestTS {
			best, bestTS = q, ts
		}
	}
	if best == nil || r.final {
		return best
	}
	delay := uint64(r.o.Delay)
	if bestTS+delay > r.now {
		r.now = r.clock()
		if bestTS+delay > r.now {
			return nil
		}
	}
	return best
}

// fill copies the committed records of every ring into its queue, up to
// the queue's bound; it reports whether it read any.
func (r *Reader) fill() (bool, error) {
	read := false
	for _, q := range r.qs {
		n, err := q.fill(r.o)
		if err != nil {
			return read, fmt.Errorf("rings: CPU %d's ringbuf: %w", q.cpu, err)
		}
		read = read || n > 0
	}
	r.now = r.clock()
	return read, nil
}

// empty reports whether every queue and ring is empty.
func (r *Reader) empty() bool {
	for _, q := range r.qs {
		if q.len() > 0 || q.rd.AvailableBytes() > 0 {
			return false
		}
	}
	return true
}

// wait sleeps until a ring signals data, the oldest queued record is due,
// or the deadline; past the deadline it returns os.ErrDeadlineExceeded.
func (r *Reader) wait() error {
	now := time.Now()
	if !r.deadline.IsZero() && !now.Before(r.deadline) {
		return os.ErrDeadlineExceeded
	}
	until := r.deadline
	if d, ok := r.untilDue(); ok {
		if t := now.Add(d); until.IsZero() || t.Before(until) {
			until = t
		}
	}
	ms := -1
	if !until.IsZero() {
		ms = int((until.Sub(now) + time.Millisecond - 1) / time.Millisecond)
	}
	if _, err := unix.EpollWait(r.epfd, r.evs, ms); err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("rings: epoll_wait: %w", err)
	}
	return nil
}

// untilDue is the time until the oldest queued record is due, if any.
func (r *Reader) untilDue() (time.Duration, bool) {
	if r.o.Delay <= 0 {
		return 0, false
	}
	var oldest uint64
	found := false
	for _, q := range r.qs {
		if q.len() > 0 && (!found || q.headTS() < oldest) {
			oldest, found = q.headTS(), true
		}
	}
	if !found {
		return 0, false
	}
	due := oldest + uint64(r.o.Delay)
	if due <= r.now {
		return 0, true
	}
	return time.Duration(due - r.now), true
}

// Close closes every ring's reader.
func (r *Reader) Close() error {
	var errs []error
	for _, q := range r.qs {
		errs = append(errs, q.rd.Close())
	}
	if r.epfd >= 0 {
		errs = append(errs, unix.Close(r.epfd))
		r.epfd = -1
	}
	return errors.Join(errs...)
}

// monotonic is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
