package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// recorded loads a recorded kernel's symbols (internal/symbols/testdata).
func recorded(t *testing.T, name string) *symbols.Kernel {
	t.Helper()
	k, _, err := symbols.LoadRecorded(filepath.Join("..", "symbols", "testdata", name))
	require.NoError(t, err)
	return k
}

// fakeKernel is a kernel's attach types and what its attach.Open does:
// it refuses the modes in refuse and opens the others, recording each
// call.
type fakeKernel struct {
	types  map[string]bool
	refuse map[string]error
	calls  []attach.Options
}

func (f *fakeKernel) has(at string) bool { return f.types[at] }

func (f *fakeKernel) open(ctx context.Context, o attach.Options) (*attach.Tracer, error) {
	f.calls = append(f.calls, o)
	if err := f.refuse[o.Mode]; err != nil {
		return nil, err
	}
	mode := o.Mode
	if mode == attach.ModeMixed {
		// As attach.Open names a mixed trace: the two modes taken.
		mode = o.MixedTrampoline + "+" + attach.ModeKprobeMulti
		if f.types["BPF_TRACE_KPROBE_SESSION"] {
			mode = o.MixedTrampoline + "+" + attach.ModeKprobeSession
		}
	}
	return &attach.Tracer{Mode: mode, Attached: append(append([]*symbols.Func{}, o.Funcs...), o.MultiFuncs...)}, nil
}

func (f *fakeKernel) modes() []string {
	var m []string
	for _, c := range f.calls {
		m = append(m, c.Mode)
	}
	return m
}

// unsupportedErr is what attach.Open says of a mode this kernel lacks.
func unsupportedErr(what string) error { return fmt.Errorf("%s: %w", what, kfeat.ErrUnsupported) }

// testPlan plans o on a recorded kernel against fk; it returns the log.
func testPlan(t *testing.T, kernel string, o Options, fk *fakeKernel) (*attach.Tracer, *symbols.Resolution, string, error) {
	var log bytes.Buffer
	o.Log = &log
	p := &planner{o: o, k: recorded(t, kernel), kin: &kfeat.Info{}, has: fk.has, open: fk.open}
	tr, res, err := p.plan(context.Background())
	return tr, res, log.String(), err
}

func names(fs []*symbols.Func) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Display())
	}
	return out
}

// TestAutoPicksFentry: a few functions fentry takes go through fentry,
// the cheaper per call, on every recorded kernel.
func TestAutoPicksFentry(t *testing.T) {
	for _, kernel := range []string{"amd64-7.3", "arm64-7.3", "arm64-6.12"} {
		t.Run(kernel, func(t *testing.T) {
			fk := &fakeKernel{}
			tr, res, log, err := testPlan(t, kernel, Options{Patterns: []string{"vfs_*"}, Excludes: []string{"vfs_write"}}, fk)
			require.NoError(t, err)
			assert.Equal(t, "fentry+fexit", tr.Mode)
			assert.Equal(t, []string{"vfs_read"}, names(res.Funcs), "vfs_write excluded")
			assert.Equal(t, "ftprobe: auto mode picked fentry+fexit for 1 function: fentry/fexit trampolines cost less per call\n", log)
			assert.Equal(t, []string{"fentry+fexit"}, fk.modes())
			c := fk.calls[0]
			assert.Equal(t, res.Funcs, c.Funcs)
			assert.False(t, c.Aggregate)
		})
	}
}

