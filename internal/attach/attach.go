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
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Modes accepted by Open: the trace modes (TraceModes; symbols defines
// the names) and ModeMixed.
const (
	ModeFentryFexit = symbols.ModeFentryFexit // fentry + fexit, >= 5.5 (x86), 6.4 (arm64)
	// ModeFSession attaches one fsession program per function: one
	// trampoline program run at entry and at exit (7.0).
	ModeFSession = symbols.ModeFSession
	// ModeFSessionMulti attaches one fsession.multi link for all
	// functions (7.x).
	ModeFSessionMulti = symbols.ModeFSessionMulti
	// ModeFentryMulti attaches one fentry.multi and one fexit.multi link
	// for all functions (7.x).
	ModeFentryMulti = symbols.ModeFentryMulti
	// ModeKprobeSession attaches one kprobe.session link for all
	// functions: one program run at entry and at return (6.10; ftprobe's
	// program needs 7.0's bpf_session_is_return(ctx)).
	ModeKprobeSession = symbols.ModeKprobeSession
	// ModeKprobeMulti attaches one kprobe.multi and one kretprobe.multi
	// link for all functions, >= 5.18 with CONFIG_FPROBE (arm64: 6.14).
	ModeKprobeMulti = symbols.ModeKprobeMulti
	// ModeKprobe attaches one kprobe and one kretprobe per function
	// (perf-event links, cookies >= 5.15): the fallback where neither
	// trampolines nor fprobe exist, e.g. arm64 before 6.4.
	ModeKprobe = symbols.ModeKprobe
	// ModeMixed attaches Options.Funcs in Options.MixedTrampoline and
	// Options.MultiFuncs in kprobe.session (where it attaches) or
	// kprobe.multi+kretprobe.multi, sharing maps and the ringbuf: auto
	// mode's per-function fallback. The tracer's Mode is the two modes
	// taken, joined by '+'.
	ModeMixed = "mixed"
)

// Event mode values, as the BPF side writes them (enum ftp_mode).
const (
	EventModeFentry        = uint8(bpfobj.TraceFtpModeFTP_MODE_FENTRY)
	EventModeKprobeMulti   = uint8(bpfobj.TraceFtpModeFTP_MODE_KPROBE_MULTI)
	EventModeKprobe        = uint8(bpfobj.TraceFtpModeFTP_MODE_KPROBE)
	EventModeFSession      = uint8(bpfobj.TraceFtpModeFTP_MODE_FSESSION)
	EventModeFentryMulti   = uint8(bpfobj.TraceFtpModeFTP_MODE_FENTRY_MULTI)
	EventModeFSessionMulti = uint8(bpfobj.TraceFtpModeFTP_MODE_FSESSION_MULTI)
	EventModeKprobeSession = uint8(bpfobj.TraceFtpModeFTP_MODE_KPROBE_SESSION)
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

// ErrBadFilter is wrapped by Filters.Validate: a filter value the kernel
// side cannot hold. Bad input.
var ErrBadFilter = errors.New("bad filter")

// CommLen is the kernel's comm size without its NUL (TASK_COMM_LEN - 1).
const CommLen = 15

// Validate checks the filter values that need no kernel: Comm at most
// CommLen bytes (a longer name never equals a task's comm), durations not
// negative. Errors wrap ErrBadFilter.
func (f Filters) Validate() error {
	if len(f.Comm) > CommLen {
		return fmt.Errorf("--comm %q: %w: %d bytes, longer than the kernel's %d-byte comm (TASK_COMM_LEN 16 with its NUL), so no task would match", f.Comm, ErrBadFilter, len(f.Comm), CommLen)
	}
	if f.MinDuration < 0 {
		return fmt.Errorf("--min-duration %s: %w: want 0 (off) or more", f.MinDuration, ErrBadFilter)
	}
	return nil
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
	MultiFuncs []*symbols.Func // ModeMixed: the functions for kprobe.session or kprobe.multi
	// MixedTrampoline is ModeMixed's mode for Funcs: ModeFentryFexit
	// (default), ModeFSessionMulti or ModeFentryMulti.
	MixedTrampoline string
	Filters         Filters
	// Strings reads the `char *` arguments (StringArgs) at entry into the
	// record, up to StrMax strings of StrLen bytes each.
	Strings bool
	// Stack records the kernel stack at entry (up to StackDepth frames).
	Stack bool
	// NoEvents streams no per-call record (aggregation only: Aggregate).
	NoEvents bool
	// LiveEntries sends every entry record when the call starts. By
	// default a call's entry waits in its frame and goes with its exit in
	// one record when nothing traced ran inside it (one ringbuf record per
	// leaf call, bpf/trace.bpf.c leaf_records), or on its own before the
	// first record of a nested call: the events are the same, but a leaf
	// call's entry reaches user space only when it returns. Only on the
	// compact records (not with Strings, Stack, --arg values, or the
	// deferred exits of --min-duration, --errors and --filter on ret).
	LiveEntries bool
	// Aggregate builds per-function tables in BPF maps (Tracer.Aggregates):
	// calls, errors by errno, duration sum, max and histogram.
	Aggregate   bool
	RingbufSize uint32 // bytes; a power-of-two multiple of the page size (default 4 MiB)
	Kernel      *kfeat.Info
	// BTF is the kernel BTF cache shared by every program load (CO-RE,
	// attach targets); symbols.Kernel.BTF passes the one symbol
	// resolution already decoded. nil: one cache for this Open. Each
	// decode of vmlinux BTF costs seconds under arm64 TCG, and a fentry
	// trace would otherwise make one per program load.
	BTF *btf.Cache
	// Progress, when set, is called as functions attach (fentry).
	Progress func(done, total int)
	// Exprs are the compiled --arg/--filter programs by function ID
	// (expr.Set.Compile); functions without one are neither filtered
	// nor given values. Not with Strings or Stack.
	Exprs map[uint32]*expr.Plan
	// DryRun loads every program the mode would attach (the kernel
	// verifies each) and attaches none: Tracer.Verified counts them, and
	// the Tracer only needs Close (trace --dry-run).
	DryRun bool
	// NoSpecialize loads the programs as compiled, without the
	// specializer's rewriting (package specialize: no .rodata inlining,
	// no Simplify, no argument count patched in); the --filter
	// predicates still go in, as the called subprogram
	// (FTPROBE_SPECIALIZE=off).
	NoSpecialize bool
	// Entries are the IDs of the --entry functions: the other functions
	// are recorded only while the same thread is inside a call of one of
	// these (its window); outside they return at entry, counted
	// (Losses.WindowRejected). Empty: every call is recorded.
	Entries map[uint32]bool
	// AttachMulti replaces link.KprobeMulti (tests).
	AttachMulti func(prog *ebpf.Program, opts link.KprobeMultiOptions, ret bool) (link.Link, error)
	// predCookie holds PredCookie by function ID, set by open once the
	// predicates are compiled, before any link (cookie).
	predCookie map[uint32]uint64
}

// Failure is one function that could not be attached, with the reason.
type Failure struct {
	Func *symbols.Func
	Err  error
}

// Tracer holds the loaded programs, maps and links of one trace. The caller
// must Close it; Close detaches every link.
type Tracer struct {
	// Mode is the trace mode attached (ModeMixed: the two modes
	// taken joined by '+', e.g. "fentry+fexit+kprobe.session").
	Mode     string
	Attached []*symbols.Func // attached functions
	Failed   []Failure       // functions left out, with reasons

	maps  bpfobj.TraceMaps
	coll  *ebpf.Collection // every map of the object, .bss and .rodata included
	armed *ebpf.Variable   // armed (.bss)
	// armedAt is CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) just before
	// armed was set: no event is older.
	armedAt uint64
	stats   *ebpf.Variable // ftp_stats (.bss)
	// windowExits counts threads that exited inside an --entry window (.bss).
	windowExits *ebpf.Variable
	aggFuncs    []*symbols.Func // functions of the aggs table, by id
	// Verified is the number of programs loaded by a DryRun.
	Verified int
	// Frames says where the per-thread frame stacks live: "task storage"
	// or, where a program type cannot use it, "hash".
	Frames string
	// DataPath names the BPF object loaded (variants): "lean" (the
	// plain trace), "filter" (records with --filter, --min-duration,
	// --errors or --live-entries), "stat" (tables without records) or
	// "general".
	DataPath string
	// Simplified is the number of instructions of the object's programs
	// that its settings rule out, removed or made nops before load
	// (specialize.Simplify: decided jumps, unreachable paths, dead writes).
	Simplified int
	comm       []link.Link // comm tracking (task_rename, sched_process_exec)
	progs      []*ebpf.Program
	links      []link.Link
	fork       link.Link         // --tree: follows forks into tgids
	exit       link.Link         // --tree: forgets exited processes
	exec       link.Link         // --tree: starts tracing a process added with AddTGIDAtExec at its exec
	multi      []link.Link       // kprobe.multi, kretprobe.multi and kprobe.session links
	tramp      *TrampolineLoader // fsession and the tracing multi links
	closeOnce  sync.Once
	missed     uint64                   // kprobe.multi missed runs read at Detach
	progFunc   map[*ebpf.Program]string // per-function programs: the function
	slots      SlotLoads                // fentry/fexit programs by argument reads (loadForFunc)
}

// ArgReads returns how many per-function trampoline programs (fentry,
// fexit, fsession) read their arguments straight from ctx and how many
// read them through bpf_get_func_arg, as compiled (SlotLoads). Both 0 in
// the other modes.
func (t *Tracer) ArgReads() (direct, compiled int64) {
	return t.slots.Direct.Load(), t.slots.Compiled.Load()
}

// MaxRingbufSize is the largest ringbuf the kernel creates: its size
// (max_entries, a u32) must be a power of two (kernel/bpf/ringbuf.c
// ringbuf_map_alloc).
const MaxRingbufSize = 1 << 31

// ValidateRingbufSize checks that n is a power-of-two multiple of the page
// size, as BPF_MAP_TYPE_RINGBUF requires (kernel/bpf/ringbuf.c), at most
// MaxRingbufSize.
func ValidateRingbufSize(n uint64) error {
	ps := uint64(unix.Getpagesize())
	if n < ps || n&(n-1) != 0 || n > MaxRingbufSize {
		return fmt.Errorf("ringbuf size %d: must be a power-of-two multiple of the page size (%d bytes), from %d to %d (2 GiB)", n, ps, ps, uint64(MaxRingbufSize))
	}
	return nil
}

// Open loads the programs for opts.Mode and attaches them to opts.Funcs.
// Functions that fail individually are recorded in Failed (the multi
// links bisect a failing link to find them); if none attach, Open returns
// an error explained by kfeat.Info.Explain and leaves nothing attached.
// Minimum kernel: fentry+fexit 5.19 (attach cookies), arm64 6.4 (direct
// calls); kprobe.multi+kretprobe.multi 5.18 with CONFIG_FPROBE, arm64
// 6.14; the others as their constants say.
func Open(opts Options) (*Tracer, error) {
	t, err := open(opts, false)
	if err != nil && needsHashFrames(err) {
		// A kprobe program type that cannot use task storage (before
		// 6.2): keep the frames in a hash keyed by tid instead.
		return open(opts, true)
	}
	return t, err
}

// needsHashFrames reports whether a load failed because the program type
// may not call bpf_task_storage_get.
func needsHashFrames(err error) bool {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return strings.Contains(fmt.Sprintf("%+v", ve), "task_storage")
	}
	return strings.Contains(err.Error(), "task_storage")
}

func open(opts Options, hashFrames bool) (_ *Tracer, err error) {
	if opts.Kernel == nil {
		opts.Kernel = kfeat.Load()
	}
	if len(opts.Funcs) == 0 {
		return nil, errors.New("attach: no functions")
	}
	if opts.RingbufSize == 0 {
		opts.RingbufSize = 4 << 20
	}
	if opts.BTF == nil {
		opts.BTF = btf.NewCache() // safe for concurrent use (cilium/ebpf v0.22)
	}
	if err := ValidateRingbufSize(uint64(opts.RingbufSize)); err != nil {
		return nil, err
	}
	settings, err := settingsOf(opts, hashFrames)
	if err != nil {
		return nil, err
	}
	v := variantOf(settings)
	spec, err := v.load()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	all := append(append([]*symbols.Func{}, opts.Funcs...), opts.MultiFuncs...)
	spec.Maps["events"].MaxEntries = opts.RingbufSize
	if opts.Aggregate {
		spec.Maps["aggs"].MaxEntries = uint32(max(len(all), 1))
	}
	if len(opts.Exprs) > 0 {
		for _, p := range opts.Exprs {
			if p != nil && len(p.Values) > 0 && (opts.Strings || opts.Stack) {
				return nil, fmt.Errorf("attach: --arg with --strings or --stack: %w", ErrBadFilter)
			}
		}
		spec.Maps["xprogs"].MaxEntries = uint32(max(len(all), 1))
	}
	fc, err := FaultCounterOf(spec)
	if err != nil {
		return nil, err
	}
	preds, err := expr.CompilePredicates(opts.Exprs, fc)
	if err != nil {
		return nil, fmt.Errorf("attach: compile --filter: %w", err)
	}
	xprogs := map[uint32]bpfobj.TraceXprog{}
	for id, p := range opts.Exprs {
		if p == nil || int(id) >= len(all) {
			continue
		}
		x := p.Encode()
		if preds != nil {
			x.Pentry, x.Pexit = preds.Entry[id], preds.Exit[id]
		}
		xprogs[id] = x
		if c := PredCookie(x); c != 0 {
			if opts.predCookie == nil {
				opts.predCookie = map[uint32]uint64{}
			}
			opts.predCookie[id] = c
		}
	}
	// opts.onlyCookie needs predCookie, set just above.
	settings = append(settings, setting{"only_cookie", opts.onlyCookie(all)}, setting{"only_nargs", onlyNargs(all)})
	if err := setSettings(spec, settings, v.fixed); err != nil {
		return nil, err
	}
	simplified, err := specializeSpec(spec, preds, opts.NoSpecialize)
	if err != nil {
		return nil, err
	}
	t := &Tracer{Mode: opts.Mode, Frames: "task storage", DataPath: v.name, Simplified: simplified}
	t.slots.AsCompiled = opts.NoSpecialize
	if hashFrames {
		t.Frames = "hash"
	}
	if opts.Aggregate {
		t.aggFuncs = make([]*symbols.Func, len(all))
		for _, f := range all {
			if int(f.ID) < len(all) {
				t.aggFuncs[f.ID] = f
			}
		}
	}
	defer func() {
		if err != nil {
			t.Close() // detach and free whatever was attached before the failure
		}
	}()
	// Every map once, .bss and .rodata included: each program loaded
	// later shares them (armed and the counters live in .bss).
	t.coll, err = ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
		Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
	}, ebpf.CollectionOptions{Cache: opts.BTF})
	if err != nil {
		return nil, opts.Kernel.Explain(opts.Mode, "", fmt.Errorf("create maps: %w", err))
	}
	// Every program shares these maps (Assign takes the named ones out
	// of the collection, so they are listed first).
	repl := map[string]*ebpf.Map{}
	for k, v := range t.coll.Maps {
		repl[k] = v
	}
	if err := t.coll.Assign(&t.maps); err != nil {
		return nil, fmt.Errorf("assign maps: %w", err)
	}
	for id, x := range xprogs {
		if err := t.maps.Xprogs.Update(id, &x, ebpf.UpdateAny); err != nil {
			return nil, fmt.Errorf("attach: store the --arg/--filter program of function %d: %w", id, err)
		}
	}
	t.armed, t.stats = t.coll.Variables["armed"], t.coll.Variables["ftp_stats"]
	t.windowExits = t.coll.Variables["window_exits"]
	if t.armed == nil || t.stats == nil {
		return nil, errors.New("BPF object lacks the armed or ftp_stats variable")
	}
	if opts.DryRun {
		if err := t.verifyOnly(spec, repl, opts); err != nil {
			return nil, err
		}
		return t, nil
	}
	if !opts.NoEvents {
		t.attachComm(spec, repl, opts.BTF)
	}
	if opts.Filters.Tree || len(opts.Entries) > 0 {
		var p struct {
			Fork *ebpf.Program `ebpf:"ftp_fork"`
			Exit *ebpf.Program `ebpf:"ftp_exit"`
			Exec *ebpf.Program `ebpf:"ftp_exec"`
		}
		if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_fork/exit/exec (the tree filter, --entry)", err)
		}
		t.progs = append(t.progs, p.Fork, p.Exit, p.Exec)
		// Exit first: a process is then forgotten from the moment any
		// process is followed.
		if t.exit, err = LinkFunc(p.Exit, ebpf.AttachNone, 0); err != nil {
			return nil, opts.Kernel.Explain("tp_btf", "sched_process_exit", err)
		}
		// (--entry alone needs only the exit: threads dying in a window.)
		if opts.Filters.Tree {
			if t.exec, err = LinkFunc(p.Exec, ebpf.AttachNone, 0); err != nil {
				return nil, opts.Kernel.Explain("tp_btf", "sched_process_exec", err)
			}
			if t.fork, err = LinkFunc(p.Fork, ebpf.AttachNone, 0); err != nil {
				return nil, opts.Kernel.Explain("tp_btf", "sched_process_fork", err)
			}
		}
	}
	if opts.Mode == ModeMixed {
		err = t.openMixed(spec, repl, opts)
	} else {
		err = t.openMode(opts.Mode, spec, repl, opts)
	}
	if err != nil {
		return nil, err
	}
	// Every link is in place: start recording (see `armed` in trace.bpf.c).
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		t.armedAt = uint64(ts.Nano())
	}
	if err := t.armed.Set(uint32(1)); err != nil {
		return nil, fmt.Errorf("arm: %w", err)
	}
	return t, nil
}

