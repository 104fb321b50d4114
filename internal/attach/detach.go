package attach

import (
	"sync"

	"github.com/cilium/ebpf/link"
)

// Detach closes every link (concurrently for many fentry links) so no new
// event is produced, keeping maps and programs so the ringbuf can be
// drained and the counters read. kprobe.multi missed counts are read first.
// Close calls it.
func (t *Tracer) Detach() {
	var m uint64
	for _, ml := range t.multi {
		if ml == nil {
			continue
		}
		if info, err := ml.Info(); err == nil {
			if km := info.KprobeMulti(); km != nil {
				m += km.Missed
			}
		}
	}
	// Stop recording before the first link goes: calls running now are
	// counted as in flight (entries without exit), not as losses.
	if t.armed != nil {
		t.armed.Set(uint32(0))
	}
	t.closeLinks()
	if m > t.missed {
		t.missed = m
	}
}

// closeLinks closes every link, the per-function ones on up to 8
// goroutines, telling t.detaching as they go. It always goes to the last
// link; should the process be killed before, the kernel closes the rest
// with its file descriptors (every link is one, perf-event kprobes
// included), so nothing outlives ftprobe.
func (t *Tracer) closeLinks() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	closed, total := 0, len(t.links)
	if t.detaching != nil && total > 0 {
		t.detaching(0, total)
	}
	sem := make(chan struct{}, 8)
	for _, l := range t.links {
		wg.Add(1)
		sem <- struct{}{}
		go func(l link.Link) {
			defer wg.Done()
			l.Close()
			<-sem
			if t.detaching != nil {
				mu.Lock()
				closed++
				t.detaching(closed, total)
				mu.Unlock()
			}
		}(l)
	}
	for _, l := range t.multi {
		if l != nil {
			l.Close()
		}
	}
	wg.Wait()
	for i := range t.multi {
		t.multi[i] = nil
	}
	t.links = nil
	for _, l := range []*link.Link{&t.fork, &t.exit, &t.exec} {
		if *l != nil {
			(*l).Close()
			*l = nil
		}
	}
	for _, l := range t.comm {
		l.Close()
	}
	t.comm = nil
}

// Close detaches every link and frees programs and maps. It is safe to
// call more than once.
func (t *Tracer) Close() error {
	t.closeOnce.Do(func() {
		t.closeLinks()
		for _, p := range t.progs {
			if p != nil {
				p.Close()
			}
		}
		t.tramp.Close()
		t.maps.Close()
		if t.coll != nil {
			t.coll.Close() // the unnamed maps (.bss, .rodata)
		}
		t.stats, t.armed, t.windowExits = nil, nil, nil
	})
	return nil
}
