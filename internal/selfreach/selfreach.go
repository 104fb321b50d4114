// Package selfreach learns from the running kernel which kernel functions
// ftprobe's own trace programs reach: the map lookups and updates, the
// task storage, the ringbuf, the clock and whatever else their helpers
// call. A trampoline program attached to such a function runs again
// inside itself (the kernel skips it: a recursion miss) or records its own
// work into the traced thread's call stack, so trace leaves them out.
//
// How: a counting kprobe.multi program (cookie = the function's index,
// one counter per function, only the calibrating thread) goes on the
// candidate functions; the kernel trigger of compare (a BPF_PROG_TEST_RUN
// driver calling bpf_get_numa_node_id in a loop, bpf/bench.bpf.c) runs
// once without and once with ftprobe's trace programs on
// bpf_get_numa_node_id (fentry+fexit, with the trace's own settings: its
// records or tables, its process tree filter, its --entry window). The
// functions whose count grows by at least once per traced call are the
// ones the trace programs reach. A kprobe.multi program runs inside a
// trampoline program: the trampoline guards recursion per program, not
// with bpf_prog_active as fprobe does.
package selfreach

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/osthread"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Trigger is the kernel function the driver program calls (its helper
// bpf_get_numa_node_id), where the trace programs are attached to learn
// what they reach.
const Trigger = "bpf_get_numa_node_id"

// Calls is how many calls of Trigger each of the two runs makes.
const Calls = 1000

// Options of Learn.
type Options struct {
	// Candidates are the functions to check (kprobe.multi takes them).
	Candidates []*symbols.Func
	// Trigger is Trigger's function (a trampoline takes it).
	Trigger *symbols.Func
	// Trace are the trace programs' settings (records, tables, filters:
	// ones the calibrating thread passes); Learn sets the mode and the
	// function, made the --entry function when Trace has Entries. With
	// Filters.Tree, Learn adds its own process to the tree.
	Trace attach.Options
	// Open loads and attaches the trace programs (attach.Open).
	Open func(context.Context, attach.Options) (*attach.Tracer, error)
}

// Hit is one candidate the trace programs reach, with how many times per
// traced call.
type Hit struct {
	Func    *symbols.Func
	PerCall float64
}

// Result is what Learn found.
type Result struct {
	Reached []Hit
	// Checked are the candidates the counting program attached to (the
	// ones not in Reached are not called); Refused are the ones the
	// kernel refused (not checked).
	Checked []*symbols.Func
	Refused []attach.Failure
	Took    time.Duration
}