// openMode attaches opts.Funcs in the trace mode mode.
func (t *Tracer) openMode(mode string, spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	switch mode {
	case ModeFentryFexit:
		return t.openFentry(spec, repl, opts)
	case ModeFSession:
		return t.openFSession(spec, repl, opts)
	case ModeFSessionMulti:
		return t.openFSessionMulti(spec, repl, opts)
	case ModeFentryMulti:
		return t.openFentryMulti(spec, repl, opts)
	case ModeKprobeSession:
		if err := t.openKprobeSession(spec, repl, opts); err != nil {
			return opts.Kernel.Explain(string(PathKprobeSession), describeFuncs(opts.Funcs), err)
		}
		return nil
	case ModeKprobeMulti:
		return t.openKprobeMulti(spec, repl, opts)
	case ModeKprobe:
		return t.openKprobe(spec, repl, opts)
	}
	return fmt.Errorf("attach: unknown mode %q (want %s)", mode, strings.Join(symbols.Modes, ", "))
}

// openMixed attaches opts.Funcs in opts.MixedTrampoline and
// opts.MultiFuncs in one kprobe.session link where the kernel takes it,
// else the kprobe.multi+kretprobe.multi pair, and names the two modes
// taken in t.Mode.
func (t *Tracer) openMixed(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	tramp := opts.MixedTrampoline
	if tramp == "" {
		tramp = ModeFentryFexit
	}
	if !symbols.IsTrampolineMode(tramp) {
		return fmt.Errorf("attach: mixed mode with %q: want a trampoline mode", tramp)
	}
	t.Mode = tramp
	if err := t.openMode(tramp, spec, repl, opts); err != nil || len(opts.MultiFuncs) == 0 {
		return err
	}
	mo := opts
	mo.Funcs = opts.MultiFuncs
	// The kprobe.session program needs 7.0's session kfuncs on ctx: a
	// kernel with the attach type but older kfuncs refuses it, and
	// then the pair does the job.
	if opts.AttachMulti == nil && t.openKprobeSession(spec, repl, mo) == nil {
		t.Mode += "+" + ModeKprobeSession
		return nil
	}
	t.Mode += "+" + ModeKprobeMulti
	return t.openKprobeMulti(spec, repl, mo)
}

