// Package bench measures the attach paths side by side on the running
// kernel: the cost per hit of each mode (fentry/fexit trampolines versus
// fprobe's kprobe.multi/kretprobe.multi/kprobe.session), the cost of
// attaching and detaching N functions, the hit cost when ftrace is crowded
// with other users, and streaming throughput through the ringbuf.
//
// Method: every run measures the baseline (no probe) right before each
// mode, so each mode's cost is a difference taken minutes apart at most, and
// reports the median over runs with min and max. Under emulation (QEMU TCG)
// only ratios taken in one run mean anything.
package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/osthread"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Hit-cost modes, in report order: the attach paths of the attach layer
// (attach.Path), their pairs (named as the trace modes that link them),
// and the baseline.
const (
	ModeBaseline      = "baseline"
	ModeFentry        = string(attach.PathFentry)
	ModeFexit         = string(attach.PathFexit)
	ModeFentryFexit   = attach.ModeFentryFexit
	ModeKprobeMulti   = string(attach.PathKprobeMulti)
	ModeKretMulti     = string(attach.PathKretprobeMulti)
	ModeKprobeKret    = attach.ModeKprobeMulti
	ModeKprobeSession = string(attach.PathKprobeSession)
	ModeKprobe        = string(attach.PathKprobe)    // one ftrace-based kprobe (the path before fprobe)
	ModeKretprobe     = string(attach.PathKretprobe) // kretprobe (rethook)
	ModeKprobePair    = attach.ModeKprobe
	ModeRawTP         = string(attach.PathRawTP)
	// Linux 7.x trampoline attach types (internal/attach/tracingmulti.go).
	ModeFSession      = string(attach.PathFSession)      // one program at entry and exit (7.0)
	ModeFentryMulti   = string(attach.PathFentryMulti)   // one link, many functions
	ModeFexitMulti    = string(attach.PathFexitMulti)    //
	ModeFSessionMulti = string(attach.PathFSessionMulti) //
)

// HitModes lists the hit-cost modes.
var HitModes = []string{ModeBaseline, ModeFentry, ModeFexit, ModeFentryFexit, ModeFSession, ModeFentryMulti, ModeFexitMulti, ModeFSessionMulti,
	ModeKprobeMulti, ModeKretMulti, ModeKprobeKret, ModeKprobeSession, ModeKprobe, ModeKretprobe, ModeKprobePair, ModeRawTP}

// TraceModes lists the modes that measure ftprobe's trace program (every
// body but empty): each is the trace mode (attach.TraceModes) of the same
// name, and the empty row it is compared with.
var TraceModes = []string{ModeFentryFexit, ModeFSession, ModeFSessionMulti, ModeKprobeKret, ModeKprobeSession, ModeKprobePair}

// Triggers.
const (
	TriggerKernel  = "kernel"  // BPF_PROG_TEST_RUN driver calling bpf_get_numa_node_id() in a loop
	TriggerSyscall = "syscall" // user-space getppid(2) loop, probe on its syscall handler
)

// Bodies.
const (
	BodyEmpty    = "empty"     // counts hits only
	BodyTrace    = "trace"     // ftprobe's trace program with a reader draining the record buffers
	BodyFiltered = "filtered"  // trace program whose pid filter rejects every call
	BodyExitOnly = "exit-only" // trace program emitting one record per call, at exit (the --min-duration/--errors path)
	BodyAgg      = "agg"       // trace program aggregating in the kernel (stat): no record streamed
	// BodyPredicate is the trace program with a --filter predicate on the
	// first argument register that rejects every call at entry (opt-in:
	// not in compare's default bodies).
	BodyPredicate = "predicate"
	// BodyWindow is the trace program in --entry mode with the target
	// traced but not an entry function and no window ever open: every
	// call returns at entry, counted as window-rejected; the row's hits
	// are those rejections, one expected per call (opt-in: not in
	// compare's default bodies). Minimum kernel: that of the mode, with
	// task-local storage (5.11) for the window.
	BodyWindow = "window"
	// BodyTimed is the floor under every body that measures a duration
	// (trace, exit-only, agg): the counting program of the mode plus the
	// two bpf_ktime_get_ns() of a duration, the entry's handed to the exit
	// in the session cookie (fsession, kprobe.session) or in task-local
	// storage (fentry+fexit, the pairs); bpf/bench.bpf.c's timed_*
	// programs. Its hits are two per call only when every exit found its
	// entry's timestamp (opt-in: not in compare's default bodies; its
	// x empty needs the empty body in the run). Minimum kernel: the
	// mode's, with task-local storage (5.11) for the pairs and the
	// session kfuncs' ctx prototype (7.0) for kprobe.session and
	// fsession.
	BodyTimed = "timed"
)

