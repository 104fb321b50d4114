package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trace"
)

func newTraceCmd() *cobra.Command { return traceCmd(false) }

// newStatCmd is trace --quiet --summary under its own name: per-function
// tables built in the kernel, in the spirit of funccount/funclatency.
func newStatCmd() *cobra.Command { return traceCmd(true) }

func traceCmd(stat bool) *cobra.Command {
	var (
		o          trace.Options
		outFile    string
		bufferSize uint32
		pid, tid   uint32
		interval   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "trace [flags] PATTERN... [-- COMMAND ARGS...]",
		Short: "Trace kernel functions through fentry/fexit or kprobe.multi, one line per entry and exit",
		Long: `trace attaches to kernel functions and prints every entry and exit.

PATTERN is an exact name (do_sys_openat2), a glob (vfs_*), a module-qualified
name ('name [module]', module:glob) or name@ADDRESS for one copy of a
duplicated static function. Candidates come from available_filter_functions;
the trampoline modes also need a BTF prototype.

--mode names the kernel attach paths a mode links, joined by '+':
fentry+fexit attaches an fentry and an fexit program per function (BPF
trampolines via ftrace direct calls); kprobe.multi+kretprobe.multi one
kprobe.multi and one kretprobe.multi link for all functions (fprobe, 5.18);
kprobe.session one link whose program runs at entry and at return (ftprobe's
program needs 7.0); kprobe+kretprobe one kprobe and kretprobe per function
(the fallback where neither exists). On Linux 7.x, fsession attaches one
trampoline program per function that runs at entry and at exit,
fsession.multi one such link for all functions, and fentry.multi+fexit.multi
one fentry.multi and one fexit.multi link for all functions. Each mode is one
way of attaching: a kernel that lacks it exits 3 with the reason. auto picks
from what the kernel supports and how many functions match (the session
modes before their pairs), and says why. A function that never returns
(do_exit, do_group_exit, make_task_dead, ...) is traced at entry only, in
every mode: no exit probe, nothing counted lost for it.

--pid and --tid must name a live process and thread when the trace starts.

--entry FUNC records the PATTERN functions only inside FUNC's calls on the
same thread (outside them they return at once, counted) and prints one call
tree per FUNC call, the path to the first function that returned the error
marked with '!' and '<- error origin'.

With -- COMMAND, ftprobe starts the command, traces only its process tree
(filtered in the kernel) and exits with the command's status.`,
		Example: `  ftprobe trace do_sys_openat2 vfs_read -- ftprobe workload open --count 3
  ftprobe trace --mode kprobe.multi+kretprobe.multi 'vfs_*' --exclude 'vfs_statx*' --duration 5s
  ftprobe trace --errors --output json do_sys_openat2 -o trace.jsonl
  ftprobe trace vfs_read --arg 'file->f_path.dentry->d_name.name' --filter 'count == 1' -- ftprobe workload read
  ftprobe trace do_sys_openat2 --filter 'ret == -ENOENT' --arg filename -- ftprobe workload openfail
  ftprobe trace --entry do_sys_openat2 --errors 'path_*' 'link_path_walk*' 'lookup_*' -- ftprobe workload openfail`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at := cmd.ArgsLenAtDash(); at >= 0 {
				o.Patterns, o.Command = args[:at], args[at:]
				if len(o.Command) == 0 {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("trace: nothing after --"))
				}
			} else {
				o.Patterns = args
			}
			o.Filters.TGID, o.Filters.TID = pid, tid
			o.RingbufSize = bufferSize
			if stat {
				o.Quiet = true
			}
			if cmd.Flags().Changed("interval") {
				o.SetInterval(interval)
			}
			if err := checkTraceInput(&o); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			if err := checkOutPath("-o", outFile); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			if err := needPrivilege("trace"); err != nil {
				return err
			}
			o.Out = cmd.OutOrStdout()
			o.Log = cmd.ErrOrStderr()
			if outFile != "" && outFile != "-" {
				f, err := os.Create(outFile)
				if err != nil {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("-o: %w", err))
				}
				defer f.Close()
				o.Out = f
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Progress = attachProgress(cmd)
			_, err := trace.Run(ctx, o)
			return traceExit(err)
		},
	}
	if stat {
		cmd.Use = "stat [flags] PATTERN... [-- COMMAND ARGS...]"
		cmd.Short = "Count calls, errors and latency per kernel function, aggregated in the kernel"
		cmd.Long = `stat attaches like trace, but streams no per-call record: the BPF programs
build per-function tables in BPF maps (calls, errors by errno, mean, sum, max
and a log-linear duration histogram) and stat prints them at exit, and every
--interval the calls of that interval. Percentiles are the midpoint of the
histogram bucket holding the nearest rank: within 6.25% of the exact value.
--hist adds a log2 histogram per function; --output json writes one JSON line
("type":"stat") per table. It is trace --quiet --summary.`
		cmd.Example = `  ftprobe stat 'vfs_*' --duration 10s
  ftprobe stat --hist --interval 1s vfs_read -- ftprobe workload read --count 100000
  ftprobe stat --output json do_sys_openat2 -- ftprobe workload openfail`
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "no per-call events: print only the kernel-built --summary/--hist tables (to stdout), as stat does")
	f.BoolVar(&o.LiveEntries, "live-entries", false, "send each entry when its call starts (by default a call with no traced call inside it sends its entry with its exit, in one ringbuf record: the same events, fewer records, but a long leaf call's entry shows only when it returns)")
	f.DurationVar(&interval, "interval", 0, "with stat or --quiet: print the tables of the last interval at this period")
	f.StringVar(&o.Mode, "mode", trace.ModeAuto, "attach mode, named by its kernel attach paths: "+orList(traceModeNames())+" (one way each: a kernel without it exits 3; auto picks)")
	f.StringArrayVar(&o.Excludes, "exclude", nil, "remove functions matching GLOB (repeatable)")
	f.StringVar(&o.Output, "output", "text", "text, json (JSON lines, field names in README) or perfetto (Chrome trace-event JSON for ui.perfetto.dev; use with -o FILE.json)")
	f.StringVarP(&outFile, "out", "o", "", "write events to FILE")
	f.Uint32Var(&pid, "pid", 0, "only this process (tgid), filtered in the kernel")
	f.Uint32Var(&tid, "tid", 0, "only this thread, filtered in the kernel")
	f.StringVar(&o.Filters.Comm, "comm", "", "only tasks with this comm, filtered in the kernel")
	f.DurationVar(&o.Filters.MinDuration, "min-duration", 0, "only calls at least this long (emitted at exit with entry args)")
	f.BoolVar(&o.Filters.ErrorsOnly, "errors", false, "only calls returning a negative int or an error pointer")
	f.DurationVar(&o.Duration, "duration", 0, "stop after tracing this long: the window from attached to detach (attaching and detaching many functions take extra time, shown in -v and the summary)")
	f.DurationVar(&o.StatsEvery, "stats-every", 0, "print a progress line at this interval: events, rate, losses, ftprobe's RSS and live Go heap")
	f.IntVar(&o.Count, "count", 0, "stop after N events")
	f.IntVar(&o.MaxFunctions, "max-functions", 2000, "refuse patterns matching more functions than this")
	f.Uint32Var(&bufferSize, "buffer-size", 4<<20, "ringbuf size in bytes (power-of-two multiple of the page size)")
	f.BoolVar(&o.Graph, "graph", false, "text as a call graph per thread (function_graph style): leaf calls folded, durations on exits, markers when threads interleave")
	f.BoolVar(&o.Summary, "summary", false, "at exit, per function: calls, errors by errno, p50/p90/p99/max latency")
	f.BoolVar(&o.Hist, "hist", false, "at exit, a log2 latency histogram per function (implies --summary)")
	f.BoolVar(&o.Strings, "strings", false, "read char * arguments at entry (first 2 per call, 127 bytes each; … marks truncation, <fault> a failed read)")
	f.BoolVar(&o.Stack, "stack", false, "record the kernel stack at entry (32 frames) and print it symbolized under the entry (JSON: \"stack\")")
	f.StringArrayVar(&o.Args, "arg", nil, "record EXPR at each entry of the functions whose parameters it names, e.g. 'file->f_path.dentry->d_name.name' (repeatable, up to 4; C syntax, checked against BTF; [FUNCGLOB:]EXPR scopes it)")
	f.StringArrayVar(&o.Predicates, "filter", nil, "keep only the calls for which EXPR holds, decided in the kernel: e.g. 'count > 4096 && ret == -EAGAIN' (parts on ret at exit, the entry then deferred; repeatable: each applies to the functions whose parameters it names, [FUNCGLOB:]EXPR scopes it)")
	f.BoolVar(&o.DryRun, "dry-run", false, "resolve the patterns, type-check --arg/--filter, load and verify every program, attach nothing: print the plan and exit 0 (2 bad input, 3 unsupported)")
	f.StringArrayVar(&o.Entries, "entry", nil, "record the PATTERN functions only while the same thread is inside a call of FUNC (a glob too; repeatable), and print each FUNC call as a call tree with durations, arguments, return values and the error origin marked (JSON: one \"call_tree\" record per call; Perfetto: nested slices per thread, error path marked in args); a --filter scoped to FUNC opens the window only for the FUNC calls it keeps; with --errors only the FUNC calls that returned an error")
	f.BoolVar(&o.Strict, "strict", false, "exit non-zero when any event or probe run was lost")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "print the plan: each function, its prototype, and why any was skipped")
	return cmd
}

