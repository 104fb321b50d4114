// Package attach loads ftprobe's trace programs and attaches them to kernel
// functions, either through BPF trampolines (fentry/fexit: one program pair
// per function, reached by an ftrace direct call) or through fprobe
// (kprobe.multi/kretprobe.multi: one link pair for all functions).
package attach

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Modes accepted by Open.
const (
	ModeFentry      = symbols.ModeFentry      // fentry + fexit, >= 5.5 (x86), 6.4 (arm64)
	ModeKprobeMulti = symbols.ModeKprobeMulti // kprobe.multi + kretprobe.multi, >= 5.18 with CONFIG_FPROBE (arm64: 6.14)
	// ModeKprobe attaches one kprobe and one kretprobe per function
	// (perf-event links, cookies >= 5.15): the fallback where neither
	// trampolines nor fprobe exist, e.g. arm64 before 6.4.
	ModeKprobe = symbols.ModeKprobe
	// ModeMixed attaches Options.Funcs with fentry/fexit and
	// Options.MultiFuncs with kprobe.multi/kretprobe.multi, sharing maps and
	// the ringbuf: auto mode's per-function fallback.
	ModeMixed = "fentry+kprobe-multi"
	// ModeFSession attaches one fsession program per function: one
	// trampoline program run at entry and at exit (7.0).
	ModeFSession = symbols.ModeFSession
	// ModeFentryMulti attaches one tracing multi link for all functions:
	// fsession.multi where the kernel has it, else fentry.multi plus
	// fexit.multi (7.x).
	ModeFentryMulti = symbols.ModeFentryMulti
)

// Event mode values, as the BPF side writes them (enum ftp_mode).
const (
	EventModeFentry        = 1
	EventModeKprobeMulti   = 2
	EventModeKprobe        = 3
	EventModeFSession      = 4
	EventModeFentryMulti   = 5
	EventModeFSessionMulti = 6
)

// Filters are applied in the kernel, at entry and at exit.
type Filters struct {
	TGID        uint32        // only this process (0 = any)
	TID         uint32        // only this thread (0 = any)
	Comm        string        // only this comm (exact, <= 15 bytes)
	Tree        bool          // only processes added with AddTGID and their descendants
	MinDuration time.Duration // emit only calls at least this long (at exit, with entry args)
	ErrorsOnly  bool          // emit only calls returning a negative int / error pointer
}

// Limits of the record tail (bpf/trace.bpf.c FTP_MAX_STRS, FTP_STR_LEN,
// FTP_STACK_DEPTH).
const (
	StrMax     = 2   // strings read per event
	StrLen     = 128 // bytes per string, NUL included
	StackDepth = 32  // kernel stack frames per event
)

// Options configure Open.
type Options struct {
	Mode       string
	Funcs      []*symbols.Func // IDs must be 0..len-1 (with MultiFuncs: 0..len(Funcs)+len(MultiFuncs)-1)
	MultiFuncs []*symbols.Func // ModeMixed: the functions for kprobe.multi
	// MixedTrampoline is ModeMixed's mode for Funcs: ModeFentry (default)
	// or ModeFentryMulti.
	MixedTrampoline string
	Filters         Filters
	// Strings reads the `char *` arguments (StringArgs) at entry into the
	// record, up to StrMax strings of StrLen bytes each.
	Strings bool
	// Stack records the kernel stack at entry (up to StackDepth frames).
	Stack       bool
	RingbufSize uint32 // bytes; a power-of-two multiple of the page size (default 4 MiB)
	Kernel      *kfeat.Info
	// Progress, when set, is called as functions attach (fentry).
	Progress func(done, total int)
	// AttachMulti replaces link.KprobeMulti (tests).
	AttachMulti func(prog *ebpf.Program, opts link.KprobeMultiOptions, ret bool) (link.Link, error)
}

// Failure is one function that could not be attached, with the reason.
type Failure struct {
	Func *symbols.Func
	Err  error
}