// Stat is a median with its range over runs.
type Stat struct {
	Median  float64   `json:"median"`            // median of the samples
	Min     float64   `json:"min"`               // smallest sample
	Max     float64   `json:"max"`               // largest sample
	Samples []float64 `json:"samples,omitempty"` // one per measured run, in run order, in the unit the field name gives; absent when nothing was measured
}

// NewStat summarizes samples.
func NewStat(s []float64) Stat {
	if len(s) == 0 {
		return Stat{}
	}
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	m := c[len(c)/2]
	if len(c)%2 == 0 {
		m = (c[len(c)/2-1] + c[len(c)/2]) / 2
	}
	return Stat{Median: m, Min: c[0], Max: c[len(c)-1], Samples: s}
}

// counter is a loaded counting program with its hits map.
type counter struct {
	hits   *ebpf.Map
	extra  []*ebpf.Map // the timed body's start map
	probes []*attach.PathProbe
}

func (c *counter) Close() {
	for _, p := range c.probes {
		p.Close()
	}
	for _, m := range c.extra {
		m.Close()
	}
	if c.hits != nil {
		c.hits.Close()
	}
}

func (c *counter) count() (uint64, error) {
	var vals []uint64
	if err := c.hits.Lookup(uint32(0), &vals); err != nil {
		return 0, err
	}
	var s uint64
	for _, v := range vals {
		s += v
	}
	return s, nil
}

func (c *counter) reset() error {
	n := runtime.NumCPU()
	if p, err := ebpf.PossibleCPU(); err == nil {
		n = p
	}
	return c.hits.Put(uint32(0), make([]uint64, n))
}

// benchSpec returns the counting object with the filters set.
func benchSpec(tid uint32, batch uint32) (*ebpf.CollectionSpec, error) {
	spec, err := bpfobj.LoadBench()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["filter_tid"].Set(tid); err != nil {
		return nil, err
	}
	if err := spec.Variables["batch_iters"].Set(batch); err != nil {
		return nil, err
	}
	// getppid(2): the syscall trigger's call (include/uapi/asm-generic/unistd.h
	// 173 on arm64; arch/x86/entry/syscalls/syscall_64.tbl 110 on x86-64).
	nr := int64(110)
	if runtime.GOARCH == "arm64" {
		nr = 173
	}
	if err := spec.Variables["filter_syscall_nr"].Set(nr); err != nil {
		return nil, err
	}
	return spec, nil
}

// rawTPTracepoint is the tracepoint of the raw_tp mode's counting
// program (count_raw_tp, SEC("raw_tp/sys_enter")).
const rawTPTracepoint = "sys_enter"

// attachCounter attaches the counting program(s) of mode to target
// (a function for f*/kprobe modes; raw_tp counts at sys_enter) through the
// attach layer (attach.OpenPath), all counting into one hits map. Errors
// are explained by kin.
func attachCounter(kin *kfeat.Info, spec *ebpf.CollectionSpec, mode, target string, timed bool) (*counter, error) {
	c := &counter{}
	h, err := ebpf.NewMap(spec.Maps[bpfobj.BenchMapHits].Copy())
	if err != nil {
		return nil, fmt.Errorf("%s: hits map: %w", mode, err)
	}
	c.hits = h
	maps := map[string]*ebpf.Map{bpfobj.BenchMapHits: h}
	programs, unknown := attach.CountingProgram, "unknown mode %q"
	if timed {
		programs, unknown = attach.TimedProgram, "mode %q: no timed program for its attach path"
		// One start map shared by the entry and exit programs of a pair.
		ts, err := ebpf.NewMap(spec.Maps[bpfobj.BenchMapTstart].Copy())
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: timed body: task storage map: %w", mode, err)
		}
		c.extra = append(c.extra, ts)
		maps[bpfobj.BenchMapTstart] = ts
	}
	parts := map[string][]string{ModeFentryFexit: {ModeFentry, ModeFexit}, ModeKprobeKret: {ModeKprobeMulti, ModeKretMulti},
		ModeKprobePair: {ModeKprobe, ModeKretprobe}}[mode]
	if parts == nil {
		parts = []string{mode}
	}
	for _, m := range parts {
		path := attach.Path(m)
		prog, ok := programs[path]
		if !ok {
			c.Close()
			return nil, fmt.Errorf(unknown, m)
		}
		o := attach.PathOptions{Spec: spec, Program: prog, Maps: maps}
		if path == attach.PathRawTP {
			// The raw_tp reference row counts at the sys_enter tracepoint
			// (its program keeps the trigger's syscall, filter_syscall_nr),
			// not at the target function.
			o.Tracepoint, target = rawTPTracepoint, rawTPTracepoint
		} else {
			o.Funcs = []*symbols.Func{{Name: target, BTFName: target}}
		}
		pp, err := attach.OpenPath(context.Background(), path, o)
		if err != nil {
			c.Close()
			return nil, kin.Explain(m, target, errors.Unwrap(err))
		}
		c.probes = append(c.probes, pp)
	}
	return c, nil
}

