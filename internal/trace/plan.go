package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

func classify(err error) error {
	var ec *Error
	switch {
	case errors.As(err, &ec):
		return err
	case errors.Is(err, kfeat.ErrUnsupported):
		return unsupported(err)
	case errors.Is(err, kfeat.ErrPrivilege):
		return badInput(err)
	}
	return failed(err)
}

// planner turns the patterns into functions and an attach mode, and opens
// the tracer in that mode: the mode asked for, or auto mode's choice with
// its fallbacks (the next mode when one is unsupported here; fentry and
// kprobe.multi mixed when fentry cannot take every function). What it
// needs of the kernel beyond the symbols is behind has and open, so it
// runs on the host against recorded symbols (symbols.LoadRecorded).
type planner struct {
	o   Options
	k   *symbols.Kernel
	kin *kfeat.Info
	// has reports whether the kernel knows a BPF attach type
	// (attach.KernelHasAttachType).
	has func(attachType string) bool
	// open loads the programs and attaches them (attach.Open).
	open func(context.Context, attach.Options) (*attach.Tracer, error)
}

// newPlanner plans against the running kernel.
func newPlanner(o Options, k *symbols.Kernel, kin *kfeat.Info) *planner {
	return &planner{o: o, k: k, kin: kin, has: attach.KernelHasAttachType, open: attach.Open}
}

// plan resolves the patterns, prints the plan and opens the tracer: in
// auto mode when o.Mode is "" or "auto", else in o.Mode. Errors are
// classed but for attach.Open's (classify). Once ctx is done, attach.Open
// stops (attach.Interrupted) and auto mode tries no other mode.
func (p *planner) plan(ctx context.Context) (*attach.Tracer, *symbols.Resolution, error) {
	o := p.o
	if o.Mode == "" || o.Mode == "auto" {
		return p.openAuto(ctx)
	}
	if err := o.resolveEntries(p.k, o.Mode); err != nil {
		return nil, nil, err
	}
	res, err := p.k.Resolve(o.allPatterns(), o.Excludes, o.Mode, o.MaxFunctions)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("trace: %w", err))
	}
	printPlan(o, p.k, res)
	if err := o.checkAggEntryOnly(res); err != nil {
		return nil, nil, badInput(err)
	}
	plans, err := o.compileExprs(p.k, res.Funcs)
	if err != nil {
		return nil, nil, err
	}
	ao := p.attachOptions(o.Mode, res.Funcs, plans)
	if err := o.checkEntryIDs(ao.Entries, o.Mode); err != nil {
		return nil, nil, err
	}
	t, err := p.open(ctx, ao)
	return t, res, err
}

// attachOptions are the attach.Options of mode for fs.
func (p *planner) attachOptions(mode string, fs []*symbols.Func, plans map[uint32]*expr.Plan) attach.Options {
	o := p.o
	return attach.Options{Mode: mode, Funcs: fs, Filters: o.Filters, RingbufSize: o.RingbufSize, Strings: o.Strings, Stack: o.Stack, Aggregate: o.Summary || o.Hist, NoEvents: o.Quiet, LiveEntries: o.LiveEntries, Kernel: p.kin, BTF: p.k.Types, Progress: o.Progress, Exprs: plans, DryRun: o.DryRun, Entries: o.entryIDs(fs), NoSpecialize: o.NoSpecialize,
		Detaching: detachProgress(o.Log, time.Second, 5*time.Second)}
}

// detachProgress returns an attach.Options.Detaching that says on log how
// far a detach got when it takes longer than first, then every next: one
// fentry link closes in about 0.3 s under TCG (each unregisters a
// trampoline), so stopping a trace of hundreds of functions, or one
// interrupted while attaching them, is shown to go on.
func detachProgress(log io.Writer, first, next time.Duration) func(closed, total int) {
	var mu sync.Mutex
	var n, of int
	var done chan struct{}
	return func(closed, total int) {
		mu.Lock()
		n, of = closed, total
		mu.Unlock()
		if closed == 0 {
			done = make(chan struct{})
			go func(done chan struct{}) {
				for delay := first; ; delay = next {
					select {
					case <-done:
						return
					case <-time.After(delay):
					}
					mu.Lock()
					fmt.Fprintf(log, "ftprobe: detaching: %d of %d links closed\n", n, of)
					mu.Unlock()
				}
			}(done)
		}
		if closed == total && done != nil {
			close(done)
			done = nil
		}
	}
}

