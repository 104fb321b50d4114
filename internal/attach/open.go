package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Open loads the programs for opts.Mode and attaches them to opts.Funcs.
// Functions that fail individually are recorded in Failed (the multi
// links bisect a failing link to find them); if none attach, Open returns
// an error explained by kfeat.Info.Explain and leaves nothing attached.
// Minimum kernel: fentry+fexit 5.19 (attach cookies), arm64 6.4 (direct
// calls); kprobe.multi+kretprobe.multi 5.18 with CONFIG_FPROBE, arm64
// 6.14; the others as their constants say.
//
// ctx is checked between functions in every phase (load, attach, the
// verification of a DryRun): once it is done, Open closes whatever it
// made and returns an error wrapping context.Cause(ctx) that says how far
// it got (Interrupted).
func Open(ctx context.Context, opts Options) (*Tracer, error) {
	opts.ctx = ctx
	t, err := open(opts, false)
	if err != nil && ctx.Err() == nil && needsHashFrames(err) {
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

// object is the trace object specialized for one Open (plan): its spec
// with the settings frozen, predicates spliced and paths simplified, and
// the --arg/--filter programs to store by function ID.
type object struct {
	spec       *ebpf.CollectionSpec
	variant    string
	xprogs     map[uint32]bpfobj.TraceXprog
	simplified int
	geo        rings.Geometry // the areas map's layout
}

// open runs the phases: plan (the object for opts), load (maps, then the
// programs with their links), attach, activate (armed).
func open(opts Options, hashFrames bool) (_ *Tracer, err error) {
	if opts.ctx == nil {
		opts.ctx = context.Background()
	}
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
	if err := ValidateRingbufSize(uint64(opts.RingbufSize), rings.OnlineSlots()); err != nil {
		return nil, err
	}
	obj, err := plan(&opts, hashFrames)
	if err != nil {
		return nil, err
	}
	t := &Tracer{Mode: opts.Mode, Frames: "task storage", DataPath: obj.variant, Simplified: obj.simplified, detaching: opts.Detaching}
	t.slots.AsCompiled = opts.NoSpecialize
	if hashFrames {
		t.Frames = "hash"
	}
	defer func() {
		if err != nil {
			t.Close() // detach and free whatever was made before the failure
		}
	}()
	if err := opts.interrupted("planning", 0, 0); err != nil {
		return nil, err
	}
	repl, err := t.createMaps(obj, opts)
	if err != nil {
		return nil, err
	}
	total := len(opts.Funcs) + len(opts.MultiFuncs)
	if opts.DryRun {
		err := t.verifyOnly(obj.spec, repl, opts)
		if ierr := opts.interrupted("verifying", t.verifiedFuncs, total); ierr != nil {
			return nil, ierr
		}
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	if !opts.NoEvents {
		t.attachComm(obj.spec, repl, opts.BTF)
	}
	if err := t.attachProcessEvents(obj.spec, repl, opts); err != nil {
		return nil, err
	}
	if opts.Mode == ModeMixed {
		err = t.openMixed(obj.spec, repl, opts)
	} else {
		err = t.openMode(opts.Mode, obj.spec, repl, opts)
	}
	// An error after the context is done is the interruption's (a link
	// or a bisection cut short).
	if ierr := opts.interrupted("attaching", len(t.Attached), total); ierr != nil {
		return nil, ierr
	}
	if err != nil {
		return nil, err
	}
	return t, t.arm()
}

// plan builds the trace object for opts: the variant its settings select,
// the settings frozen, the --arg/--filter programs encoded and their
// predicates spliced (setting opts.predCookie), the paths the settings
// rule out removed.
func plan(opts *Options, hashFrames bool) (*object, error) {
	settings, err := settingsOf(*opts, hashFrames)
	if err != nil {
		return nil, err
	}
	v := variantOf(settings)
	if opts.GeneralObject {
		v = variants[len(variants)-1]
	}
	spec, err := v.load()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	all := append(append([]*symbols.Func{}, opts.Funcs...), opts.MultiFuncs...)
	geo, areaSettings, err := layoutAreas(spec, *opts)
	if err != nil {
		return nil, err
	}
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
	settings = append(settings, areaSettings...)
	if err := setSettings(spec, settings, v.fixed); err != nil {
		return nil, err
	}
	simplified, err := specializeSpec(spec, preds, opts.NoSpecialize)
	if err != nil {
		return nil, err
	}
	return &object{spec: spec, variant: v.name, xprogs: xprogs, simplified: simplified, geo: geo}, nil
}

// createMaps creates every map of obj once, .bss and .rodata included,
// and stores the --arg/--filter programs: each program loaded later
// shares them (armed and the counters live in .bss). It returns the maps
// by name for the program loads.
func (t *Tracer) createMaps(obj *object, opts Options) (map[string]*ebpf.Map, error) {
	spec := obj.spec
	if opts.Aggregate {
		all := append(append([]*symbols.Func{}, opts.Funcs...), opts.MultiFuncs...)
		t.aggFuncs = make([]*symbols.Func, len(all))
		for _, f := range all {
			if int(f.ID) < len(all) {
				t.aggFuncs[f.ID] = f
			}
		}
	}
	var err error
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
	for id, x := range obj.xprogs {
		if err := t.maps.Xprogs.Update(id, &x, ebpf.UpdateAny); err != nil {
			return nil, fmt.Errorf("attach: store the --arg/--filter program of function %d: %w", id, err)
		}
	}
	t.geo = obj.geo
	t.armed, t.stats = t.coll.Variables["armed"], t.coll.Variables["ftp_stats"]
	t.windowExits = t.coll.Variables["window_exits"]
	if t.armed == nil || t.stats == nil {
		return nil, errors.New("BPF object lacks the armed or ftp_stats variable")
	}
	return repl, nil
}

// attachProcessEvents attaches the tp_btf programs of the tree filter
// (fork, exit, exec) and of --entry (exit: threads dying in a window).
func (t *Tracer) attachProcessEvents(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) (err error) {
	if !opts.Filters.Tree && len(opts.Entries) == 0 {
		return nil
	}
	var p struct {
		Fork *ebpf.Program `ebpf:"ftp_fork"`
		Exit *ebpf.Program `ebpf:"ftp_exit"`
		Exec *ebpf.Program `ebpf:"ftp_exec"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return opts.Kernel.Explain("tp_btf", "sched_process_fork/exit/exec (the tree filter, --entry)", err)
	}
	t.progs = append(t.progs, p.Fork, p.Exit, p.Exec)
	// Exit first: a process is then forgotten from the moment any
	// process is followed.
	if t.exit, err = LinkFunc(p.Exit, ebpf.AttachNone, 0); err != nil {
		return opts.Kernel.Explain("tp_btf", "sched_process_exit", err)
	}
	// (--entry alone needs only the exit: threads dying in a window.)
	if opts.Filters.Tree {
		if t.exec, err = LinkFunc(p.Exec, ebpf.AttachNone, 0); err != nil {
			return opts.Kernel.Explain("tp_btf", "sched_process_exec", err)
		}
		if t.fork, err = LinkFunc(p.Fork, ebpf.AttachNone, 0); err != nil {
			return opts.Kernel.Explain("tp_btf", "sched_process_fork", err)
		}
	}
	return nil
}

// arm starts recording once every link is in place (see `armed` in
// trace.bpf.c).
func (t *Tracer) arm() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		t.armedAt = uint64(ts.Nano())
	}
	if err := t.armed.Set(uint32(1)); err != nil {
		return fmt.Errorf("arm: %w", err)
	}
	return nil
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

// loadWithMaps loads one program of spec with the tracer's maps
// (LoadProgram, its target as spec says).
func loadWithMaps(spec *ebpf.CollectionSpec, name string, repl map[string]*ebpf.Map, cache *btf.Cache) (*ebpf.Program, error) {
	return LoadProgram(spec, name, "", repl, cache)
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
