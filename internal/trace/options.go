package trace

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/stats"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// validate makes the checks of o that need no kernel, in the order Run
// makes them, and fills in the defaults: Log (discard), Verbose with
// DryRun (the plan is the output), Summary with Quiet (CheckQuiet). Its
// errors are bad input. --pid and --tid are checked against /proc
// (CheckTargets).
func validate(o *Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Mode != "" && o.Mode != ModeAuto && !slices.Contains(Modes, o.Mode) {
		return badInput(fmt.Errorf("--mode %q: want %s, %s", o.Mode, ModeAuto, strings.Join(Modes, ", ")))
	}
	if err := o.CheckQuiet(); err != nil {
		return badInput(err)
	}
	if o.RingbufSize != 0 {
		if err := attach.ValidateRingbufSize(uint64(o.RingbufSize), rings.OnlineSlots()); err != nil {
			return badInput(fmt.Errorf("--buffer-size: %w", err))
		}
	} else if !o.Quiet {
		o.RingbufSize = DefaultRingbufSize(onlineCPUs())
	}
	if err := o.Filters.Validate(); err != nil {
		return badInput(fmt.Errorf("trace: %w", err))
	}
	if err := CheckTargets(o.Filters); err != nil {
		return badInput(fmt.Errorf("trace: %w", err))
	}
	if err := o.CheckExprs(); err != nil {
		return badInput(err)
	}
	if err := o.CheckEntries(); err != nil {
		return badInput(fmt.Errorf("trace %w", err))
	}
	if o.DryRun {
		o.Verbose = true // the plan is the output
	}
	return nil
}

// SetInterval sets Interval from the --interval flag (0 given explicitly
// is refused by Run).
func (o *Options) SetInterval(d time.Duration) { o.Interval, o.intervalSet = d, true }

// CheckQuiet checks stat/--quiet against what needs per-call events and
// --interval (positive, only with Quiet); it sets Summary when Quiet asks
// for no table. Run calls it too. Errors are bad input.
func (o *Options) CheckQuiet() error {
	if o.Interval < 0 || (o.Interval == 0 && o.intervalSet) {
		return fmt.Errorf("--interval %s: want a positive duration", o.Interval)
	}
	if !o.Quiet {
		if o.Interval != 0 {
			return errors.New("--interval: only with stat (or trace --quiet), whose tables it prints")
		}
		return nil
	}
	for _, c := range []struct {
		on   bool
		flag string
	}{{o.Graph, "--graph"}, {o.Output == "perfetto", "--output perfetto"}, {o.Strings, "--strings"},
		{o.Stack, "--stack"}, {o.Count > 0, "--count"}} {
		if c.on {
			return fmt.Errorf("%s needs per-call events, which stat (trace --quiet) does not stream", c.flag)
		}
	}
	if !o.Summary && !o.Hist {
		o.Summary = true
	}
	return nil
}

// writeTables writes the kernel's tables (Quiet) to w: text, or one JSON
// line with "type":"stat".
func (o *Options) writeTables(w io.Writer, t *stats.Table, at time.Duration, final bool) {
	if o.Output == "json" {
		extra := map[string]any{"at_ns": at.Nanoseconds(), "final": final, "calls": t.Calls()}
		if !final {
			extra["interval_ns"] = o.Interval.Nanoseconds()
		}
		w.Write(t.AppendJSON(nil, "stat", extra))
		return
	}
	what := "all calls"
	if !final {
		what = "calls in the last " + o.Interval.String()
	}
	fmt.Fprintf(w, "\n@ +%s: %s (%d)\n", at.Round(time.Millisecond), what, t.Calls())
	t.WriteSummary(w)
	if o.Hist {
		t.WriteHist(w)
	}
}

// checkAggEntryOnly refuses a table (--summary, --hist, stat) of a
// function traced at entry only: it never returns, so it has no duration
// and no return value to aggregate.
func (o *Options) checkAggEntryOnly(res *symbols.Resolution) error {
	if !o.Summary && !o.Hist && !o.Quiet {
		return nil
	}
	for _, f := range res.Funcs {
		if f.EntryOnly != "" {
			return fmt.Errorf("%s is traced at entry only (%s): it never returns, so --summary, --hist and stat have no duration or return value to count; leave it out (--exclude %s) or trace its entries without them", f.Display(), f.EntryOnly, f.Name)
		}
	}
	return nil
}

// CheckExprs parses --arg and --filter (syntax only: types need the
// kernel's BTF) and checks what they combine with. Errors are bad input.
func (o *Options) CheckExprs() error {
	if len(o.Args) == 0 && len(o.Predicates) == 0 {
		return nil
	}
	if _, err := expr.ParseSet(o.Args, o.Predicates); err != nil {
		return fmt.Errorf("trace %w", err)
	}
	if (o.Strings || o.Stack) && len(o.Args) > 0 {
		// (--filter alone combines with both: the records are the
		// --strings/--stack ones; --arg values have records of their own.)
		return errors.New("trace: --arg with --strings or --stack is not supported yet (name string fields with --arg instead of --strings)")
	}
	return nil
}

// compileExprs type-checks --arg/--filter against the BTF of fs and
// compiles them (nil without expressions), and names each function's
// values for the output. Errors are bad input (exit 2).
func (o *Options) compileExprs(k *symbols.Kernel, fs []*symbols.Func) (map[uint32]*expr.Plan, error) {
	set, err := expr.ParseSet(o.Args, o.Predicates)
	if err != nil || set.Empty() {
		if err != nil {
			return nil, badInput(fmt.Errorf("trace %w", err))
		}
		return nil, nil
	}
	lookup := func(f *symbols.Func) (*btf.FuncProto, *btf.Spec) {
		var spec *btf.Spec
		if k.Spec != nil {
			spec, _ = k.Spec(f.Module)
		}
		if f.Proto == nil || f.ProtoErr != "" || f.BTFName == "" || k.BTF == nil {
			return nil, spec
		}
		fn, err := k.BTF(f.BTFName, f.Module)
		if err != nil {
			return nil, spec
		}
		fp, _ := fn.Type.(*btf.FuncProto)
		return fp, spec
	}
	plans, err := set.Compile(fs, lookup)
	if err != nil {
		return nil, badInput(fmt.Errorf("trace %w", err))
	}
	for _, f := range fs {
		f.Values = nil
		if p := plans[f.ID]; p != nil {
			for _, v := range p.Values {
				f.Values = append(f.Values, symbols.Value{Name: v.Expr, Kind: v.Kind, Size: v.Size, Enum: v.Enum,
					Type: v.Struct, Off: v.Off, Len: uint32(v.Bytes)})
			}
			if o.Verbose {
				for _, l := range p.Describe() {
					fmt.Fprintf(o.Log, "ftprobe: %s: %s\n", f.Display(), l)
				}
			}
		}
	}
	if o.Verbose {
		spec, err := bpfobj.LoadTrace()
		if err != nil {
			return nil, fmt.Errorf("trace: load BPF object: %w", err)
		}
		fc, err := attach.FaultCounterOf(spec)
		if err != nil {
			return nil, err
		}
		pr, err := expr.CompilePredicates(plans, fc)
		if err != nil {
			return nil, fmt.Errorf("trace: compile --filter: %w", err)
		}
		if pr != nil {
			fmt.Fprintf(o.Log, "ftprobe: %s\n", pr.Describe())
		}
	}
	return plans, nil
}
