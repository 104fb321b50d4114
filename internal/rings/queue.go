package rings

// queue holds one CPU's records copied out of its area, in their order.
type queue struct {
	area  area
	pos   uint64 // the area's next record
	arena []byte // the records, back to back from recs[hd].start
	recs  []span // queued records; recs[hd:] are unread
	hd    int
	more  bool // the last fill stopped at the queue's bound
	at    int  // index among the reader's heads while it holds records
}

// span is one record in a queue's arena.
type span struct {
	start, end int
	ts         uint64
}

func (q *queue) len() int { return len(q.recs) - q.hd }

func (q *queue) headTS() uint64 { return q.recs[q.hd].ts }

// pop removes the head record and returns it (valid until the next fill).
func (q *queue) pop() []byte {
	s := q.recs[q.hd]
	q.hd++
	return q.arena[s.start:s.end]
}

// fill copies the committed records of the CPU's area into the queue
// until none is left or the queue holds o.QueueBytes, then gives their
// space back; it returns how many it copied.
func (q *queue) fill(o Options) int {
	if !q.area.pending(q.pos) {
		return 0
	}
	q.compact()
	n := 0
	q.more = false
	for {
		if q.bytes() >= o.QueueBytes {
			q.more = true
			break
		}
		b, next := q.area.next(q.pos)
		if b == nil {
			break
		}
		start := len(q.arena)
		q.arena = append(q.arena, b...)
		var ts uint64
		if o.Timestamp != nil {
			ts = o.Timestamp(b)
		}
		q.recs = append(q.recs, span{start, len(q.arena), ts})
		q.area.consume(q.pos, len(b))
		q.pos = next
		n++
	}
	if n > 0 {
		q.area.publish(q.pos)
	}
	return n
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

// heads is a min-heap (container/heap) of the queues holding records,
// by their head's timestamp, so that the next record of many CPUs is
// found in O(log CPUs). Equal timestamps (none, unordered) go in any order.
type heads []*queue

func (h heads) Len() int           { return len(h) }
func (h heads) Less(i, j int) bool { return h[i].headTS() < h[j].headTS() }
func (h heads) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

func (h *heads) Push(x any) {
	q := x.(*queue)
	q.at = len(*h)
	*h = append(*h, q)
}

func (h *heads) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}