// Tracer holds the loaded programs, maps and links of one trace. The caller
// must Close it; Close detaches every link.
type Tracer struct {
	Mode     string
	Variant  string          // how the mode was realised, e.g. "fsession.multi" ("" = as named)
	Attached []*symbols.Func // attached functions
	Failed   []Failure       // functions left out, with reasons

	maps      bpfobj.TraceMaps
	progs     []*ebpf.Program
	links     []link.Link
	fork      link.Link         // --tree: follows forks into tgids
	exit      link.Link         // --tree: forgets exited processes
	exec      link.Link         // --tree: starts tracing a process added with AddTGIDAtExec at its exec
	multi     []link.Link       // kprobe-multi links (entry, exit)
	tramp     *TrampolineLoader // fsession, fentry-multi
	closeOnce sync.Once
	missed    uint64 // kprobe.multi missed runs read at Detach

}

// ValidateRingbufSize checks that n is a power-of-two multiple of the page
// size, as BPF_MAP_TYPE_RINGBUF requires (kernel/bpf/ringbuf.c).
func ValidateRingbufSize(n uint32) error {
	ps := uint32(unix.Getpagesize())
	if n < ps || n&(n-1) != 0 {
		return fmt.Errorf("ringbuf size %d: must be a power-of-two multiple of the page size (%d bytes)", n, ps)
	}
	return nil
}

// Open loads the programs for opts.Mode and attaches them to opts.Funcs.
// Functions that fail individually are recorded in Failed (kprobe-multi
// bisects a failing link to find them); if none attach, Open returns an
// error explained by kfeat.Info.Explain and leaves nothing attached.
// Minimum kernel: fentry 5.19 (attach cookies), arm64 6.4 (direct calls);
// kprobe-multi 5.18 with CONFIG_FPROBE, arm64 6.14.
func Open(opts Options) (_ *Tracer, err error) {
	if opts.Kernel == nil {
		opts.Kernel = kfeat.Load()
	}
	if len(opts.Funcs) == 0 {
		return nil, errors.New("attach: no functions")
	}
	if opts.RingbufSize == 0 {
		opts.RingbufSize = 4 << 20
	}
	if err := ValidateRingbufSize(opts.RingbufSize); err != nil {
		return nil, err
	}
	spec, err := bpfobj.LoadTrace()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	spec.Maps["events"].MaxEntries = opts.RingbufSize
	spec.Maps["funcs"].MaxEntries = uint32(max(len(opts.Funcs)+len(opts.MultiFuncs), 1))
	if err := setFilters(spec, opts.Filters, opts.Strings, opts.Stack); err != nil {
		return nil, err
	}
	t := &Tracer{Mode: opts.Mode}
	defer func() {
		if err != nil {
			t.Close() // detach and free whatever was attached before the failure
		}
	}()
	if err := spec.LoadAndAssign(&t.maps, nil); err != nil {
		return nil, opts.Kernel.Explain(opts.Mode, "", fmt.Errorf("create maps: %w", err))
	}
	for _, f := range append(append([]*symbols.Func{}, opts.Funcs...), opts.MultiFuncs...) {
		fl := FuncFlags(f)
		if opts.Strings {
			fl |= StringFlags(f)
		}
		if err := t.maps.Funcs.Put(f.ID, fl); err != nil {
			return nil, fmt.Errorf("funcs map: %w", err)
		}
	}
	repl := map[string]*ebpf.Map{
		"events": t.maps.Events, "stacks": t.maps.Stacks, "zero_stack": t.maps.ZeroStack,
		"stats": t.maps.Stats, "funcs": t.maps.Funcs, "tgids": t.maps.Tgids, "armed": t.maps.Armed,
	}
	if opts.Filters.Tree {
		var p struct {
			Fork *ebpf.Program `ebpf:"ftp_fork"`
			Exit *ebpf.Program `ebpf:"ftp_exit"`
			Exec *ebpf.Program `ebpf:"ftp_exec"`
		}
		if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_fork/exit/exec (the tree filter)", err)
		}
		t.progs = append(t.progs, p.Fork, p.Exit, p.Exec)
		// Exit first: a process is then forgotten from the moment any
		// process is followed.
		if t.exit, err = link.AttachTracing(link.TracingOptions{Program: p.Exit}); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_exit", err)
		}
		if t.exec, err = link.AttachTracing(link.TracingOptions{Program: p.Exec}); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_exec", err)
		}
		if t.fork, err = link.AttachTracing(link.TracingOptions{Program: p.Fork}); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_fork", err)
		}
	}
	switch opts.Mode {
	case ModeFentry:
		err = t.openFentry(spec, repl, opts)
	case ModeKprobeMulti:
		err = t.openKprobeMulti(spec, repl, opts)
	case ModeKprobe:
		err = t.openKprobe(spec, repl, opts)
	case ModeFSession:
		err = t.openFSession(spec, repl, opts)
	case ModeFentryMulti:
		err = t.openFentryMulti(spec, repl, opts)
	case ModeMixed:
		if opts.MixedTrampoline == ModeFentryMulti {
			t.Mode = ModeFentryMulti + "+" + ModeKprobeMulti
			err = t.openFentryMulti(spec, repl, opts)
		} else {
			err = t.openFentry(spec, repl, opts)
		}
		if err == nil && len(opts.MultiFuncs) > 0 {
			mo := opts
			mo.Funcs = opts.MultiFuncs
			err = t.openKprobeMulti(spec, repl, mo)
		}
	default:
		err = fmt.Errorf("attach: unknown mode %q (want %s, %s, %s, %s or %s)", opts.Mode, ModeFentry, ModeKprobeMulti, ModeKprobe, ModeFSession, ModeFentryMulti)
	}
	if err != nil {
		return nil, err
	}
	// Every link is in place: start recording (see `armed` in trace.bpf.c).
	if err := t.maps.Armed.Put(uint32(0), uint32(1)); err != nil {
		return nil, fmt.Errorf("arm: %w", err)
	}
	return t, nil
}

