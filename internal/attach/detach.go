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

func (t *Tracer) closeLinks() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, l := range t.links {
		wg.Add(1)
		sem <- struct{}{}
		go func(l link.Link) {
			defer wg.Done()
			l.Close()
			<-sem
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

// closeInterrupted closes a tracer whose Open failed; when Open's context
// is done, it first tells opts.Detaching how many links it closes. Close
// goes on to the last link whatever happens meanwhile: should the process
// be killed before, the kernel closes the rest with its file descriptors
// (every link is one, perf-event kprobes included), so nothing outlives it.
func (t *Tracer) closeInterrupted(opts Options) {
	if opts.Detaching != nil && opts.ctx != nil && opts.ctx.Err() != nil {
		if n := t.linkCount(); n > 0 {
			opts.Detaching(n)
		}
	}
	t.Close()
}

// linkCount is the number of links the tracer holds.
func (t *Tracer) linkCount() int {
	n := len(t.links) + len(t.comm)
	for _, l := range append(t.multi, t.fork, t.exit, t.exec) {
		if l != nil {
			n++
		}
	}
	return n
}