// verifyOnly loads every program opts.Mode would attach, per function
// where the program is bound to one, and attaches nothing (DryRun).
func (t *Tracer) verifyOnly(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	keep := func(p *ebpf.Program) {
		t.progs = append(t.progs, p)
		t.Verified++
	}
	plain := func(mode string, fs []*symbols.Func, names ...string) error {
		for _, n := range names {
			p, err := loadWithMaps(spec, n, repl, opts.BTF)
			if err != nil {
				return opts.Kernel.Explain(mode, describeFuncs(fs), err)
			}
			keep(p)
		}
		return nil
	}
	fentry := func(fs []*symbols.Func) error {
		local := spec.Copy()
		cache := opts.BTF
		for _, f := range fs {
			for _, n := range []string{"ftp_fentry", "ftp_fexit"} {
				if n == "ftp_fexit" && f.EntryOnly != "" {
					break
				}
				p, err := loadForFunc(spec.Programs[n], f, &t.slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
					local.Programs[n] = ps
					return loadWithMaps(local, n, repl, cache)
				})
				if err != nil {
					return opts.Kernel.Explain(strings.TrimPrefix(n, "ftp_"), f.Display(), err)
				}
				keep(p)
			}
		}
		return nil
	}
	trampolines := func(mode string, fs []*symbols.Func) error {
		ld, err := t.trampolineLoader(spec, repl, opts.BTF)
		if err != nil {
			return opts.Kernel.Explain(mode, describeFuncs(fs), err)
		}
		load := func(name string, at ebpf.AttachType, target, what string) error {
			p, err := ld.Load(name, at, target)
			if err != nil {
				return opts.Kernel.Explain(mode, what, err)
			}
			keep(p)
			return nil
		}
		if mode == ModeFSession {
			if err := CheckAttachType(AttachTraceFSession); err != nil {
				return opts.Kernel.Explain("fsession", describeFuncs(fs), err)
			}
			for _, f := range fs {
				if f.EntryOnly != "" {
					if err := fentry([]*symbols.Func{f}); err != nil {
						return err
					}
					continue
				}
				p, err := ld.LoadFunc("ftp_fsession", AttachTraceFSession, f)
				if err != nil {
					return opts.Kernel.Explain(mode, f.Display(), err)
				}
				keep(p)
			}
			return nil
		}
		var eo []*symbols.Func
		for _, f := range fs {
			if f.EntryOnly != "" {
				eo = append(eo, f)
			}
		}
		if err := fentry(eo); err != nil {
			return err
		}
		if err := CheckAttachType(AttachTraceFEntryMulti); err != nil {
			return opts.Kernel.Explain("fentry.multi", describeFuncs(fs), err)
		}
		if mode == ModeFSessionMulti {
			if err := CheckAttachType(AttachTraceFSessionMulti); err != nil {
				return opts.Kernel.Explain("fsession.multi", describeFuncs(fs), err)
			}
			return load(progFSessionMulti, AttachTraceFSessionMulti, MultiTarget, describeFuncs(fs))
		}
		if err := load(progFEntryMulti, AttachTraceFEntryMulti, MultiTarget, describeFuncs(fs)); err != nil {
			return err
		}
		return load(progFExitMulti, AttachTraceFExitMulti, MultiTarget, describeFuncs(fs))
	}
	switch opts.Mode {
	case ModeFentryFexit:
		return fentry(opts.Funcs)
	case ModeKprobeSession:
		return plain("kprobe.session", opts.Funcs, "ftp_ksession")
	case ModeKprobeMulti:
		return plain("kprobe.multi", opts.Funcs, "ftp_kmulti", "ftp_kretmulti")
	case ModeKprobe:
		return plain("kprobe", opts.Funcs, "ftp_kprobe", "ftp_kretprobe")
	case ModeFSession, ModeFSessionMulti, ModeFentryMulti:
		return trampolines(opts.Mode, opts.Funcs)
	case ModeMixed:
		return t.verifyMixed(spec, repl, opts)
	}
	return fmt.Errorf("attach: unknown mode %q (want %s)", opts.Mode, strings.Join(symbols.Modes, ", "))
}

