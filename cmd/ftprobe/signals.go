package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopSignal is the cause of a context ended by a signal: trace and stat
// report it in the error of the phase it stopped ("interrupted by SIGTERM
// while attaching 123 of 400 functions; nothing left attached").
type stopSignal struct{ name string }

func (s stopSignal) Error() string { return "interrupted by " + s.name }

// Is makes a signal's stop a cancellation (context.Canceled).
func (s stopSignal) Is(target error) bool { return target == context.Canceled }

// signalContext returns a context ended by the first SIGINT or SIGTERM,
// its cause a stopSignal, covering every phase of a trace: planning,
// attach, dry run, the trace itself and the detach. A later signal does
// not cut the detach short (which could leave trampolines behind were
// ftprobe to stop closing links): it is said on log and ignored. Killed
// outright, ftprobe still leaves nothing attached, since every link it
// makes is a file descriptor the kernel closes with the process. stop
// ends the handling.
func signalContext(parent context.Context, log io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case s := <-ch:
				name := s.String()
				if n, ok := s.(syscall.Signal); ok && unix.SignalName(n) != "" {
					name = unix.SignalName(n)
				}
				if first {
					cancel(stopSignal{name})
					first = false
					continue
				}
				fmt.Fprintf(log, "ftprobe: %s: still stopping; every link goes (the kernel closes the rest should ftprobe be killed)\n", name)
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}