// Learn runs the calibration and leaves nothing attached or loaded. An
// error says why the kernel could not tell (no kprobe.multi, no
// trampolines, ...), or that ctx ended: then nothing is known to be
// reached. ctx is checked between the steps (attaching, loading, each
// run of the driver).
func Learn(ctx context.Context, o Options) (*Result, error) {
	t0 := time.Now()
	if len(o.Candidates) == 0 {
		return &Result{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	th := osthread.New()
	defer th.Close()
	// The counters: the candidates by index, then Trigger unless it is
	// one (the check that the counting program sees the driver's calls
	// at all; one address goes once in a link).
	fs := make([]*symbols.Func, 0, len(o.Candidates)+1)
	trig := -1
	for i, f := range o.Candidates {
		c := *f
		c.ID = uint32(i)
		fs = append(fs, &c)
		if f.Addr == o.Trigger.Addr {
			trig = i
		}
	}
	if trig < 0 {
		c := *o.Trigger
		c.ID = uint32(len(fs))
		trig = len(fs)
		fs = append(fs, &c)
	}
	ctr, err := newCounters(len(fs), th.TID)
	if err != nil {
		return nil, err
	}
	defer ctr.Close()
	good, bad, l, err := attach.Bisect(ctx, fs, func(set []*symbols.Func) (link.Link, error) {
		cookies := make([]uint64, len(set))
		for i, f := range set {
			cookies[i] = uint64(f.ID)
		}
		return attach.LinkKprobeMulti(ctr.Prog, set, cookies, false, false)
	})
	if err != nil {
		return nil, fmt.Errorf("counting kprobe.multi program on %d functions: %w", len(fs), err)
	}
	defer l.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	without, err := ctr.during(th, drv)
	if err != nil {
		return nil, err
	}
	if without[trig] < Calls {
		return nil, fmt.Errorf("the counting kprobe.multi program saw %d of the driver's %d calls of %s", without[trig], Calls, Trigger)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	with, err := ctr.withTrace(ctx, th, drv, o)
	if err != nil {
		return nil, err
	}
	r := &Result{Refused: bad}
	for _, f := range good {
		if int(f.ID) >= len(o.Candidates) {
			continue
		}
		r.Checked = append(r.Checked, o.Candidates[f.ID])
		if d := int64(with[f.ID]) - int64(without[f.ID]); d >= Calls {
			r.Reached = append(r.Reached, Hit{Func: o.Candidates[f.ID], PerCall: float64(d) / Calls})
		}
	}
	r.Took = time.Since(t0)
	return r, nil
}

// withTrace opens the trace programs on Trigger and counts one run of the
// driver under them, checking that they recorded every call.
func (c *counters) withTrace(ctx context.Context, th *thread, drv *ebpf.Program, o Options) ([]uint64, error) {
	ao := o.Trace
	ao.Mode = attach.ModeFentryFexit
	ao.Funcs = []*symbols.Func{o.Trigger}
	ao.MultiFuncs, ao.MixedTrampoline = nil, ""
	ao.DryRun, ao.Exprs, ao.Progress = false, nil, nil
	if len(ao.Entries) > 0 {
		ao.Entries = map[uint32]bool{0: true}
	}
	t, err := o.Open(ctx, ao)
	if err != nil {
		return nil, fmt.Errorf("ftprobe's trace programs on %s in %s mode: %w", Trigger, ao.Mode, err)
	}
	defer t.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ao.Filters.Tree {
		if err := t.AddTGID(uint32(os.Getpid())); err != nil {
			return nil, fmt.Errorf("process tree filter: %w", err)
		}
	}
	counts, err := c.during(th, drv)
	if err != nil {
		return nil, err
	}
	l, err := t.Losses()
	if err != nil {
		return nil, err
	}
	if l.EntryHits < Calls {
		return nil, fmt.Errorf("ftprobe's trace programs recorded %d of the driver's %d calls of %s", l.EntryHits, Calls, Trigger)
	}
	return counts, nil
}

// loadDriver loads compare's kernel trigger: each BPF_PROG_TEST_RUN calls
// Trigger Calls times.
func loadDriver() (*ebpf.Program, error) {
	spec, err := bpfobj.LoadBench()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["batch_iters"].Set(uint32(Calls)); err != nil {
		return nil, err
	}
	p, err := attach.LoadProgram(spec, bpfobj.BenchProgTriggerDriver, "", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("kernel trigger: load driver: %w", err)
	}
	return p, nil
}

// counters are the per-function counts of the counting program.
type counters struct{ *attach.CookieCounter }

func newCounters(n int, tid uint32) (*counters, error) {
	c, err := attach.NewCookieCounter(n, tid)
	if err != nil {
		return nil, err
	}
	return &counters{c}, nil
}

// during returns what the counters grew by while th ran the driver once.
func (c *counters) during(th *thread, drv *ebpf.Program) ([]uint64, error) {
	before, err := c.Read()
	if err != nil {
		return nil, err
	}
	th.Do(func() { _, err = drv.Run(&ebpf.RunOptions{}) })
	if err != nil {
		return nil, fmt.Errorf("kernel trigger: BPF_PROG_TEST_RUN: %w", err)
	}
	after, err := c.Read()
	if err != nil {
		return nil, err
	}
	for i := range after {
		after[i] -= before[i]
	}
	return after, nil
}

// thread is the locked OS thread that runs the driver (or every
// trigger), so the counting programs filter on its tid.
type thread = osthread.Thread
