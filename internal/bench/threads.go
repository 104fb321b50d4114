package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftprobe/ftprobe/internal/osthread"
)

// ThreadsAll is the --threads value for every CPU the process may run on.
const ThreadsAll = "all"

// ParseThreads reads compare --threads: comma-separated thread counts,
// each 1 to online or ThreadsAll (online). The result is sorted, each
// count once, and always holds 1: the one-thread rows are what
// ratio_to_one_thread and the scaled ns over baseline refer to. Errors
// are one line naming the value.
func ParseThreads(s string, online int) ([]int, error) {
	out := []int{1}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		n, err := strconv.Atoi(p)
		if p == ThreadsAll {
			n, err = online, nil
		}
		if err != nil || n < 1 || n > online {
			return nil, fmt.Errorf("--threads %q: want comma-separated thread counts from 1 to %d (the CPUs this process may run on) or %s", s, online, ThreadsAll)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// team is the hit scenario's threads when it measures several at once:
// one locked OS thread per CPU the process may run on, pinned there, in
// CPU order. Rows of N threads use the first N.
type team []*thread

// newTeam starts and pins n threads on the first n CPUs the process may
// run on.
func newTeam(n int) (team, error) {
	cpus, err := osthread.CPUs()
	if err != nil {
		return nil, err
	}
	if n > len(cpus) {
		return nil, fmt.Errorf("%w: %d threads on %d CPUs: one CPU per thread", ErrBadInput, n, len(cpus))
	}
	var t team
	for _, c := range cpus[:n] {
		th := osthread.New()
		t = append(t, th)
		if err := th.Pin(c); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

func (t team) Close() {
	for _, th := range t {
		th.Close()
	}
}

// run starts loop on the first n threads at once (each waits at a barrier
// until all are ready) and returns the team's wall time: from the first
// thread's start to the last one's end. Not the mean of each thread's:
// under QEMU TCG the vCPUs take turns on one host thread, each for as
// long as the next timer allows, so a short loop may run whole before
// the next thread starts (its own time is then one thread's) while a long
// one is interleaved with the others (its time is then theirs too); the
// span holds every thread's work in both cases, and on parallel CPUs it
// is the slowest thread's time.
func (t team) run(n int, loop func() (time.Duration, error)) (time.Duration, error) {
	starts, ends, errs := make([]time.Time, n), make([]time.Time, n), make([]error, n)
	ready, start := make(chan struct{}, n), make(chan struct{})
	done := make(chan struct{}, n)
	for i := range n {
		go t[i].Do(func() {
			ready <- struct{}{}
			<-start
			starts[i] = time.Now()
			_, errs[i] = loop()
			ends[i] = time.Now()
			done <- struct{}{}
		})
	}
	for range n {
		<-ready
	}
	close(start)
	for range n {
		<-done
	}
	first, last := starts[0], ends[0]
	for i := range n {
		if starts[i].Before(first) {
			first = starts[i]
		}
		if ends[i].After(last) {
			last = ends[i]
		}
	}
	for _, err := range errs {
		if err != nil {
			return last.Sub(first), err
		}
	}
	return last.Sub(first), nil
}
