package rings

import (
	"errors"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// queue holds one CPU's records copied out of its ring, in ring order.
type queue struct {
	cpu   int
	rd    *ringbuf.Reader
	arena []byte // the records, back to back from off[hd]
	recs  []span // queued records; recs[hd:] are unread
	hd    int
	more  bool // the last fill stopped at the queue's bound
	rec   ringbuf.Record
}

// span is one record in a queue's arena.
type span struct {
	start, end int
	ts         uint64
}

// maxRecord is the room kept free in an arena for the next record: the
// largest record ftprobe's programs write is well under it.
const maxRecord = 64 << 10

func (q *queue) len() int { return len(q.recs) - q.hd }

func (q *queue) headTS() uint64 { return q.recs[q.hd].ts }

// pop removes the head record and returns it (valid until the next fill).
func (q *queue) pop() []byte {
	s := q.recs[q.hd]
	q.hd++
	return q.arena[s.start:s.end]
}

// fill reads the ring's committed records into the queue until the ring
// is empty or the queue holds o.QueueBytes; it returns how many it read.
func (q *queue) fill(o Options) (int, error) {
	if q.rd.AvailableBytes() == 0 {
		return 0, nil
	}
	q.compact()
	n := 0
	q.more = false
	for {
		if q.bytes() >= o.QueueBytes {
			q.more = true
			break
		}
		if cap(q.arena)-len(q.arena) < maxRecord {
			q.grow()
		}
		end := len(q.arena)
		q.rec.RawSample = q.arena[end:end:cap(q.arena)]
		q.rd.SetDeadline(time.Unix(1, 0)) // in the past: never block
		if err := q.rd.ReadInto(&q.rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return n, err
		}
		b := q.rec.RawSample
		if len(b) > 0 && unsafe.SliceData(b) != unsafe.SliceData(q.arena[end:cap(q.arena)]) {
			q.arena = append(q.arena, b...) // larger than the room kept free
		} else {
			q.arena = q.arena[:end+len(b)]
		}
		var ts uint64
		if o.Timestamp != nil {
			ts = o.Timestamp(b)
		}
		q.recs = append(q.recs, span{end, len(q.arena), ts})
		n++
		if q.rec.Remaining == 0 {
			break
		}
	}
	return n, nil
}

// bytes is the size of the unread records.
func (q *queue) bytes() int {
	if q.len() == 0 {
		return 0
	}
	return len(q.arena) - q.recs[q.hd].start
}

// compact moves the unread records to the front of the arena once the
// read ones take half of it.
func (q *queue) compact() {
	if q.len() == 0 {
		q.arena, q.recs, q.hd = q.arena[:0], q.recs[:0], 0
		return
	}
	off := q.recs[q.hd].start
	if off < len(q.arena)/2 {
		return
	}
	copy(q.arena, q.arena[off:])
	q.arena = q.arena[:len(q.arena)-off]
	n := copy(q.recs, q.recs[q.hd:])
	q.recs, q.hd = q.recs[:n], 0
	for i := range q.recs {
		q.recs[i].start -= off
		q.recs[i].end -= off
	}
}

// grow doubles the arena (at least maxRecord free).
func (q *queue) grow() {
	b := make([]byte, len(q.arena), max(2*cap(q.arena), len(q.arena)+maxRecord, 4*maxRecord))
	copy(b, q.arena)
	q.arena = b
}