// checkTraceInput checks every flag, value, pattern and filter of trace
// that needs no kernel, before anything touches one: the caller maps any
// error to bad input (exit 2). The --pid/--tid targets must exist now
// (trace.CheckTargets).
func checkTraceInput(o *trace.Options) error {
	if len(o.Patterns) == 0 {
		return errors.New("trace: no function pattern")
	}
	for _, p := range o.Patterns {
		if _, err := symbols.ParsePattern(p); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	for _, p := range o.Excludes {
		if _, err := symbols.ParsePattern(p); err != nil {
			return fmt.Errorf("trace --exclude: %w", err)
		}
	}
	if err := checkTraceMode(o.Mode); err != nil {
		return err
	}
	if o.Count < 0 {
		return fmt.Errorf("--count %d: want 0 (no limit) or more", o.Count)
	}
	if o.Output != "text" && o.Output != "json" && o.Output != "perfetto" {
		return fmt.Errorf("--output %q: want text, json or perfetto", o.Output)
	}
	if o.Graph && o.Output != "text" {
		return fmt.Errorf("--graph with --output %s: the call graph is a text view (drop one of them)", o.Output)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--duration", o.Duration}, {"--stats-every", o.StatsEvery}} {
		if d.v < 0 {
			return fmt.Errorf("%s %s: want 0 (off) or more", d.flag, d.v)
		}
	}
	if o.MaxFunctions < 0 {
		return fmt.Errorf("--max-functions %d: want 0 (no limit) or more", o.MaxFunctions)
	}
	if err := attach.ValidateRingbufSize(o.RingbufSize); err != nil {
		return fmt.Errorf("--buffer-size: %w", err)
	}
	if err := o.CheckQuiet(); err != nil {
		return err
	}
	if err := o.Filters.Validate(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := o.CheckExprs(); err != nil {
		return err
	}
	if err := o.CheckEntries(); err != nil {
		return fmt.Errorf("trace %w", err)
	}
	if len(o.Command) > 0 && (o.Filters.TGID != 0 || o.Filters.TID != 0) {
		return errors.New("trace: --pid/--tid with -- COMMAND: the command runs as a new process, which --pid/--tid would filter out (use one or the other)")
	}
	if err := trace.CheckTargets(o.Filters); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// attachProgress draws a progress bar on a terminal stderr for attaches of
// more than 50 functions (one trampoline each in fentry+fexit mode).
func attachProgress(cmd *cobra.Command) func(done, total int) {
	f, ok := cmd.ErrOrStderr().(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if total <= 50 {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(f),
				progressbar.OptionSetDescription("attaching fentry/fexit"), progressbar.OptionClearOnFinish())
		}
		bar.Set(done)
	}
}

func newInternalExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "internal-exec -- COMMAND ARGS...",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return traceExit(trace.ExecGated(args))
		},
	}
}

// traceExit turns an error of trace.Run or trace.ExecGated into ftprobe's
// exit code by its class (trace.ClassOf): bad input 2, unsupported 3, the
// traced command's own status as it is (reported already when the error
// carries no message), anything else 1.
func traceExit(err error) error {
	if err == nil {
		return nil
	}
	class, status := trace.ClassOf(err)
	switch class {
	case trace.ClassBadInput:
		return exitcode.Wrap(exitcode.BadInput, err)
	case trace.ClassUnsupported:
		return exitcode.Wrap(exitcode.Unsupported, err)
	case trace.ClassCommand:
		var te *trace.Error
		if errors.As(err, &te) && te.Err == nil {
			return exitcode.Status(status)
		}
		return exitcode.Wrap(status, err)
	}
	return exitcode.Wrap(exitcode.Failure, err)
}
