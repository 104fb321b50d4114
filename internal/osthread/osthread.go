// Package osthread runs functions on one locked OS thread, so that BPF
// programs filtering on its tid count exactly the calls made there.
package osthread

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Thread is one OS thread, locked to its goroutine, that runs the
// functions given to Do one at a time. The caller must Close it.
type Thread struct {
	TID uint32 // its thread id (gettid(2))
	req chan func()
}

// New starts a Thread.
func New() *Thread {
	t := &Thread{req: make(chan func())}
	ready := make(chan uint32)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ready <- uint32(unix.Gettid())
		for f := range t.req {
			f()
		}
	}()
	t.TID = <-ready
	return t
}

// Do runs f on the thread and returns when it has.
func (t *Thread) Do(f func()) {
	done := make(chan struct{})
	t.req <- func() { f(); close(done) }
	<-done
}

// Close ends the thread once the running function returns.
func (t *Thread) Close() { close(t.req) }

// Pin binds the thread to CPU cpu (sched_setaffinity(2)): from now on it
// runs there only.
func (t *Thread) Pin(cpu int) error {
	var err error
	t.Do(func() {
		var set unix.CPUSet
		set.Set(cpu)
		if e := unix.SchedSetaffinity(0, &set); e != nil {
			err = fmt.Errorf("pin thread %d to CPU %d: %w", t.TID, cpu, e)
		}
	})
	return err
}

// CPUs returns the CPUs the calling process may run on
// (sched_getaffinity(2)), in increasing order.
func CPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("cpus: sched_getaffinity: %w", err)
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}
