package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/trace"
)

func newTraceCmd() *cobra.Command {
	var (
		o          trace.Options
		outFile    string
		bufferSize uint32
		pid, tid   uint32
	)
	cmd := &cobra.Command{
		Use:   "trace [flags] PATTERN... [-- COMMAND ARGS...]",
		Short: "Trace kernel functions through fentry/fexit or kprobe.multi, one line per entry and exit",
		Long: `trace attaches to kernel functions and prints every entry and exit.

PATTERN is an exact name (do_sys_openat2), a glob (vfs_*), a module-qualified
name ('name [module]', module:glob) or name@ADDRESS for one copy of a
duplicated static function. Candidates come from available_filter_functions;
fentry also needs a BTF prototype.

--mode fentry attaches an fentry and an fexit program per function (BPF
trampolines via ftrace direct calls); kprobe-multi attaches one kprobe.multi
and one kretprobe.multi link for all functions (fprobe); kprobe one kprobe and
kretprobe per function (the fallback where neither exists). On Linux 7.x,
fsession attaches one trampoline program per function that runs at entry and
at exit, and fentry-multi one tracing multi link for all functions
(fsession.multi, or fentry.multi + fexit.multi). auto picks from what the
kernel supports and how many functions match, and says why.

With -- COMMAND, ftprobe starts the command, traces only its process tree
(filtered in the kernel) and exits with the command's status.`,
		Example: `  ftprobe trace do_sys_openat2 vfs_read -- ftprobe workload open --count 3
  ftprobe trace --mode kprobe-multi 'vfs_*' --exclude 'vfs_statx*' --duration 5s
  ftprobe trace --errors --output json do_sys_openat2 -o trace.jsonl`,
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
			if len(o.Patterns) == 0 {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("trace: no function pattern"))
			}
			if o.Count < 0 {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--count %d: want 0 (no limit) or more", o.Count))
			}
			if o.Output != "text" && o.Output != "json" && o.Output != "perfetto" {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--output %q: want text, json or perfetto", o.Output))
			}
			if err := needPrivilege("trace"); err != nil {
				return err
			}
			o.Filters.TGID, o.Filters.TID = pid, tid
			o.RingbufSize = bufferSize
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
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Mode, "mode", "auto", "auto, fentry, kprobe-multi, kprobe, fsession or fentry-multi")
	f.StringArrayVar(&o.Excludes, "exclude", nil, "remove functions matching GLOB (repeatable)")
	f.StringVar(&o.Output, "output", "text", "text, json (JSON lines, field names in README) or perfetto (Chrome trace-event JSON for ui.perfetto.dev; use with -o FILE.json)")
	f.StringVarP(&outFile, "out", "o", "", "write events to FILE")
	f.Uint32Var(&pid, "pid", 0, "only this process (tgid), filtered in the kernel")
	f.Uint32Var(&tid, "tid", 0, "only this thread, filtered in the kernel")
	f.StringVar(&o.Filters.Comm, "comm", "", "only tasks with this comm, filtered in the kernel")
	f.DurationVar(&o.Filters.MinDuration, "min-duration", 0, "only calls at least this long (emitted at exit with entry args)")
	f.BoolVar(&o.Filters.ErrorsOnly, "errors", false, "only calls returning a negative int or an error pointer")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long")
	f.DurationVar(&o.StatsEvery, "stats-every", 0, "print a progress line at this interval: events, rate, losses, ftprobe's RSS and live Go heap")
	f.IntVar(&o.Count, "count", 0, "stop after N events")
	f.IntVar(&o.MaxFunctions, "max-functions", 2000, "refuse patterns matching more functions than this")
	f.Uint32Var(&bufferSize, "buffer-size", 4<<20, "ringbuf size in bytes (power-of-two multiple of the page size)")
	f.BoolVar(&o.Graph, "graph", false, "text as a call graph per thread (function_graph style): leaf calls folded, durations on exits, markers when threads interleave")
	f.BoolVar(&o.Summary, "summary", false, "at exit, per function: calls, errors by errno, p50/p90/p99/max latency")
	f.BoolVar(&o.Hist, "hist", false, "at exit, a log2 latency histogram per function (implies --summary)")
	f.BoolVar(&o.Strings, "strings", false, "read char * arguments at entry (first 2 per call, 127 bytes each; … marks truncation, <fault> a failed read)")
	f.BoolVar(&o.Stack, "stack", false, "record the kernel stack at entry (32 frames) and print it symbolized under the entry (JSON: \"stack\")")
	f.BoolVar(&o.Strict, "strict", false, "exit non-zero when any event or probe run was lost")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "print the plan: each function, its prototype, and why any was skipped")
	return cmd
}

// attachProgress draws a progress bar on a terminal stderr for attaches of
// more than 50 functions (one trampoline each in fentry mode).
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
			return trace.ExecGated(args)
		},
	}
}