// TestAutoKernelTypes: where the kernel has fsession it goes first (when
// fentry takes every function), and the tracing multi links before it,
// fsession.multi before fentry.multi+fexit.multi.
func TestAutoKernelTypes(t *testing.T) {
	fk := &fakeKernel{types: map[string]bool{"BPF_TRACE_FSESSION": true}}
	tr, _, log, err := testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read", "vfs_write"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFSession, tr.Mode)
	assert.Equal(t, "ftprobe: auto mode picked fsession for 2 functions: fsession: one trampoline program per function for entry and exit, half of fentry+fexit's programs and links\n", log)

	fk = &fakeKernel{types: map[string]bool{"BPF_TRACE_FSESSION": true, "BPF_TRACE_FENTRY_MULTI": true}}
	tr, _, log, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFentryMulti, tr.Mode)
	assert.Contains(t, log, "auto mode picked fentry.multi+fexit.multi for 1 function: this kernel has tracing multi links")

	fk = &fakeKernel{types: map[string]bool{"BPF_TRACE_FSESSION": true, "BPF_TRACE_FENTRY_MULTI": true, "BPF_TRACE_FSESSION_MULTI": true}}
	tr, _, _, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFSessionMulti, tr.Mode)

	// The links refused (arm64 7.3): the next in order, said briefly,
	// and why with --verbose.
	fk.calls, fk.refuse = nil, map[string]error{attach.ModeFSessionMulti: unsupportedErr("fsession.multi"), attach.ModeFentryMulti: unsupportedErr("tracing multi link")}
	tr, _, log, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFSession, tr.Mode)
	assert.Equal(t, "ftprobe: auto mode picked fsession for 1 function; fsession.multi, fentry.multi+fexit.multi unavailable here (--verbose says why)\n", log)
	assert.Equal(t, []string{"fsession.multi", "fentry.multi+fexit.multi", "fsession"}, fk.modes())

	fk.calls = nil
	fk.refuse[attach.ModeFSession] = unsupportedErr("fsession")
	tr, _, log, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}, Verbose: true}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFentryFexit, tr.Mode)
	assert.Contains(t, log, "ftprobe: auto mode picked fentry+fexit for 1 function; unavailable here: fsession.multi: unsupported on this kernel; tracing multi link: unsupported on this kernel; fsession: unsupported on this kernel\n")
	assert.Contains(t, log, "ftprobe: plan (fentry+fexit mode):\n  trace vfs_read")
}

// TestAutoSessionThenPair: a session mode refused for any reason (not
// only an unsupported one) sends auto to its pair, which does its job; a
// mode without a pair after it fails the trace on such an error.
func TestAutoSessionThenPair(t *testing.T) {
	verifier := errors.New("kprobe.session: the BPF verifier of this kernel rejected ftprobe's kprobe.session program")
	fk := &fakeKernel{types: map[string]bool{"BPF_TRACE_KPROBE_SESSION": true}, refuse: map[string]error{attach.ModeKprobeSession: verifier}}
	tr, _, log, err := testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read", "_printk"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeKprobeMulti, tr.Mode)
	assert.Equal(t, []string{"kprobe.session", "kprobe.multi+kretprobe.multi"}, fk.modes())
	assert.Equal(t, "ftprobe: auto mode picked kprobe.multi+kretprobe.multi for 2 functions; kprobe.session unavailable here (--verbose says why)\n", log)

	fk = &fakeKernel{types: map[string]bool{"BPF_TRACE_FENTRY_MULTI": true, "BPF_TRACE_FSESSION_MULTI": true}, refuse: map[string]error{attach.ModeFSessionMulti: errors.New("fsession.multi: EINVAL")}}
	tr, _, _, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFentryMulti, tr.Mode)

	fk = &fakeKernel{refuse: map[string]error{attach.ModeKprobeMulti: verifier}}
	_, _, _, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read", "_printk"}}, fk)
	assert.Equal(t, verifier, err)
	assert.Equal(t, []string{"kprobe.multi+kretprobe.multi"}, fk.modes())
}

// TestAutoOrder: the documented order, from fentry's resolution and the
// kernel's attach types.
func TestAutoOrder(t *testing.T) {
	none := func(string) bool { return false }
	all := func(string) bool { return true }
	session := func(at string) bool { return at == "BPF_TRACE_KPROBE_SESSION" }
	few := &symbols.Resolution{Funcs: make([]*symbols.Func, autoFentryLimit)}
	many := &symbols.Resolution{Funcs: make([]*symbols.Func, autoFentryLimit+1)}
	skips := &symbols.Resolution{Funcs: make([]*symbols.Func, 3), Skipped: make([]*symbols.Func, 1)}
	for _, c := range []struct {
		res   *symbols.Resolution
		errF  error
		has   func(string) bool
		order string
		why   string
	}{
		{few, nil, none, "fentry+fexit kprobe.multi+kretprobe.multi kprobe+kretprobe", "fentry/fexit trampolines cost less per call"},
		{many, nil, none, "kprobe.multi+kretprobe.multi fentry+fexit kprobe+kretprobe", "one kprobe.multi+kretprobe.multi link attaches many functions in one syscall"},
		{many, nil, session, "kprobe.session kprobe.multi+kretprobe.multi fentry+fexit kprobe+kretprobe", "one kprobe.session link attaches many functions in one syscall"},
		{nil, symbols.ErrUntraceable, all, "kprobe.session kprobe.multi+kretprobe.multi fentry+fexit kprobe+kretprobe", "not every function can take fentry"},
		{few, nil, all, "fsession.multi fentry.multi+fexit.multi fsession fentry+fexit kprobe.session kprobe.multi+kretprobe.multi kprobe+kretprobe", "this kernel has tracing multi links: trampoline per-call cost, all functions attached with one link"},
		{many, nil, all, "fsession.multi fentry.multi+fexit.multi kprobe.session kprobe.multi+kretprobe.multi fentry+fexit kprobe+kretprobe", "this kernel has tracing multi links: trampoline per-call cost, all functions attached with one link"},
		{many, nil, func(at string) bool { return at == "BPF_TRACE_FENTRY_MULTI" }, "fentry.multi+fexit.multi kprobe.multi+kretprobe.multi fentry+fexit kprobe+kretprobe", "this kernel has tracing multi links: trampoline per-call cost, all functions attached with one link"},
		{skips, nil, func(at string) bool { return at == "BPF_TRACE_FSESSION" }, "fentry+fexit kprobe.multi+kretprobe.multi kprobe+kretprobe", "fentry/fexit trampolines cost less per call"},
	} {
		order, why := autoOrder(c.res, c.errF, c.has)
		assert.Equal(t, c.order, strings.Join(order, " "))
		assert.Equal(t, c.why, why)
	}
}

