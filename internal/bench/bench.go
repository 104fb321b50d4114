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
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Hit-cost modes, in report order.
const (
	ModeBaseline      = "baseline"
	ModeFentry        = "fentry"
	ModeFexit         = "fexit"
	ModeFentryFexit   = "fentry+fexit"
	ModeKprobeMulti   = "kprobe.multi"
	ModeKretMulti     = "kretprobe.multi"
	ModeKprobeKret    = "kprobe.multi+kretprobe.multi"
	ModeKprobeSession = "kprobe.session"
	ModeKprobe        = "kprobe"    // one ftrace-based kprobe (the path before fprobe)
	ModeKretprobe     = "kretprobe" // kretprobe (rethook)
	ModeRawTP         = "raw_tp"
	// Linux 7.x trampoline attach types (internal/attach/tracingmulti.go).
	ModeFSession      = "fsession"       // one program at entry and exit (7.0)
	ModeFentryMulti   = "fentry.multi"   // one link, many functions
	ModeFexitMulti    = "fexit.multi"    //
	ModeFSessionMulti = "fsession.multi" //
)

// HitModes lists the hit-cost modes.
var HitModes = []string{ModeBaseline, ModeFentry, ModeFexit, ModeFentryFexit, ModeFSession, ModeFentryMulti, ModeFexitMulti, ModeFSessionMulti,
	ModeKprobeMulti, ModeKretMulti, ModeKprobeKret, ModeKprobeSession, ModeKprobe, ModeKretprobe, ModeRawTP}

// trampoline7 maps the 7.x modes to their counting program and attach type.
var trampoline7 = map[string]struct {
	prog string
	at   ebpf.AttachType
}{
	ModeFSession:      {"count_fsession", attach.AttachTraceFSession},
	ModeFentryMulti:   {"count_fentry", attach.AttachTraceFEntryMulti},
	ModeFexitMulti:    {"count_fexit", attach.AttachTraceFExitMulti},
	ModeFSessionMulti: {"count_fsession", attach.AttachTraceFSessionMulti},
}

// attach7 loads the counting program of a 7.x trampoline mode with ld and
// links it to the functions fs (BTF names): one fsession link per function,
// or one tracing multi link for all.
func attach7(ld *attach.TrampolineLoader, mode string, fs []string) ([]*ebpf.Program, []link.Link, error) {
	t := trampoline7[mode]
	if mode == ModeFSession {
		var progs []*ebpf.Program
		var links []link.Link
		for _, f := range fs {
			p, err := ld.Load(t.prog, t.at, f)
			if err != nil {
				return progs, links, err
			}
			progs = append(progs, p)
			l, err := attach.AttachFSession(p, 0)
			if err != nil {
				return progs, links, err
			}
			links = append(links, l)
		}
		return progs, links, nil
	}
	p, err := ld.Load(t.prog, t.at, attach.MultiTarget)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]btf.TypeID, len(fs))
	cookies := make([]uint64, len(fs))
	for i, f := range fs {
		if ids[i], err = ld.IDs.ID(f); err != nil {
			return []*ebpf.Program{p}, nil, err
		}
	}
	l, err := attach.AttachTracingMulti(p, t.at, ids, cookies)
	if err != nil {
		return []*ebpf.Program{p}, nil, err
	}
	return []*ebpf.Program{p}, []link.Link{l}, nil
}

// Triggers.
const (
	TriggerKernel  = "kernel"  // BPF_PROG_TEST_RUN driver calling bpf_get_numa_node_id() in a loop
	TriggerSyscall = "syscall" // user-space getppid(2) loop, probe on its syscall handler
)

// Bodies.
const (
	BodyEmpty    = "empty"    // counts hits only
	BodyTrace    = "trace"    // ftprobe's trace program with a reader draining the ringbuf
	BodyFiltered = "filtered" // trace program whose pid filter rejects every call
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
	hits    *ebpf.Map
	progs   []*ebpf.Program
	links   []link.Link
	loaders []*attach.TrampolineLoader
}