// autoOrder is the order in which auto mode tries the modes, and why the
// first: fentry+fexit for up to autoFentryLimit functions (lower per-call
// cost), the fprobe modes above (one link, one attach syscall) or when
// fentry cannot resolve (errF), each followed by the others and
// kprobe+kretprobe; fsession first where the kernel has it and fentry
// takes every function, the tracing multi links first where the kernel
// has them. A session mode comes before its pair (sessionPair) where the
// kernel has its attach type. resF and errF are fentry's resolution.
func autoOrder(resF *symbols.Resolution, errF error, has func(attachType string) bool) (order []string, why string) {
	fprobe := []string{attach.ModeKprobeMulti}
	if has("BPF_TRACE_KPROBE_SESSION") {
		fprobe = []string{attach.ModeKprobeSession, attach.ModeKprobeMulti}
	}
	order = append(append([]string{attach.ModeFentryFexit}, fprobe...), attach.ModeKprobe)
	why = "fentry/fexit trampolines cost less per call"
	if errF != nil || len(resF.Funcs) > autoFentryLimit {
		order = append(append(fprobe, attach.ModeFentryFexit), attach.ModeKprobe)
		why = "one " + fprobe[0] + " link attaches many functions in one syscall"
		if errF != nil {
			why = "not every function can take fentry"
		}
	}
	if errF == nil && len(resF.Funcs) <= autoFentryLimit && len(resF.Skipped) == 0 && has("BPF_TRACE_FSESSION") {
		// 7.0: one trampoline program per function for entry and exit:
		// half fentry+fexit's programs and links, so it attaches in about
		// half the time (arm64 7.3: 76 functions in 47 s against 97 s),
		// and compare's trace body costs it no more per call
		// (docs/benchmarks.md).
		order = append([]string{attach.ModeFSession}, order...)
		why = "fsession: one trampoline program per function for entry and exit, half of fentry+fexit's programs and links"
	}
	if errF == nil && has("BPF_TRACE_FENTRY_MULTI") {
		// 7.x: trampolines' per-call cost with one link for all functions;
		// where the kernel refuses the link (arm64 7.3), the order above.
		multi := []string{attach.ModeFentryMulti}
		if has("BPF_TRACE_FSESSION_MULTI") {
			multi = []string{attach.ModeFSessionMulti, attach.ModeFentryMulti}
		}
		order = append(multi, order...)
		why = "this kernel has tracing multi links: trampoline per-call cost, all functions attached with one link"
	}
	return order, why
}

// sessionPair maps a session mode to the pair of links that does its job:
// auto goes on from the session mode to the pair after any refusal, not
// only an unsupported one (ftprobe's kprobe.session program needs 7.0's
// session kfuncs on ctx, which 6.10 to 6.19 refuse in the verifier).
var sessionPair = map[string]string{attach.ModeKprobeSession: attach.ModeKprobeMulti, attach.ModeFSessionMulti: attach.ModeFentryMulti}

// nextOnError reports whether auto goes on to order[i+1] after mode
// order[i] failed with err.
func nextOnError(order []string, i int, err error) bool {
	return errors.Is(err, kfeat.ErrUnsupported) || i+1 < len(order) && sessionPair[order[i]] == order[i+1]
}