// TestAutoMixed: the functions fentry cannot take go through one
// kprobe.session (or kprobe.multi) link, the others through trampolines,
// with the reasons counted; without kprobe.multi, fentry alone with its
// skips.
func TestAutoMixed(t *testing.T) {
	fk := &fakeKernel{}
	tr, res, log, err := testPlan(t, "amd64-7.3", Options{Patterns: []string{"unregister_vclock"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, "fentry+fexit+kprobe.multi+kretprobe.multi", tr.Mode)
	assert.Equal(t, attach.ModeMixed, fk.calls[0].Mode)
	require.Len(t, fk.calls, 1)
	c := fk.calls[0]
	assert.Equal(t, attach.ModeFentryFexit, c.MixedTrampoline)
	require.Len(t, c.Funcs, 1)
	require.Len(t, c.MultiFuncs, 1)
	assert.Less(t, c.Funcs[0].Addr, c.MultiFuncs[0].Addr, "the trampoline takes the copy the kernel resolves")
	assert.Equal(t, []uint32{0, 1}, []uint32{c.Funcs[0].ID, c.MultiFuncs[0].ID}, "one id space")
	assert.Equal(t, "ftprobe: auto mode: 1 function through fentry+fexit trampolines (cheaper per call), 1 through kprobe.multi+kretprobe.multi because fentry+fexit cannot take them: 1 another copy: a trampoline attaches by name to the copy the kernel resolves\n", log)
	assert.Equal(t, tr.Mode, res.Mode)
	assert.Len(t, res.Funcs, 2)
	assert.Empty(t, res.Skipped)

	// Every function of the kernel: the reasons are counted and sorted.
	fk = &fakeKernel{types: map[string]bool{"BPF_TRACE_KPROBE_SESSION": true}}
	_, res, log, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"*"}}, fk)
	require.NoError(t, err)
	require.Len(t, fk.calls, 1)
	c = fk.calls[0]
	assert.Equal(t, len(c.Funcs)+len(c.MultiFuncs), len(res.Funcs))
	assert.Regexp(t, fmt.Sprintf(`^ftprobe: auto mode: %d functions through fentry\+fexit trampolines \(cheaper per call\), %d through kprobe.session because fentry\+fexit cannot take them: `, len(c.Funcs), len(c.MultiFuncs)), log)
	assert.Contains(t, log, " varargs prototype")
	for _, f := range c.MultiFuncs {
		assert.NotContains(t, names(c.Funcs), f.Display())
	}

	// kprobe.multi missing here: fentry alone, its skips in the plan.
	fk = &fakeKernel{refuse: map[string]error{attach.ModeMixed: unsupportedErr("kprobe.multi")}}
	tr, res, log, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"unregister_vclock"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeFentryFexit, tr.Mode)
	assert.Len(t, res.Funcs, 1)
	assert.Len(t, res.Skipped, 1)
	assert.Equal(t, []string{attach.ModeMixed, attach.ModeFentryFexit}, fk.modes())
	assert.Equal(t, "ftprobe: auto mode picked fentry+fexit for 1 function: fentry/fexit trampolines cost less per call\n", log)

	// Any other failure of the mixed open is the trace's.
	fk = &fakeKernel{refuse: map[string]error{attach.ModeMixed: errors.New("load programs: permission denied")}}
	_, _, _, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"unregister_vclock"}}, fk)
	assert.EqualError(t, err, "load programs: permission denied")

	// --max-functions counts both parts.
	fk = &fakeKernel{}
	_, _, _, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"unregister_vclock"}, MaxFunctions: 1}, fk)
	require.Error(t, err)
	assert.ErrorIs(t, err, symbols.ErrTooMany)
	assert.EqualError(t, err, "trace: too many functions: 2 functions, more than --max-functions 1")
	cl, _ := ClassOf(err)
	assert.Equal(t, ClassBadInput, cl)
	assert.Empty(t, fk.calls)
}

