// Package osthread runs functions on one locked OS thread, so that BPF
// programs filtering on its tid count exactly the calls made there.
package osthread

import (
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