func setFilters(spec *ebpf.CollectionSpec, f Filters, strs, stack bool) error {
	set := func(name string, v any) error {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("BPF object lacks variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	var comm [16]byte
	if len(f.Comm) > 15 {
		return fmt.Errorf("--comm %q: longer than the kernel's 15-byte comm", f.Comm)
	}
	copy(comm[:], f.Comm)
	b2u8 := func(b bool) uint8 {
		if b {
			return 1
		}
		return 0
	}
	for _, e := range []struct {
		n string
		v any
	}{
		{"filter_tgid", f.TGID}, {"filter_tid", f.TID}, {"filter_tree", b2u8(f.Tree)},
		{"filter_comm_len", uint8(len(f.Comm))}, {"filter_comm", comm},
		{"min_duration_ns", uint64(f.MinDuration.Nanoseconds())}, {"errors_only", b2u8(f.ErrorsOnly)},
		{"want_strings", b2u8(strs)}, {"want_stack", b2u8(stack)},
	} {
		if err := set(e.n, e.v); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tracer) openFentry(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	raiseNofile(4*len(opts.Funcs) + 256) // 2 programs + 2 links per function
	newWorker := func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
		local := spec.Copy()
		cache := btf.NewCache() // per worker: a Cache is not safe for concurrent use
		return func(f *symbols.Func) (progs []*ebpf.Program, links []link.Link, err error) {
			for _, pt := range []struct {
				name string
				at   ebpf.AttachType
				mode string
			}{{"ftp_fentry", ebpf.AttachTraceFEntry, "fentry"}, {"ftp_fexit", ebpf.AttachTraceFExit, "fexit"}} {
				// Entry first: a call in flight when its exit probe
				// arrives then returns "without entry" only if it
				// started before the entry probe, which is counted
				// as in flight, not as a loss.
				local.Programs[pt.name].AttachTo = f.BTFName
				prog, err := loadWithMaps(local, pt.name, repl, cache)
				if err != nil {
					return progs, links, opts.Kernel.Explain(pt.mode, f.Display(), err)
				}
				progs = append(progs, prog)
				l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: pt.at, Cookie: uint64(f.ID)})
				if err != nil {
					return progs, links, opts.Kernel.Explain(pt.mode, f.Display(), err)
				}
				links = append(links, l)
			}
			return progs, links, nil
		}
	}
	return t.perFunction(opts, newWorker)
}