// openAuto picks the mode (autoOrder) and opens the first one this
// kernel supports.
func (p *planner) openAuto(ctx context.Context) (*attach.Tracer, *symbols.Resolution, error) {
	o, k := p.o, p.k
	// --entry patterns that match nothing (or only excluded or noreturn
	// functions) fail whatever the mode; untraceable is per mode, below.
	if err := o.resolveEntries(k, attach.ModeKprobeMulti); err != nil && !errors.Is(err, symbols.ErrUntraceable) {
		return nil, nil, err
	}
	resF, errF := k.Resolve(o.allPatterns(), o.Excludes, attach.ModeFentryFexit, 0)
	order, why := autoOrder(resF, errF, p.has)
	var firstErr error
	var unavailable, tried []string
	for i, m := range order {
		res, err := k.Resolve(o.allPatterns(), o.Excludes, m, o.MaxFunctions)
		if err == nil {
			err = o.resolveEntries(k, m)
			if err != nil && !errors.Is(err, symbols.ErrUntraceable) {
				return nil, nil, err
			}
		}
		if err != nil {
			if errors.Is(err, symbols.ErrNoMatch) || errors.Is(err, symbols.ErrTooMany) {
				return nil, nil, badInput(fmt.Errorf("trace: %w", err))
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		printPlan(o, k, res)
		if err := o.checkAggEntryOnly(res); err != nil {
			return nil, nil, badInput(err)
		}
		if m != attach.ModeFSession && symbols.IsTrampolineMode(m) && len(res.Skipped) > 0 {
			t, mres, err := p.openMixed(ctx, res, m)
			if err == nil {
				return t, mres, nil
			}
			if !errors.Is(err, kfeat.ErrUnsupported) {
				if ctx.Err() != nil || !nextOnError(order, i, err) {
					return nil, nil, err
				}
				if firstErr == nil {
					firstErr = err
				}
				unavailable, tried = append(unavailable, err.Error()), append(tried, m)
				continue
			}
			// kprobe.multi (or the trampoline mode) is missing: the
			// trampolines alone, with their skips.
		}
		plans, err := o.compileExprs(k, res.Funcs)
		if err != nil {
			return nil, nil, err
		}
		ao := p.attachOptions(m, res.Funcs, plans)
		if err := o.checkEntryIDs(ao.Entries, m); err != nil {
			return nil, nil, err
		}
		t, err := p.open(ctx, ao)
		if err == nil {
			if i == 0 {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %s: %s\n", m, plural.Count(len(res.Funcs), "function"), why)
			} else if o.Verbose {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %s; unavailable here: %s\n", m, plural.Count(len(res.Funcs), "function"), strings.Join(unavailable, "; "))
			} else {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %s; %s unavailable here (--verbose says why)\n", m, plural.Count(len(res.Funcs), "function"), strings.Join(tried, ", "))
			}
			return t, res, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil || !nextOnError(order, i, err) {
			return nil, nil, err
		}
		unavailable = append(unavailable, err.Error())
		tried = append(tried, m)
	}
	if errors.Is(firstErr, symbols.ErrUntraceable) {
		return nil, nil, badInput(fmt.Errorf("trace: %w", firstErr))
	}
	return nil, nil, firstErr
}

// openMixed is auto mode's per-function fallback: the functions fentry
// takes go through trampolines, the ones it cannot take (no BTF, compiler
// copies, varargs, too many arguments, other copies of a duplicated name)
// through one kprobe.multi link, said once per reason.
func (p *planner) openMixed(ctx context.Context, resF *symbols.Resolution, tramp string) (*attach.Tracer, *symbols.Resolution, error) {
	o, k := p.o, p.k
	resK, err := k.Resolve(o.allPatterns(), o.Excludes, attach.ModeKprobeMulti, 0)
	if err != nil {
		return nil, nil, err
	}
	type key struct {
		name, mod string
		addr      uint64
	}
	inF := map[key]bool{}
	for _, f := range resF.Funcs {
		inF[key{f.Name, f.Module, f.Addr}] = true
	}
	why := map[string]int{}
	var fs, ms []*symbols.Func
	for _, f := range resF.Funcs {
		c := *f
		c.ID = uint32(len(fs))
		fs = append(fs, &c)
	}
	for _, f := range resK.Funcs {
		if inF[key{f.Name, f.Module, f.Addr}] {
			continue
		}
		c := *f
		c.ID = uint32(len(fs) + len(ms))
		ms = append(ms, &c)
		r := f.Skip[tramp]
		if r == "" {
			r = "another copy of a duplicated name"
		} else if i := strings.Index(r, " ("); i > 0 {
			r = r[:i]
		}
		why[r]++
	}
	if len(ms) == 0 {
		return nil, nil, fmt.Errorf("%w: nothing for kprobe.multi", kfeat.ErrUnsupported)
	}
	if o.MaxFunctions > 0 && len(fs)+len(ms) > o.MaxFunctions {
		return nil, nil, badInput(fmt.Errorf("trace: %w: %d functions, more than --max-functions %d", symbols.ErrTooMany, len(fs)+len(ms), o.MaxFunctions))
	}
	plans, err := o.compileExprs(k, append(append([]*symbols.Func{}, fs...), ms...))
	if err != nil {
		return nil, nil, err
	}
	ao := p.attachOptions(attach.ModeMixed, fs, plans)
	ao.MixedTrampoline, ao.MultiFuncs = tramp, ms
	ao.Entries = o.entryIDs(append(append([]*symbols.Func{}, fs...), ms...))
	if err := o.checkEntryIDs(ao.Entries, ModeAuto); err != nil {
		return nil, nil, err
	}
	t, err := p.open(ctx, ao)
	if err != nil {
		return nil, nil, err
	}
	var parts []string
	for r, n := range why {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	multi := strings.TrimPrefix(t.Mode, tramp+"+")
	fmt.Fprintf(o.Log, "ftprobe: auto mode: %s through %s trampolines (cheaper per call), %d through %s because %s cannot take them: %s\n",
		plural.Count(len(fs), "function"), tramp, len(ms), multi, tramp, strings.Join(parts, ", "))
	res := &symbols.Resolution{Mode: t.Mode, Funcs: append(fs, ms...), Skipped: resK.Skipped, Reasons: resK.Reasons, Notes: resF.Notes}
	return t, res, nil
}

// printTrials lists, in --verbose, the trampoline trials this run made
// (internal/trial), or why the documented rule decided.
func printTrials(o Options, k *symbols.Kernel) {
	if !o.Verbose {
		return
	}
	if l, ok := k.Limits.(*trial.Limits); ok {
		for _, t := range l.Trials() {
			what := "accepted"
			if !t.OK {
				what = "refused: " + t.Err
			}
			shape := ""
			switch t.Rule {
			case "args":
				shape = fmt.Sprintf(" with %d arguments", t.Shape)
			case "struct":
				shape = fmt.Sprintf(" with a %d-byte struct by value", t.Shape)
			}
			fmt.Fprintf(o.Log, "ftprobe: trial fentry+fexit on %s%s: the kernel %s (%s)\n", t.Func, shape, what, t.Took.Round(time.Millisecond))
		}
		if why := l.NoTrial(); why != "" {
			fmt.Fprintf(o.Log, "ftprobe: trampoline limits from the documented rule: no trial: %s\n", why)
		}
	}
}

// printPlan writes the plan's notes and, with --verbose, each function
// traced (address, prototype, how its arguments show) and skipped (why,
// and the fix).
func printPlan(o Options, k *symbols.Kernel, res *symbols.Resolution) {
	for _, n := range res.Notes {
		fmt.Fprintf(o.Log, "ftprobe: note: %s\n", n)
	}
	if !o.Verbose {
		return
	}
	fmt.Fprintf(o.Log, "ftprobe: plan (%s mode):\n", res.Mode)
	for _, f := range res.Funcs {
		fmt.Fprintf(o.Log, "  trace %-40s %#x  %s\n", f.Display(), f.Addr, events.Signature(f))
		if f.ProtoErr != "" {
			fmt.Fprintf(o.Log, "        arguments shown as raw values: %s\n", f.ProtoErr)
		}
		if o.Strings {
			if idx := attach.StringArgs(f); len(idx) > 0 {
				var names []string
				for _, i := range idx {
					names = append(names, f.Proto.Params[i].Name)
				}
				fmt.Fprintf(o.Log, "        --strings reads %s (up to %d bytes each)\n", strings.Join(names, ", "), attach.StrLen-1)
			}
		}
	}
	for _, f := range res.Skipped {
		fix := ""
		if h := k.Fix(f, res.Mode); h != "" {
			fix = "; " + h
		}
		fmt.Fprintf(o.Log, "  skip  %-40s %s%s\n", f.Display(), f.Skip[res.Mode], fix)
	}
	if eo := symbols.EntryOnlySummary(res.Funcs); eo != "" {
		fmt.Fprintf(o.Log, "  %s: traced at entry only (their exit cannot be hooked; not counted as lost or in flight)\n", eo)
	}
}