// TestAutoFentryCannot: a named function fentry cannot take sends auto
// mode to kprobe.multi first.
func TestAutoFentryCannot(t *testing.T) {
	fk := &fakeKernel{}
	tr, res, log, err := testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read", "_printk"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeKprobeMulti, tr.Mode)
	assert.Equal(t, []string{"vfs_read", "_printk"}, names(res.Funcs))
	assert.Equal(t, "ftprobe: auto mode picked kprobe.multi+kretprobe.multi for 2 functions: not every function can take fentry\n", log)

	// Neither multi mode here: kprobe.
	fk = &fakeKernel{refuse: map[string]error{attach.ModeKprobeMulti: unsupportedErr("kprobe.multi")}}
	tr, _, log, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read", "_printk"}}, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeKprobe, tr.Mode)
	assert.Equal(t, []string{"kprobe.multi+kretprobe.multi", "kprobe+kretprobe"}, fk.modes(), "fentry cannot resolve: not tried")
	assert.Equal(t, "ftprobe: auto mode picked kprobe+kretprobe for 2 functions; kprobe.multi+kretprobe.multi unavailable here (--verbose says why)\n", log)

	// No mode at all.
	fk = &fakeKernel{refuse: map[string]error{attach.ModeKprobeMulti: unsupportedErr("kprobe.multi"), attach.ModeKprobe: unsupportedErr("kprobe")}}
	_, _, _, err = testPlan(t, "amd64-7.3", Options{Patterns: []string{"vfs_read", "_printk"}}, fk)
	assert.EqualError(t, err, "kprobe.multi: unsupported on this kernel")
	assert.Equal(t, ClassUnsupported, classOf(classify(err)))
}

func classOf(err error) Class {
	c, _ := ClassOf(err)
	return c
}

// TestPlanErrors: patterns that match nothing, or nothing traceable, and
// excludes that leave nothing, are bad input naming the pattern.
func TestPlanErrors(t *testing.T) {
	for _, c := range []struct {
		o    Options
		is   error
		want string
	}{
		{Options{Patterns: []string{"nosuch"}}, symbols.ErrNoMatch, `trace: no such function "nosuch": not in kallsyms`},
		{Options{Patterns: []string{"nosuch"}, Mode: "kprobe+kretprobe"}, symbols.ErrNoMatch, `trace: no such function "nosuch": not in kallsyms`},
		{Options{Patterns: []string{"srso_alias_untrain_ret"}}, symbols.ErrUntraceable, "trace: function cannot be traced: srso_alias_untrain_ret in kprobe.multi+kretprobe.multi mode: not in available_filter_functions (notrace, inlined or not patchable)"},
		{Options{Patterns: []string{"_printk"}, Mode: "fentry+fexit"}, symbols.ErrUntraceable, "trace: function cannot be traced: _printk in fentry+fexit mode: varargs prototype (BPF trampolines reject variadic functions)"},
		{Options{Patterns: []string{"vfs_*"}, Excludes: []string{"vfs_*"}}, nil, ""},
		{Options{Patterns: []string{"vfs_*"}, MaxFunctions: 1}, symbols.ErrTooMany, ""},
	} {
		fk := &fakeKernel{}
		_, _, _, err := testPlan(t, "amd64-7.3", c.o, fk)
		require.Error(t, err, "%+v", c.o)
		assert.Equal(t, ClassBadInput, classOf(err), err)
		if c.is != nil {
			assert.ErrorIs(t, err, c.is)
		}
		if c.want != "" {
			assert.EqualError(t, err, c.want)
		}
		assert.True(t, strings.HasPrefix(err.Error(), "trace: "), err)
		assert.Empty(t, fk.calls, "nothing opened")
	}
}

