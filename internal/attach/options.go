package attach

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

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
	// ModeAuto is no attach mode: trace and stat pick one (trace's
	// autoOrder); compare refuses it by this name.
	ModeAuto = "auto"
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
	RingbufSize uint32 // bytes of records per CPU; a power of two, ValidateRingbufSize (default 4 MiB)
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
	// GeneralObject loads the general trace object whatever the
	// settings, instead of the variant they select (variantOf): the
	// variants' saving, measured by compare (FTPROBE_OBJECT=general).
	GeneralObject bool
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
	// Detaching, when set, follows the closing of the per-function links
	// (Tracer.Detach, Close, and Open's own when it fails or is
	// interrupted): called with closed 0 before the first, then as each
	// closes, one call at a time. Each fentry link unregisters a
	// trampoline: a few hundred take seconds, minutes under emulation.
	Detaching func(closed, total int)
	// predCookie holds PredCookie by function ID, set by open once the
	// predicates are compiled, before any link (cookie).
	predCookie map[uint32]uint64
	// ctx is Open's context, checked between functions by every phase.
	ctx context.Context
}

// Interrupted is the error of an Open stopped by its context: it wraps
// context.Cause (a signal, for ftprobe's commands) and says how far the
// phase got. Open returns it once everything it made is closed.
type Interrupted struct {
	Cause error
	// Phase is what Open was doing: "planning", "attaching",
	// "verifying" (DryRun).
	Phase string
	// Done of Total functions were attached (verified) when it stopped;
	// Total 0 when the phase is not per function.
	Done, Total int
}

func (e *Interrupted) Error() string {
	s := fmt.Sprintf("%v while %s", e.Cause, e.Phase)
	if e.Total > 0 {
		s += fmt.Sprintf(" %d of %d functions", e.Done, e.Total)
	}
	return s + "; nothing left attached"
}

func (e *Interrupted) Unwrap() error { return e.Cause }

// done reports whether Open's context is done: the phases stop.
func (opts Options) done() bool { return opts.ctx != nil && opts.ctx.Err() != nil }

// interrupted returns an *Interrupted for phase once opts.ctx is done,
// else nil.
func (opts Options) interrupted(phase string, done, total int) error {
	if !opts.done() {
		return nil
	}
	return &Interrupted{Cause: context.Cause(opts.ctx), Phase: phase, Done: done, Total: total}
}

// Failure is one function that could not be attached, with the reason.
type Failure struct {
	Func *symbols.Func
	Err  error
}

// MinRingbufSize and MaxRingbufSize bound the records' buffer of each
// CPU: one element of the areas map's records (FTP_AREA_CHUNK,
// bpf/trace.bpf.c) and 2 GiB.
const (
	MinRingbufSize = uint64(bpfobj.TraceFtpAreaFTP_AREA_CHUNK)
	MaxRingbufSize = 1 << 31
)

// areaElemSize is the size of an element of the areas map: a chunk of
// records and the slack the last one may run into.
const areaElemSize = uint64(bpfobj.TraceFtpAreaFTP_AREA_CHUNK + bpfobj.TraceFtpAreaFTP_AREA_SLACK)

// MaxRingbufSizeFor returns the largest buffer per CPU, a power of two,
// for slots CPU ids (the largest online id + 1): the areas of all of them
// fit one BPF array, under 4 GiB (kernel/bpf/arraymap.c array_map_alloc),
// and each at most MaxRingbufSize.
func MaxRingbufSizeFor(slots int) uint64 {
	n := uint64(MaxRingbufSize)
	for n > MinRingbufSize && !areasFit(n, slots) {
		n >>= 1
	}
	return n
}

// areasFit reports whether the areas of slots CPU ids with perCPU bytes of
// records each (and a control element) fit one BPF array, under 4 GiB
// (kernel/bpf/arraymap.c array_map_alloc).
func areasFit(perCPU uint64, slots int) bool {
	return uint64(max(slots, 1))*(1+perCPU/MinRingbufSize)*areaElemSize < 1<<32-1<<20
}

// ValidateRingbufSize checks that n, the bytes of records per CPU, is a
// power-of-two multiple of MinRingbufSize, at most MaxRingbufSizeFor(slots).
func ValidateRingbufSize(n uint64, slots int) error {
	hi := MaxRingbufSizeFor(slots)
	if n < MinRingbufSize || n&(n-1) != 0 || n > hi {
		return fmt.Errorf("buffer of %d bytes per CPU: must be a power of two from %d (64 KiB) to %d (%s) with %d CPUs", n, MinRingbufSize, hi, SizeText(hi), max(slots, 1))
	}
	return nil
}

// SizeText is n bytes in GiB, MiB or KiB when it is a whole number of them.
func SizeText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