func (c *counter) Close() {
	for _, l := range c.links {
		l.Close()
	}
	for _, p := range c.progs {
		p.Close()
	}
	for _, ld := range c.loaders {
		ld.Close()
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

func loadOne(spec *ebpf.CollectionSpec, name, attachTo string, hits *ebpf.Map) (*ebpf.Program, error) {
	ps := spec.Programs[name].Copy()
	ps.AttachTo = attachTo
	coll := &ebpf.CollectionSpec{Maps: spec.Maps, Programs: map[string]*ebpf.ProgramSpec{name: ps}, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder}
	opts := ebpf.CollectionOptions{}
	if hits != nil {
		opts.MapReplacements = map[string]*ebpf.Map{"hits": hits}
	}
	c, err := ebpf.NewCollectionWithOptions(coll, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.DetachProgram(name), nil
}

// attachCounter attaches the counting program(s) of mode to target
// (a function for f*/kprobe modes, a tracepoint for raw_tp). Errors are
// explained by kin.
func attachCounter(kin *kfeat.Info, spec *ebpf.CollectionSpec, mode, target string) (*counter, error) {
	c := &counter{}
	hs := spec.Maps["hits"].Copy()
	h, err := ebpf.NewMap(hs)
	if err != nil {
		return nil, err
	}
	c.hits = h
	fail := func(m string, err error) (*counter, error) {
		c.Close()
		return nil, kin.Explain(m, target, err)
	}
	add := func(m string) error {
		var p *ebpf.Program
		var l link.Link
		var err error
		switch m {
		case ModeFentry, ModeFexit:
			prog := map[string]string{ModeFentry: "count_fentry", ModeFexit: "count_fexit"}[m]
			if p, err = loadOne(spec, prog, target, h); err == nil {
				l, err = link.AttachTracing(link.TracingOptions{Program: p})
			}
		case ModeKprobeMulti, ModeKretMulti, ModeKprobeSession:
			prog := map[string]string{ModeKprobeMulti: "count_kmulti", ModeKretMulti: "count_kretmulti", ModeKprobeSession: "count_ksession"}[m]
			if p, err = loadOne(spec, prog, "", h); err == nil {
				o := link.KprobeMultiOptions{Symbols: []string{target}, Session: m == ModeKprobeSession}
				if m == ModeKretMulti {
					l, err = link.KretprobeMulti(p, o)
				} else {
					l, err = link.KprobeMulti(p, o)
				}
			}
		case ModeFSession, ModeFentryMulti, ModeFexitMulti, ModeFSessionMulti:
			if err = attach.CheckAttachType(trampoline7[m].at); err != nil {
				return err
			}
			ld, err := attach.NewTrampolineLoader(spec, map[string]*ebpf.Map{"hits": h})
			if err != nil {
				return err
			}
			c.loaders = append(c.loaders, ld)
			ps, ls, err := attach7(ld, m, []string{target})
			c.progs = append(c.progs, ps...)
			c.links = append(c.links, ls...)
			return err
		case ModeKprobe, ModeKretprobe:
			prog := map[string]string{ModeKprobe: "count_kprobe", ModeKretprobe: "count_kretprobe"}[m]
			if p, err = loadOne(spec, prog, "", h); err == nil {
				if m == ModeKretprobe {
					l, err = link.Kretprobe(target, p, nil)
				} else {
					l, err = link.Kprobe(target, p, nil)
				}
			}
		case ModeRawTP:
			if p, err = loadOne(spec, "count_raw_tp", "", h); err == nil {
				l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: p})
			}
		default:
			return fmt.Errorf("unknown mode %q", m)
		}
		if p != nil {
			c.progs = append(c.progs, p)
		}
		if err != nil {
			return err
		}
		c.links = append(c.links, l)
		return nil
	}
	parts := map[string][]string{ModeFentryFexit: {ModeFentry, ModeFexit}, ModeKprobeKret: {ModeKprobeMulti, ModeKretMulti}}[mode]
	if parts == nil {
		parts = []string{mode}
	}
	for _, m := range parts {
		if err := add(m); err != nil {
			return fail(m, err)
		}
	}
	return c, nil
}

// hitsPerCall is how many counter increments one triggered call causes.
func hitsPerCall(mode string) uint64 {
	switch mode {
	case ModeFentryFexit, ModeKprobeKret, ModeKprobeSession, ModeFSession, ModeFSessionMulti:
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
}

// thread is one locked OS thread that runs every trigger, so the counting
// programs can filter on its tid and count exactly the triggered calls.
type thread struct {
	tid uint32
	req chan func()
}

func newThread() *thread {
	t := &thread{req: make(chan func())}
	ready := make(chan uint32)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ready <- uint32(unix.Gettid())
		for f := range t.req {
			f()
		}
	}()
	t.tid = <-ready
	return t
}

func (t *thread) do(f func()) {
	done := make(chan struct{})
	t.req <- func() { f(); close(done) }
	<-done
}

func (t *thread) close() { close(t.req) }

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
	p, err := loadOne(spec, "trigger_driver", "", nil)
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
func (k *kernelTrigger) Run(calls int) (time.Duration, error) {
	runs := (calls + k.batch - 1) / k.batch
	var d time.Duration
	var err error
	k.th.do(func() {
		start := time.Now()
		for i := 0; i < runs && err == nil; i++ {
			_, err = k.prog.Run(&ebpf.RunOptions{})
		}
		d = time.Since(start)
	})
	return d, err
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
func (s *syscallTrigger) Run(calls int) (time.Duration, error) {
	var d time.Duration
	s.th.do(func() {
		start := time.Now()
		for i := 0; i < calls; i++ {
			unix.Getppid()
		}
		d = time.Since(start)
	})
	return d, nil
}

func triggeredCalls(t Trigger, calls int) int {
	if k, ok := t.(*kernelTrigger); ok {
		return k.Calls(calls)
	}
	return calls
}