// verifyMixed is verifyOnly of ModeMixed: opts.Funcs in
// opts.MixedTrampoline, then opts.MultiFuncs as openMixed attaches them:
// kprobe.session where its program loads, else the kprobe.multi pair.
func (t *Tracer) verifyMixed(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	tramp := opts.MixedTrampoline
	if tramp == "" {
		tramp = ModeFentryFexit
	}
	t.Mode = tramp
	o := opts
	o.Mode = tramp
	if err := t.verifyOnly(spec, repl, o); err != nil || len(opts.MultiFuncs) == 0 {
		return err
	}
	mo := opts
	mo.Funcs, mo.Mode = opts.MultiFuncs, ModeKprobeSession
	if t.verifyOnly(spec, repl, mo) == nil {
		t.Mode += "+" + ModeKprobeSession
		return nil
	}
	t.Mode += "+" + ModeKprobeMulti
	mo.Mode = ModeKprobeMulti
	return t.verifyOnly(spec, repl, mo)
}

// attachComm attaches the comm-tracking tracepoints (task_rename,
// sched_process_exec). Without them a thread renamed after its first
// record keeps its old comm in the output; that is all, so a failure is
// not fatal.
func (t *Tracer) attachComm(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, cache *btf.Cache) {
	var p struct {
		Rename *ebpf.Program `ebpf:"ftp_rename"`
		Exec   *ebpf.Program `ebpf:"ftp_comm_exec"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: cache}); err != nil {
		return
	}
	t.progs = append(t.progs, p.Rename, p.Exec)
	for _, pr := range []*ebpf.Program{p.Rename, p.Exec} {
		if l, err := LinkFunc(pr, ebpf.AttachNone, 0); err == nil {
			t.comm = append(t.comm, l)
		}
	}
}

// setting is one frozen .rodata variable of the trace object and its value.
type setting struct {
	name  string
	value any
}

// settingsOf gives the value of every setting of the trace object for
// opts, in the types of bpf/trace.bpf.c's variables.
func settingsOf(opts Options, hashFrames bool) ([]setting, error) {
	f := opts.Filters
	var comm [16]byte
	if err := f.Validate(); err != nil {
		return nil, err
	}
	copy(comm[:], f.Comm)
	var xe, xx, xv bool
	for _, p := range opts.Exprs {
		if p != nil {
			xe = xe || len(p.EntryOps) > 0
			xx = xx || len(p.ExitOps) > 0
			xv = xv || len(p.Values) > 0
		}
	}
	b2u8 := func(b bool) uint8 {
		if b {
			return 1
		}
		return 0
	}
	return []setting{
		{"filter_tgid", f.TGID}, {"filter_tid", f.TID}, {"filter_tree", b2u8(f.Tree)},
		{"filter_comm_len", uint8(len(f.Comm))}, {"filter_comm", comm},
		{"min_duration_ns", uint64(f.MinDuration.Nanoseconds())}, {"errors_only", b2u8(f.ErrorsOnly)},
		{"want_strings", b2u8(opts.Strings)}, {"want_stack", b2u8(opts.Stack)},
		{"want_events", b2u8(!opts.NoEvents)}, {"want_agg", b2u8(opts.Aggregate)},
		{"frames_in_hash", b2u8(hashFrames)},
		{"x_entry", b2u8(xe)}, {"x_exit", b2u8(xx)}, {"x_vals", b2u8(xv)},
		{"window", b2u8(len(opts.Entries) > 0)},
		// Only records come in leaves: without them it is off, as the
		// stat object fixes it.
		{"leaf_records", b2u8(!opts.LiveEntries && !opts.NoEvents)},
		// Wake the reader (which polls every 100 ms anyway) once a
		// quarter of the ring is unread.
		{"wakeup_bytes", opts.RingbufSize / 4},
		{"entry_only_funcs", b2u8(anyEntryOnly(opts.Funcs) || anyEntryOnly(opts.MultiFuncs))},
	}, nil
}

// variant is one build of bpf/trace.bpf.c: the general object, or one
// whose fixed settings are constants at compile time, so that clang drops
// the paths they rule out (bpf2go TraceLean, TraceFilter, TraceStat in
// gen.go): on arm64 7.3 the lean object's fentry+fexit trace runs about
// 285 instructions per call fewer than the general one's, and the stat
// object's agg body fewer too (compare under icount; docs/benchmarks.md).
type variant struct {
	name  string
	load  func() (*ebpf.CollectionSpec, error)
	fixed map[string]any // setting -> its value there (TestVariantSettings checks each against the object's ftp_fixed_NAME)
}

// variants, the first whose fixed settings the options match is loaded.
var variants = []variant{
	// The plain trace (records, one per leaf call; no --strings,
	// --stack, --filter, --arg, --entry, --min-duration, --errors or
	// tables), frames in task storage. pid, tid, tree and comm filters
	// stay settings.
	{"lean", bpfobj.LoadTraceLean, map[string]any{
		"min_duration_ns": uint64(0), "errors_only": uint8(0),
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(1), "want_agg": uint8(0),
		"frames_in_hash": uint8(0),
		"x_entry":        uint8(0), "x_exit": uint8(0), "x_vals": uint8(0),
		"window":       uint8(0),
		"leaf_records": uint8(1),
	}},
	// Records with --filter, --min-duration, --errors (decided at exit:
	// compare's exit-only body) or --live-entries, frames in task
	// storage.
	{"filter", bpfobj.LoadTraceFilter, map[string]any{
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(1), "want_agg": uint8(0),
		"frames_in_hash": uint8(0),
		"x_vals":         uint8(0),
		"window":         uint8(0),
	}},
	// Tables only (stat, trace --quiet with --summary or --hist): every
	// filter, --filter and --entry stay settings.
	{"stat", bpfobj.LoadTraceStat, map[string]any{
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(0), "want_agg": uint8(1),
		"x_vals":       uint8(0),
		"leaf_records": uint8(0),
	}},
	{"general", bpfobj.LoadTrace, nil},
}

// variantOf returns the variant that serves settings.
func variantOf(settings []setting) variant {
	for _, v := range variants {
		if matches(settings, v.fixed) {
			return v
		}
	}
	return variants[len(variants)-1]
}

func matches(settings []setting, fixed map[string]any) bool {
	for _, st := range settings {
		if v, ok := fixed[st.name]; ok && v != st.value {
			return false
		}
	}
	return true
}

// setSettings writes settings into spec's variables; one the object fixes
// at compile time (fixed, the variant's) must have its value there.
func setSettings(spec *ebpf.CollectionSpec, settings []setting, fixed map[string]any) error {
	for _, st := range settings {
		vs, ok := spec.Variables[st.name]
		if !ok {
			if v, isFixed := fixed[st.name]; isFixed && v == st.value {
				continue
			}
			return fmt.Errorf("BPF object lacks variable %s", st.name)
		}
		if err := vs.Set(st.value); err != nil {
			return fmt.Errorf("set %s: %w", st.name, err)
		}
	}
	return nil
}

func (t *Tracer) openFentry(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	raiseNofile(4*len(opts.Funcs) + 256) // 2 programs + 2 links per function
	newWorker := func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
		local := spec.Copy() // per worker: AttachTo changes per function
		cache := opts.BTF
		return func(f *symbols.Func) (progs []*ebpf.Program, links []link.Link, err error) {
			for _, pt := range []struct {
				name string
				at   ebpf.AttachType
				mode string
			}{{"ftp_fentry", ebpf.AttachTraceFEntry, "fentry"}, {"ftp_fexit", ebpf.AttachTraceFExit, "fexit"}} {
				if pt.at == ebpf.AttachTraceFExit && f.EntryOnly != "" {
					break // the verifier rejects fexit on a noreturn function
				}
				// Entry first: a call in flight when its exit probe
				// arrives then returns "without entry" only if it
				// started before the entry probe, which is counted
				// as in flight, not as a loss.
				prog, err := loadForFunc(spec.Programs[pt.name], f, &t.slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
					local.Programs[pt.name] = ps
					return loadWithMaps(local, pt.name, repl, cache)
				})
				if err != nil {
					return progs, links, opts.Kernel.Explain(pt.mode, f.Display(), err)
				}
				progs = append(progs, prog)
				l, err := LinkFunc(prog, pt.at, opts.cookie(f))
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
		if t.progFunc == nil {
			t.progFunc = map[*ebpf.Program]string{}
		}
		for _, p := range r.progs {
			t.progFunc[p] = r.f.Display()
		}
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

// loadWithMaps loads one program of spec with the tracer's maps
// (LoadProgram, its target as spec says).
func loadWithMaps(spec *ebpf.CollectionSpec, name string, repl map[string]*ebpf.Map, cache *btf.Cache) (*ebpf.Program, error) {
	return LoadProgram(spec, name, "", repl, cache)
}

// openKprobeMulti attaches opts.Funcs with one kprobe.multi and one
// kretprobe.multi link, the functions the kernel refuses found by
// bisection.
func (t *Tracer) openKprobeMulti(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kmulti"`
		Exit  *ebpf.Program `ebpf:"ftp_kretmulti"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.progs = append(t.progs, p.Entry, p.Exit)
	attach := opts.AttachMulti
	if attach == nil {
		attach = linkMulti
	}
	// Find the functions the kernel refuses, by bisection, on the entry link.
	tryEntry := func(fs []*symbols.Func) (link.Link, error) {
		return attach(p.Entry, opts.multiOpts(fs), false)
	}
	good, bad, entry, err := Bisect(opts.Funcs, tryEntry)
	if err != nil && len(good) == 0 {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.multi = append(t.multi, entry)
	// Entry-only functions keep the entry link only: a return probe on a
	// function that never returns would never fire.
	if ex := exitFuncs(good); len(ex) > 0 {
		exit, err := attach(p.Exit, opts.multiOpts(ex), true)
		if err != nil {
			return opts.Kernel.Explain("kretprobe.multi", describeFuncs(ex), err)
		}
		t.multi = append(t.multi, exit)
	}
	t.addMultiResult(good, bad, "kprobe.multi", opts)
	return nil
}

// openKprobeSession attaches one kprobe.session link for opts.Funcs (6.10;
// the program needs the 7.0 bpf_session_is_return(ctx)): one program run
// at entry and at return, and a call rejected at entry has no return run
// at all. It fails leaving nothing attached, with the kernel's error
// unexplained (the caller explains it, or uses the pair).
func (t *Tracer) openKprobeSession(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Prog *ebpf.Program `ebpf:"ftp_ksession"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return err
	}
	try := func(fs []*symbols.Func) (link.Link, error) {
		o := opts.multiOpts(fs)
		o.Session = true
		return linkMulti(p.Prog, o, false)
	}
	good, bad, l, err := Bisect(opts.Funcs, try)
	if err != nil && len(good) == 0 {
		p.Prog.Close()
		return err
	}
	t.progs = append(t.progs, p.Prog)
	t.multi = append(t.multi, l)
	t.addMultiResult(good, bad, "kprobe.session", opts)
	return nil
}