// TestPlanMode: a mode asked for is the one opened, with the options
// that follow from the flags; its failures are classified later.
func TestPlanMode(t *testing.T) {
	fk := &fakeKernel{}
	o := Options{Patterns: []string{"vfs_read", "_printk"}, Mode: attach.ModeKprobeMulti, Summary: true, Quiet: true, Strings: true, RingbufSize: 1 << 20, Filters: attach.Filters{TGID: 42}, Verbose: true}
	tr, res, log, err := testPlan(t, "arm64-7.3", o, fk)
	require.NoError(t, err)
	assert.Equal(t, attach.ModeKprobeMulti, tr.Mode)
	assert.Len(t, res.Funcs, 2)
	require.Len(t, fk.calls, 1)
	c := fk.calls[0]
	assert.True(t, c.Aggregate)
	assert.True(t, c.NoEvents)
	assert.True(t, c.Strings)
	assert.Equal(t, uint32(1<<20), c.RingbufSize)
	assert.Equal(t, uint32(42), c.Filters.TGID)
	assert.Nil(t, c.Exprs)
	assert.Contains(t, log, "ftprobe: plan (kprobe.multi+kretprobe.multi mode):\n")
	assert.Regexp(t, `(?m)^  trace vfs_read +0x[0-9a-f]+  `, log)
	assert.NotContains(t, log, "auto mode")

	fk = &fakeKernel{refuse: map[string]error{attach.ModeKprobe: unsupportedErr("kprobe")}}
	_, _, _, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}, Mode: attach.ModeKprobe}, fk)
	assert.Equal(t, ClassUnsupported, classOf(classify(err)))
	assert.Equal(t, ClassBadInput, classOf(classify(fmt.Errorf("attach: %w", kfeat.ErrPrivilege))))
	assert.Equal(t, ClassFailure, classOf(classify(errors.New("bpf: out of memory"))))
}

// TestPlanEntryOnlyTables: a table of a function that never returns is
// refused, in auto mode and in a mode asked for.
func TestPlanEntryOnlyTables(t *testing.T) {
	for _, mode := range []string{"", attach.ModeKprobe} {
		fk := &fakeKernel{}
		_, _, _, err := testPlan(t, "amd64-7.3", Options{Patterns: []string{"do_exit"}, Mode: mode, Summary: true}, fk)
		require.Error(t, err)
		assert.Equal(t, ClassBadInput, classOf(err))
		assert.EqualError(t, err, "do_exit is traced at entry only (noreturn): it never returns, so --summary, --hist and stat have no duration or return value to count; leave it out (--exclude do_exit) or trace its entries without them")
		assert.Empty(t, fk.calls)
	}
	fk := &fakeKernel{}
	_, res, _, err := testPlan(t, "amd64-7.3", Options{Patterns: []string{"do_exit"}, Verbose: true}, fk)
	require.NoError(t, err)
	assert.Equal(t, "noreturn", res.Funcs[0].EntryOnly)
}

// lockedLog is a log written by detachProgress's goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDetachProgress: a detach still going after the first delay says how
// far it got; one that ends before says nothing.
func TestDetachProgress(t *testing.T) {
	var slow lockedLog
	p := detachProgress(&slow, time.Millisecond, time.Hour)
	p(0, 400)
	p(1, 400)
	for !strings.Contains(slow.String(), "ftprobe: detaching: 1 of 400 links closed\n") {
		time.Sleep(time.Millisecond)
	}
	p(400, 400)
	var fast lockedLog
	p = detachProgress(&fast, time.Hour, time.Hour)
	p(0, 2)
	p(1, 2)
	p(2, 2)
	assert.Empty(t, fast.String())
}

// TestPlanStopsWhenInterrupted: an Open interrupted by a signal ends auto
// mode: not even the pair a refused session mode goes on to.
func TestPlanStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("interrupted by SIGTERM")
	cancel(stop)
	fk := &fakeKernel{types: map[string]bool{"BPF_TRACE_FSESSION": true, "BPF_TRACE_FENTRY_MULTI": true, "BPF_TRACE_FSESSION_MULTI": true}, refuse: map[string]error{
		attach.ModeFSessionMulti: &attach.Interrupted{Cause: stop, Phase: "attaching", Done: 1, Total: 2},
	}}
	var log bytes.Buffer
	o := Options{Patterns: []string{"vfs_read", "vfs_write"}, Log: &log}
	p := &planner{o: o, k: recorded(t, "arm64-7.3"), kin: &kfeat.Info{}, has: fk.has, open: fk.open}
	_, _, err := p.plan(ctx)
	require.ErrorIs(t, err, stop)
	assert.Equal(t, []string{attach.ModeFSessionMulti}, fk.modes())
}