func hitsPerCall(mode string) uint64 {
	switch mode {
	case ModeFentryFexit, ModeKprobeKret, ModeKprobeSession, ModeFSession, ModeFSessionMulti, ModeKprobePair:
		return 2
	case ModeBaseline:
		return 0
	}
	return 1
}

// Trigger runs calls of the target and returns the elapsed time.
type Trigger interface {
	Name() string
	Target() string // the function probes attach to
	Run(calls int) (time.Duration, error)
	Close()
	// loop makes calls calls on the calling thread and returns the
	// elapsed time (what Run does on its thread).
	loop(calls int) (time.Duration, error)
}

// thread is the locked OS thread that runs the driver (or every
// trigger), so the counting programs filter on its tid.
type thread = osthread.Thread

type kernelTrigger struct {
	prog  *ebpf.Program
	batch int
	th    *thread
}

// NewKernelTrigger loads the driver program: each BPF_PROG_TEST_RUN calls
// bpf_get_numa_node_id() batch times (the method of the kernel's
// tools/testing/selftests/bpf/benchs/bench_trigger.c). The caller closes it.
func newKernelTrigger(batch int, th *thread) (Trigger, error) {
	spec, err := benchSpec(0, uint32(batch))
	if err != nil {
		return nil, err
	}
	p, err := attach.LoadProgram(spec, bpfobj.BenchProgTriggerDriver, "", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("kernel trigger: load driver: %w", err)
	}
	if _, err := p.Run(&ebpf.RunOptions{}); err != nil {
		p.Close()
		return nil, fmt.Errorf("kernel trigger: BPF_PROG_TEST_RUN on raw_tp: %w", err)
	}
	return &kernelTrigger{prog: p, batch: batch, th: th}, nil
}

func (k *kernelTrigger) Name() string   { return TriggerKernel }
func (k *kernelTrigger) Target() string { return "bpf_get_numa_node_id" }
func (k *kernelTrigger) Close()         { k.prog.Close() }

// Run triggers calls rounded up to whole batches.
func (k *kernelTrigger) Run(calls int) (d time.Duration, err error) {
	k.th.Do(func() { d, err = k.loop(calls) })
	return d, err
}

func (k *kernelTrigger) loop(calls int) (time.Duration, error) {
	runs := (calls + k.batch - 1) / k.batch
	var err error
	start := time.Now()
	for i := 0; i < runs && err == nil; i++ {
		_, err = k.prog.Run(&ebpf.RunOptions{})
	}
	return time.Since(start), err
}

func (k *kernelTrigger) Calls(calls int) int { return (calls + k.batch - 1) / k.batch * k.batch }

type syscallTrigger struct {
	target string
	th     *thread
}

// newSyscallTrigger loops getppid(2). Probes go on its syscall handler
// (__arm64_sys_getppid, __x64_sys_getppid) when ftrace can patch it, else on
// __task_pid_nr_ns, which getppid calls once (x86-64 7.x dispatches
// syscalls through x64_sys_call, where the handlers are not patchable).
// A target given by the user (compare --target) replaces it.
func newSyscallTrigger(k *symbols.Kernel, th *thread, target string) Trigger {
	if target != "" {
		return &syscallTrigger{target: target, th: th}
	}
	t := "__x64_sys_getppid"
	if runtime.GOARCH == "arm64" {
		t = "__arm64_sys_getppid"
	}
	if k != nil && k.Filter != nil && k.Filter[symbols.FilterKey{Name: t}] == 0 {
		t = "__task_pid_nr_ns"
	}
	return &syscallTrigger{target: t, th: th}
}

func (s *syscallTrigger) Name() string   { return TriggerSyscall }
func (s *syscallTrigger) Target() string { return s.target }
func (s *syscallTrigger) Close()         {}
func (s *syscallTrigger) Run(calls int) (d time.Duration, err error) {
	s.th.Do(func() { d, err = s.loop(calls) })
	return d, err
}

func (s *syscallTrigger) loop(calls int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < calls; i++ {
		unix.Getppid()
	}
	return time.Since(start), nil
}

func triggeredCalls(t Trigger, calls int) int {
	if k, ok := t.(*kernelTrigger); ok {
		return k.Calls(calls)
	}
	return calls
}