func (t *Tracer) openKprobe(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kprobe"`
		Exit  *ebpf.Program `ebpf:"ftp_kretprobe"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
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
			t.Failed = append(t.Failed, Failure{f, fmt.Errorf("%s in %s mode: one of %d copies; a kprobe by name reaches only the first (use %s or %s)", f.Display(), ModeKprobe, f.Copies, ModeKprobeSession, ModeKprobeMulti)})
			continue
		}
		in, err := LinkKprobe(p.Entry, f.Name, false, opts.cookie(f))
		if err != nil {
			e := opts.Kernel.Explain("kprobe", f.Display(), err)
			t.Failed = append(t.Failed, Failure{f, e})
			if firstUnsupported == nil && (errors.Is(e, kfeat.ErrUnsupported) || errors.Is(e, kfeat.ErrPrivilege)) {
				firstUnsupported = e
				break
			}
			continue
		}
		t.links = append(t.links, in)
		if f.EntryOnly == "" {
			out, err := LinkKprobe(p.Exit, f.Name, true, opts.cookie(f))
			if err != nil {
				in.Close()
				t.links = t.links[:len(t.links)-1]
				t.Failed = append(t.Failed, Failure{f, opts.Kernel.Explain("kretprobe", f.Display(), err)})
				continue
			}
			t.links = append(t.links, out)
		}
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

func (opts Options) multiOpts(fs []*symbols.Func) link.KprobeMultiOptions {
	o := link.KprobeMultiOptions{}
	for _, f := range fs {
		o.Addresses = append(o.Addresses, uintptr(f.Addr))
		o.Cookies = append(o.Cookies, opts.cookie(f))
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

// FlagEntryOnly is FuncFlags' bit for a function traced at entry only
// (symbols.Func.EntryOnly): its entry pushes no frame on the thread's
// stack, since no exit would pop it, and skips the exit run in the
// session modes (FTP_FN_ENTRY_ONLY in bpf/trace.bpf.c).
const FlagEntryOnly = uint32(bpfobj.TraceFtpFuncFlagsFTP_FN_ENTRY_ONLY)

// FuncFlags encodes a function's return type for the BPF side (enum
// ftp_func_flags in bpf/trace.bpf.c): bit 0 signed, bit 1 pointer, bit 2
// void, bit 3 entry only (FlagEntryOnly), bits 8-15 size in bytes (0 =
// unknown, keep 64 bits).
func FuncFlags(f *symbols.Func) uint32 {
	var fl uint32
	if f.EntryOnly != "" {
		fl = FlagEntryOnly
	}
	if f.Proto == nil {
		return fl
	}
	p := f.Proto
	switch {
	case p.RetKind == symbols.RetVoid:
		return fl | 4
	case p.RetKind == symbols.RetPtr:
		return fl | 2
	}
	fl |= p.RetSize << 8
	if p.RetSigned {
		fl |= 1
	}
	return fl
}

// MaxArgs is the number of arguments a record carries at most
// (FTP_MAX_ARGS in bpf/trace.bpf.c).
const MaxArgs = 6

// Cookie is the attach cookie of f (bpf_get_attach_cookie): bits 0-31
// the function id, bits 32-63 its flags: FuncFlags, StringFlags, and in
// bits 24-27 of the flags the number of arguments the kprobe modes read
// from the registers (BTF's count, at most MaxArgs; MaxArgs without BTF).
func Cookie(f *symbols.Func) uint64 {
	n := uint32(MaxArgs)
	if f.Proto != nil && f.ProtoErr == "" {
		n = uint32(min(len(f.Proto.Params), MaxArgs))
	}
	fl := FuncFlags(f) | StringFlags(f) | n<<24
	return uint64(f.ID) | uint64(fl)<<32
}

// FlagWindowEntry is FuncFlags' bit for an --entry function
// (Options.Entries): its calls open the thread's window
// (FTP_FN_WINDOW_ENTRY in bpf/trace.bpf.c).
const FlagWindowEntry = uint32(bpfobj.TraceFtpFuncFlagsFTP_FN_WINDOW_ENTRY)

// PredCookie returns the cookie bits (bits 32-63 already shifted) that
// carry x's entry predicate to the fentry and session programs: its
// xpred program number and pred_nargs, when it reads argument registers
// only and its number fits (ftp_func_pred in bpf/trace.bpf.c); 0
// otherwise, and the programs look it up in xprogs. A rejected fentry+fexit
// call costs 20-45 instructions less with it (arm64 7.3, compare --body
// predicate under icount; docs/benchmarks.md).
func PredCookie(x bpfobj.TraceXprog) uint64 {
	if x.Pentry == 0 || x.EntryRegs == 0 || x.Pentry > uint16(bpfobj.TraceFtpFuncPredFTP_FN_PRED_MAX) || x.PredNargs > MaxArgs {
		return 0
	}
	fl := uint64(x.Pentry)<<bpfobj.TraceFtpFuncPredFTP_FN_PRED_SHIFT | uint64(x.PredNargs)<<bpfobj.TraceFtpFuncPredFTP_FN_PRED_NARGS_SHIFT
	return fl << 32
}

// cookie is Cookie(f) with FlagWindowEntry for the functions of
// o.Entries and the entry predicate's bits (PredCookie).
func (o Options) cookie(f *symbols.Func) uint64 {
	c := Cookie(f) | o.predCookie[f.ID]
	if o.Entries[f.ID] {
		c |= uint64(FlagWindowEntry) << 32
	}
	return c
}

// onlyCookie is the attach cookie of the trace's one function (all), or
// 0 when it has several: bpf/trace.bpf.c's only_cookie, folded into the
// programs before load, so that they do not call bpf_get_attach_cookie
// (in the kprobe modes a bsearch of the link's addresses,
// kernel/trace/bpf_trace.c). Every program of the trace is attached to
// that function only, with this cookie.
func (o Options) onlyCookie(all []*symbols.Func) uint64 {
	if len(all) != 1 {
		return 0
	}
	return o.cookie(all[0])
}

// onlyNargs is bpf/trace.bpf.c's only_nargs (a __u32): the argument
// registers of the trace's one function (all), at most MaxArgs, when its
// BTF prototype maps each parameter to one register (protoRegs), else
// FTP_NARGS_UNKNOWN (bpf_get_func_arg_cnt decides). The trampoline
// programs count the arguments they fetch with it where they may not
// read them from ctx (the multi programs: the kernel checks their ctx
// reads against bpf_multi_func, which has no parameters, 7.3).
func onlyNargs(all []*symbols.Func) uint32 {
	if len(all) != 1 {
		return uint32(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)
	}
	n, ok := protoRegs(all[0])
	if !ok {
		return uint32(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)
	}
	return uint32(n)
}

// anyEntryOnly reports whether fs holds a function traced at entry only
// (symbols.Func.EntryOnly).
func anyEntryOnly(fs []*symbols.Func) bool {
	for _, f := range fs {
		if f.EntryOnly != "" {
			return true
		}
	}
	return false
}

// exitFuncs returns the functions of fs whose exit is hooked: all but the
// entry-only ones (symbols.Func.EntryOnly).
func exitFuncs(fs []*symbols.Func) []*symbols.Func {
	var out []*symbols.Func
	for _, f := range fs {
		if f.EntryOnly == "" {
			out = append(out, f)
		}
	}
	return out
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
func (t *Tracer) TreeSize() int { return len(t.TreeTGIDs()) }

// TreeTGIDs returns the processes (tgids) the tree filter follows now, in
// the tgids map's iteration order.
func (t *Tracer) TreeTGIDs() []uint32 {
	var k uint32
	var v uint8
	var tgids []uint32
	it := t.maps.Tgids.Iterate()
	for it.Next(&k, &v) {
		tgids = append(tgids, k)
	}
	return tgids
}

// ArmedAt is when recording started: CLOCK_MONOTONIC, the clock of the
// records' ts_ns (bpf_ktime_get_ns), in ns, read just before the programs
// were armed, so no event is older (0 if the clock could not be read).
// Since leaf records (Options.LiveEntries unset), a call's entry can
// arrive after another thread's later event: relative times count from
// here, not from the first event delivered.
func (t *Tracer) ArmedAt() uint64 { return t.armedAt }

// Losses counts everything that was not delivered. Calls in flight when
// the trace started or stopped (NoEntry, OpenAtExit) are reported but are
// not losses. The counts that are not losses (hits, rejected calls,
// skipped functions) are left out of its JSON: the trace summary carries
// them at its top level.
type Losses struct {
	RingbufDrops   uint64 `json:"ringbuf_drops"`        // events lost to a full ringbuf (a leaf call's record holds two)
	NoEntry        uint64 `json:"exits_without_entry"`  // exits with no matching entry frame
	DepthOverflow  uint64 `json:"depth_overflow"`       // entries deeper than the per-thread stack
	Unwound        uint64 `json:"unwound_frames"`       // entries whose own exit was never seen
	StackFull      uint64 `json:"stack_map_full"`       // threads without a stack slot
	EntryHits      uint64 `json:"-"`                    // entries that passed the filters
	ExitHits       uint64 `json:"-"`                    // exits that passed the filters, or whose entry did (a filter decides at entry)
	KprobeMissed   uint64 `json:"kprobe_missed"`        // fprobe missed runs (kprobe.multi link info, 6.7+)
	RecursionMiss  uint64 `json:"recursion_misses"`     // program runs skipped by recursion protection
	OpenAtExit     uint64 `json:"entries_without_exit"` // frames still open when the trace stopped
	StringFaults   uint64 `json:"string_faults"`        // --strings reads that failed (shown as <fault>)
	StackFailures  uint64 `json:"stack_failures"`       // --stack: bpf_get_stack failures (no stack on the record)
	TreeFull       uint64 `json:"tree_not_followed"`    // forked processes of the traced command not followed (tgids map full)
	ErrnoFull      uint64 `json:"errno_not_counted"`    // errors whose errno the aggregation could not count (errs map full)
	FilterRejects  uint64 `json:"-"`                    // calls --filter rejected (not a loss)
	ExprFaults     uint64 `json:"expr_faults"`          // --arg/--filter reads that faulted (<fault>, or the comparison false)
	WindowRejected uint64 `json:"-"`                    // --entry: calls outside every entry function's window (not a loss)
	WindowExits    uint64 `json:"-"`                    // --entry: threads that exited inside a window (not a loss)
	SkippedFuncs   int    `json:"-"`
	FailedAttaches int    `json:"failed_attaches"` // functions that matched but failed to attach
}

// Any reports whether anything was lost: ringbuf drops, fprobe missed
// runs, recursion misses, frames beyond the stack or without a stack slot,
// frames unwound without their own exit (a missed exit probe run), and
// string reads, --arg/--filter reads or stacks that failed (the event
// arrived without them).
func (l Losses) Any() bool {
	return l.RingbufDrops+l.DepthOverflow+l.Unwound+l.StackFull+l.KprobeMissed+l.RecursionMiss+l.StringFaults+l.StackFailures+l.TreeFull+l.ErrnoFull+l.ExprFaults > 0
}

// InFlight is the number of calls that were running when the probes were
// attached (exits without entry) or detached (entries without exit).
func (l Losses) InFlight() uint64 { return l.NoEntry + l.OpenAtExit }

// statsRows mirrors ftp_stats in bpf/trace.bpf.c: FTP_NCPU rows of
// FTP_STAT_STRIDE counters.
type statsRows [512][16]uint64

// Counters sums the BPF counters over the CPUs, indexed by
// bpfobj.TraceFtpStat.
func (t *Tracer) Counters() ([bpfobj.TraceFtpStatFTP_STAT_MAX]uint64, error) {
	var out [bpfobj.TraceFtpStatFTP_STAT_MAX]uint64
	var rows statsRows
	if t.stats == nil {
		return out, errors.New("tracer is closed")
	}
	if err := t.stats.Get(&rows); err != nil {
		return out, fmt.Errorf("read counters: %w", err)
	}
	for _, r := range rows {
		for i := range out {
			out[i] += r[i]
		}
	}
	return out, nil
}

// Losses reads the counters, link and program miss counts and the frames
// still open.
func (t *Tracer) Losses() (Losses, error) {
	var l Losses
	c, err := t.Counters()
	if err != nil {
		return l, err
	}
	l.RingbufDrops = c[bpfobj.TraceFtpStatFTP_STAT_RINGBUF_DROP]
	l.NoEntry = c[bpfobj.TraceFtpStatFTP_STAT_NO_ENTRY]
	l.DepthOverflow = c[bpfobj.TraceFtpStatFTP_STAT_DEPTH_OVERFLOW]
	l.Unwound = c[bpfobj.TraceFtpStatFTP_STAT_UNWOUND]
	l.StackFull = c[bpfobj.TraceFtpStatFTP_STAT_STACK_FULL]
	l.EntryHits = c[bpfobj.TraceFtpStatFTP_STAT_ENTRY_HITS]
	l.ExitHits = c[bpfobj.TraceFtpStatFTP_STAT_EXIT_HITS]
	l.StringFaults = c[bpfobj.TraceFtpStatFTP_STAT_STR_FAULT]
	l.StackFailures = c[bpfobj.TraceFtpStatFTP_STAT_STACK_FAIL]
	l.TreeFull = c[bpfobj.TraceFtpStatFTP_STAT_TREE_FULL]
	l.ErrnoFull = c[bpfobj.TraceFtpStatFTP_STAT_AGG_FULL]
	l.FilterRejects = c[bpfobj.TraceFtpStatFTP_STAT_X_REJECT]
	l.ExprFaults = c[bpfobj.TraceFtpStatFTP_STAT_X_FAULT]
	l.WindowRejected = c[bpfobj.TraceFtpStatFTP_STAT_WINDOW_REJECT]
	if t.windowExits != nil {
		if err := t.windowExits.Get(&l.WindowExits); err != nil {
			return l, fmt.Errorf("read window_exits: %w", err)
		}
	}
	l.KprobeMissed = t.multiMissed()
	for _, p := range t.progs {
		if st, err := p.Stats(); err == nil {
			l.RecursionMiss += st.RecursionMisses
		}
	}
	// Frames pushed (entries with a frame stack) and not closed (exits
	// that found their frame, and frames unwound) are still open.
	noFrame := c[bpfobj.TraceFtpStatFTP_STAT_STACK_FULL] + c[bpfobj.TraceFtpStatFTP_STAT_ENTRY_ONLY]
	pushed := l.EntryHits - min(noFrame, l.EntryHits)
	closed := l.ExitHits - min(l.NoEntry, l.ExitHits) + l.Unwound
	if pushed > closed {
		l.OpenAtExit = pushed - closed
	}
	l.FailedAttaches = len(t.Failed)
	return l, nil
}

// RecursionMisses returns the nonzero recursion misses (program runs the
// kernel skipped because the same program was already running on that
// CPU, prog stats, 5.12+) per program: its name, and for a per-function
// program (fentry, fsession) the function, e.g. "ftp_fentry (do_exit)".
func (t *Tracer) RecursionMisses() map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range t.progs {
		st, err := p.Stats()
		if err != nil || st.RecursionMisses == 0 {
			continue
		}
		name := "?"
		if info, err := p.Info(); err == nil {
			name = info.Name
		}
		if fn := t.progFunc[p]; fn != "" {
			name += " (" + fn + ")"
		}
		out[name] += st.RecursionMisses
	}
	return out
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

// FuncAgg is one function's in-kernel table (Options.Aggregate).
type FuncAgg struct {
	Func *symbols.Func
	Agg  bpfobj.TraceAgg
	Errs map[int32]uint64 // return value (negative errno) -> calls
}

// Timed is the number of calls with a duration: the histogram's total
// (struct agg keeps no separate count).
func (a FuncAgg) Timed() uint64 {
	var n uint64
	for _, c := range a.Agg.Hist {
		n += c
	}
	return n
}

// Calls is every counted call: timed ones and those without a recorded
// entry.
func (a FuncAgg) Calls() uint64 { return a.Agg.Untimed + a.Timed() }

// Aggregates reads the per-function tables the BPF side built
// (Options.Aggregate): calls, errors and the duration histogram from the
// aggs array, errors by value from the errs hash. Functions without calls
// are left out. It fails when the tracer was opened without Aggregate.
func (t *Tracer) Aggregates() ([]FuncAgg, error) {
	if t.aggFuncs == nil || t.maps.Aggs == nil {
		return nil, errors.New("attach: tracer opened without Aggregate")
	}
	var out []FuncAgg
	byID := map[uint32]int{}
	for id, f := range t.aggFuncs {
		if f == nil {
			continue
		}
		var a bpfobj.TraceAgg
		if err := t.maps.Aggs.Lookup(uint32(id), &a); err != nil {
			return nil, fmt.Errorf("read aggs[%d]: %w", id, err)
		}
		if (FuncAgg{Agg: a}).Calls() == 0 {
			continue
		}
		byID[uint32(id)] = len(out)
		out = append(out, FuncAgg{Func: f, Agg: a, Errs: map[int32]uint64{}})
	}
	var k bpfobj.TraceErrkey
	var n uint64
	it := t.maps.Errs.Iterate()
	for it.Next(&k, &n) {
		if i, ok := byID[k.FuncId]; ok {
			out[i].Errs[k.Err] += n
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read errs: %w", err)
	}
	return out, nil
}

// FaultCounterOf is where the compiled --filter predicates of spec (the
// trace object, bpfobj.LoadTrace) count a faulted read: this CPU's
// FTP_STAT_X_FAULT counter in ftp_stats (statsRows' layout).
func FaultCounterOf(spec *ebpf.CollectionSpec) (expr.FaultCounter, error) {
	v := spec.Variables["ftp_stats"]
	var rows statsRows
	if v == nil || int(v.Size()) != int(unsafe.Sizeof(rows)) {
		return expr.FaultCounter{}, errors.New("BPF object lacks ftp_stats of the expected size")
	}
	return expr.FaultCounter{Map: v.SectionName, Off: v.Offset + uint32(bpfobj.TraceFtpStatFTP_STAT_X_FAULT)*8,
		Rows: uint32(len(rows)), RowBytes: uint32(len(rows[0]) * 8)}, nil
}