// perFunction attaches opts.Funcs one by one on up to 8 workers, each
// made by newWorker (which may hold per-worker state), keeping the
// programs and links of the functions that attach and recording the
// others in Failed. It fails only when none attaches, with the first
// unsupported/privilege reason if there was one.
func (t *Tracer) perFunction(opts Options, newWorker func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error)) error {
	type result struct {
		f     *symbols.Func
		progs []*ebpf.Program
		links []link.Link
		err   error
	}
	jobs := make(chan *symbols.Func)
	results := make(chan result)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.NumCPU(), 8); w++ {
		wg.Add(1)
		work := newWorker()
		go func() {
			defer wg.Done()
			for f := range jobs {
				r := result{f: f}
				r.progs, r.links, r.err = work(f)
				results <- r
			}
		}()
	}
	go func() {
		for _, f := range opts.Funcs {
			jobs <- f
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	done := 0
	var firstUnsupported error
	for r := range results {
		done++
		if opts.Progress != nil {
			opts.Progress(done, len(opts.Funcs))
		}
		if r.err != nil {
			for _, l := range r.links {
				l.Close()
			}
			for _, p := range r.progs {
				p.Close()
			}
			t.Failed = append(t.Failed, Failure{r.f, r.err})
			if firstUnsupported == nil && (errors.Is(r.err, kfeat.ErrUnsupported) || errors.Is(r.err, kfeat.ErrPrivilege)) {
				firstUnsupported = r.err
			}
			continue
		}
		t.progs = append(t.progs, r.progs...)
		t.links = append(t.links, r.links...)
		t.Attached = append(t.Attached, r.f)
	}
	sort.Slice(t.Attached, func(i, j int) bool { return t.Attached[i].ID < t.Attached[j].ID })
	sort.Slice(t.Failed, func(i, j int) bool { return t.Failed[i].Func.ID < t.Failed[j].Func.ID })
	if len(t.Attached) == 0 {
		if firstUnsupported != nil {
			return firstUnsupported
		}
		return t.Failed[0].Err
	}
	return nil
}

// loadWithMaps loads one program of spec with the tracer's maps.
func loadWithMaps(spec *ebpf.CollectionSpec, name string, repl map[string]*ebpf.Map, cache *btf.Cache) (*ebpf.Program, error) {
	var out *ebpf.Program
	coll := &ebpf.CollectionSpec{
		Maps:      spec.Maps,
		Programs:  map[string]*ebpf.ProgramSpec{name: spec.Programs[name]},
		Variables: spec.Variables,
		Types:     spec.Types,
		ByteOrder: spec.ByteOrder,
	}
	c, err := ebpf.NewCollectionWithOptions(coll, ebpf.CollectionOptions{MapReplacements: repl, Cache: cache})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out = c.DetachProgram(name)
	if out == nil {
		return nil, fmt.Errorf("program %s missing after load", name)
	}
	return out, nil
}

func (t *Tracer) openKprobeMulti(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kmulti"`
		Exit  *ebpf.Program `ebpf:"ftp_kretmulti"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.progs = append(t.progs, p.Entry, p.Exit)
	attach := opts.AttachMulti
	if attach == nil {
		attach = func(prog *ebpf.Program, o link.KprobeMultiOptions, ret bool) (link.Link, error) {
			if ret {
				return link.KretprobeMulti(prog, o)
			}
			return link.KprobeMulti(prog, o)
		}
	}
	// Find the functions the kernel refuses, by bisection, on the entry link.
	tryEntry := func(fs []*symbols.Func) (link.Link, error) {
		return attach(p.Entry, multiOpts(fs), false)
	}
	good, bad, entry, err := Bisect(opts.Funcs, tryEntry)
	if err != nil && len(good) == 0 {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.multi = append(t.multi, entry)
	exit, err := attach(p.Exit, multiOpts(good), true)
	if err != nil {
		return opts.Kernel.Explain("kretprobe.multi", describeFuncs(good), err)
	}
	t.multi = append(t.multi, exit)
	t.addMultiResult(good, bad, "kprobe.multi", opts)
	return nil
}

func (t *Tracer) openKprobe(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kprobe"`
		Exit  *ebpf.Program `ebpf:"ftp_kretprobe"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return opts.Kernel.Explain("kprobe", describeFuncs(opts.Funcs), err)
	}
	t.progs = append(t.progs, p.Entry, p.Exit)
	raiseNofile(2*len(opts.Funcs) + 256)
	var firstUnsupported error
	for i, f := range opts.Funcs {
		if opts.Progress != nil {
			opts.Progress(i+1, len(opts.Funcs))
		}
		if f.Copies > 1 {
			t.Failed = append(t.Failed, Failure{f, fmt.Errorf("%s in kprobe mode: one of %d copies; a kprobe by name reaches only the first (use kprobe-multi)", f.Display(), f.Copies)})
			continue
		}
		ko := &link.KprobeOptions{Cookie: uint64(f.ID)}
		in, err := link.Kprobe(f.Name, p.Entry, ko)
		if err != nil {
			e := opts.Kernel.Explain("kprobe", f.Display(), err)
			t.Failed = append(t.Failed, Failure{f, e})
			if firstUnsupported == nil && (errors.Is(e, kfeat.ErrUnsupported) || errors.Is(e, kfeat.ErrPrivilege)) {
				firstUnsupported = e
				break
			}
			continue
		}
		out, err := link.Kretprobe(f.Name, p.Exit, ko)
		if err != nil {
			in.Close()
			t.Failed = append(t.Failed, Failure{f, opts.Kernel.Explain("kretprobe", f.Display(), err)})
			continue
		}
		t.links = append(t.links, in, out)
		t.Attached = append(t.Attached, f)
	}
	if len(t.Attached) == 0 {
		if firstUnsupported != nil {
			return firstUnsupported
		}
		if len(t.Failed) > 0 {
			return t.Failed[0].Err
		}
	}
	return nil
}

func describeFuncs(fs []*symbols.Func) string {
	if len(fs) == 1 {
		return fs[0].Display()
	}
	return fmt.Sprintf("%d functions", len(fs))
}

func multiOpts(fs []*symbols.Func) link.KprobeMultiOptions {
	o := link.KprobeMultiOptions{}
	for _, f := range fs {
		o.Addresses = append(o.Addresses, uintptr(f.Addr))
		o.Cookies = append(o.Cookies, uint64(f.ID))
	}
	return o
}

// Bisect attaches fs with try; when the whole set fails, it splits it to
// find the functions the kernel refuses, and attaches the rest in one
// link. It returns the attached functions, the refused ones with their
// errors and the link. err is set when nothing could be attached (the
// error of the whole set). A set of n functions with b bad ones costs
// O(b log n) attempts.
func Bisect(fs []*symbols.Func, try func([]*symbols.Func) (link.Link, error)) (good []*symbols.Func, bad []Failure, l link.Link, err error) {
	l, err = try(fs)
	if err == nil {
		return fs, nil, l, nil
	}
	whole := err
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.Errno(524)) || errors.Is(err, kfeat.ErrKernelPredates) {
		return nil, nil, nil, err // the mode itself is missing: bisection cannot help
	}
	var find func([]*symbols.Func)
	find = func(set []*symbols.Func) {
		if len(set) == 0 {
			return
		}
		tl, terr := try(set)
		if terr == nil {
			tl.Close()
			good = append(good, set...)
			return
		}
		if len(set) == 1 {
			bad = append(bad, Failure{set[0], terr})
			return
		}
		find(set[:len(set)/2])
		find(set[len(set)/2:])
	}
	find(fs)
	if len(good) == 0 {
		return nil, bad, nil, whole
	}
	sort.Slice(good, func(i, j int) bool { return good[i].ID < good[j].ID })
	l, err = try(good)
	if err != nil {
		return nil, bad, nil, err
	}
	return good, bad, l, nil
}

// FuncFlags encodes a function's return type for the BPF side (enum
// ftp_func_flags in bpf/trace.bpf.c): bit 0 signed, bit 1 pointer, bit 2
// void, bits 8-15 size in bytes (0 = unknown, keep 64 bits).
func FuncFlags(f *symbols.Func) uint32 {
	if f.Proto == nil {
		return 0
	}
	p := f.Proto
	switch {
	case p.RetKind == symbols.RetVoid:
		return 4
	case p.RetKind == symbols.RetPtr:
		return 2
	}
	fl := p.RetSize << 8
	if p.RetSigned {
		fl |= 1
	}
	return fl
}

// StringArgs returns the indexes of the parameters of f that --strings
// reads: `char *` (any qualifiers) among the first 6, at most StrMax. None
// without a prototype that describes the registers (symbols.Func.ProtoErr:
// no BTF, a struct passed by value, a compiler copy).
func StringArgs(f *symbols.Func) []int {
	if f.Proto == nil || f.ProtoErr != "" {
		return nil
	}
	var out []int
	for i, p := range f.Proto.Params {
		if i >= 6 || len(out) == StrMax {
			break
		}
		if p.Kind == symbols.ArgCharPtr {
			out = append(out, i)
		}
	}
	return out
}

// StringFlags encodes StringArgs for the BPF side: bits 16-18 and 19-21
// hold 1 + the argument index of the first and second string (0 = none).
func StringFlags(f *symbols.Func) uint32 {
	var fl uint32
	for s, i := range StringArgs(f) {
		fl |= uint32(i+1) << (16 + 3*s)
	}
	return fl
}

// Reader opens a ringbuf reader on the events map; the caller closes it.
func (t *Tracer) Reader() (*ringbuf.Reader, error) {
	return ringbuf.NewReader(t.maps.Events)
}

// AddTGID adds a process to the tree filter (Filters.Tree). Its forks are
// followed, and every process of the tree is forgotten when its last
// thread exits.
func (t *Tracer) AddTGID(tgid uint32) error {
	return t.maps.Tgids.Put(tgid, uint8(1)) // FTP_TREE_TRACED
}

// AddTGIDAtExec adds a process to the tree filter from its next exec on
// (tp_btf/sched_process_exec): a launcher's own calls before it execs the
// command are left out. Its forks before that exec wait for their own.
func (t *Tracer) AddTGIDAtExec(tgid uint32) error {
	return t.maps.Tgids.Put(tgid, uint8(2)) // FTP_TREE_AT_EXEC
}

// TreeSize returns how many processes the tree filter follows now
// (entries of the tgids map).
func (t *Tracer) TreeSize() int {
	var k uint32
	var v uint8
	n := 0
	it := t.maps.Tgids.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// Losses counts everything that was not delivered. Calls in flight when
// the trace started or stopped (NoEntry, OpenAtExit) are reported but are
// not losses.
type Losses struct {
	RingbufDrops   uint64 `json:"ringbuf_drops"`        // bpf_ringbuf_reserve failures (ringbuf full)
	NoEntry        uint64 `json:"exits_without_entry"`  // exits with no matching entry frame
	DepthOverflow  uint64 `json:"depth_overflow"`       // entries deeper than the per-thread stack
	Unwound        uint64 `json:"unwound_frames"`       // entries whose own exit was never seen
	StackFull      uint64 `json:"stack_map_full"`       // threads without a stack slot
	EntryHits      uint64 `json:"entry_hits"`           // entries that passed the filters
	ExitHits       uint64 `json:"exit_hits"`            // exits that passed the filters, or whose entry did (a filter decides at entry)
	KprobeMissed   uint64 `json:"kprobe_missed"`        // fprobe missed runs (kprobe.multi link info, 6.7+)
	RecursionMiss  uint64 `json:"recursion_misses"`     // program runs skipped by recursion protection
	OpenAtExit     uint64 `json:"entries_without_exit"` // frames still open when the trace stopped
	StringFaults   uint64 `json:"string_faults"`        // --strings reads that failed (shown as <fault>)
	StackFailures  uint64 `json:"stack_failures"`       // --stack: bpf_get_stack failures (no stack on the record)
	TreeFull       uint64 `json:"tree_not_followed"`    // forked processes of the traced command not followed (tgids map full)
	SkippedFuncs   int    `json:"skipped_functions"`
	FailedAttaches int    `json:"failed_attaches"`
}

// Any reports whether anything was lost: ringbuf drops, fprobe missed
// runs, recursion misses, frames beyond the stack or without a stack slot,
// frames unwound without their own exit (a missed exit probe run), and
// string reads or stacks that failed (the event arrived without them).
func (l Losses) Any() bool {
	return l.RingbufDrops+l.DepthOverflow+l.Unwound+l.StackFull+l.KprobeMissed+l.RecursionMiss+l.StringFaults+l.StackFailures+l.TreeFull > 0
}

// InFlight is the number of calls that were running when the probes were
// attached (exits without entry) or detached (entries without exit).
func (l Losses) InFlight() uint64 { return l.NoEntry + l.OpenAtExit }

// Losses reads the per-CPU counters, link and program miss counts and the
// frames still open.
func (t *Tracer) Losses() (Losses, error) {
	var l Losses
	read := func(idx uint32) uint64 {
		var vals []uint64
		if err := t.maps.Stats.Lookup(idx, &vals); err != nil {
			return 0
		}
		var s uint64
		for _, v := range vals {
			s += v
		}
		return s
	}
	l.RingbufDrops = read(0)
	l.NoEntry = read(1)
	l.DepthOverflow = read(2)
	l.Unwound = read(3)
	l.StackFull = read(4)
	l.EntryHits = read(5)
	l.ExitHits = read(6)
	l.StringFaults = read(7)
	l.StackFailures = read(8)
	l.TreeFull = read(9)
	l.KprobeMissed = t.multiMissed()
	for _, p := range t.progs {
		if st, err := p.Stats(); err == nil {
			l.RecursionMiss += st.RecursionMisses
		}
	}
	var key uint32
	var st bpfobj.TraceTstack
	it := t.maps.Stacks.Iterate()
	for it.Next(&key, &st) {
		l.OpenAtExit += uint64(min(st.Depth, 16)) + uint64(st.Overflow)
	}
	l.FailedAttaches = len(t.Failed)
	return l, nil
}

func (t *Tracer) multiMissed() uint64 {
	var m uint64
	detached := false
	for _, ml := range t.multi {
		if ml == nil {
			detached = true
			continue
		}
		if info, err := ml.Info(); err == nil {
			if km := info.KprobeMulti(); km != nil {
				m += km.Missed
			}
		}
	}
	if detached || len(t.multi) == 0 {
		return t.missed
	}
	return m
}

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
	t.maps.Armed.Put(uint32(0), uint32(0))
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
	})
	return nil
}

func raiseNofile(n int) {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil {
		return
	}
	if r.Cur < uint64(n) {
		r.Cur = min(max(uint64(n), r.Cur), r.Max)
		unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
	}
}
