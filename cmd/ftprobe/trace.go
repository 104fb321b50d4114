package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trace"
)

func newTraceCmd() *cobra.Command { return traceCmd(false) }

// newStatCmd is trace --quiet --summary under its own name: per-function
// tables built in the kernel, in the spirit of funccount/funclatency. It
// takes only the flags of trace that apply to tables (traceFlags).
func newStatCmd() *cobra.Command { return traceCmd(true) }

func traceCmd(stat bool) *cobra.Command {
	var (
		o          trace.Options
		outFile    string
		bufferSize byteSize // 0: the default (trace.DefaultRingbufSize); stat: no flag
		pid, tid   uint32
		interval   time.Duration
	)
	cmd := &cobra.Command{
		Use:     "trace [flags] PATTERN... [-- COMMAND ARGS...]",
		Short:   "Trace kernel functions, one line per entry and exit, in any attach mode the kernel has",
		Long:    traceLong(),
		Example: traceExample,
		Args:    cobra.MinimumNArgs(1),
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
			if cmd.Flags().Changed("buffer-size") {
				if err := attach.ValidateRingbufSize(uint64(bufferSize), rings.OnlineSlots()); err != nil {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--buffer-size: %w", err))
				}
			}
			o.RingbufSize = uint32(bufferSize)
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
			var err error
			if o.NoSpecialize, err = noSpecialize(); err != nil {
				return err
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
			ctx, stop := signalContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			o.Progress = attachProgress(cmd)
			_, err = trace.Run(ctx, o)
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
histogram bucket holding the nearest rank: within 1/16 of the exact value.
--hist adds a log2 histogram per function; --output json writes one JSON line
("type":"stat") per table. It is trace --quiet --summary. The last line on
stderr counts the calls in the tables and says what was lost.

--mode names the kernel attach paths a mode links, joined by '+':
` + modesHelp() + `auto picks from what the kernel supports and how many functions match.`
		cmd.Example = `  ftprobe stat 'vfs_*' --duration 10s
  ftprobe stat --hist --interval 1s vfs_read -- ftprobe workload read --count 100000
  ftprobe stat --output json do_sys_openat2 -- ftprobe workload openfail`
	}
	traceFlags(cmd.Flags(), &o, &traceVars{&outFile, &bufferSize, &pid, &tid, &interval}, stat)
	return cmd
}

// traceLong is trace's long help.
func traceLong() string {
	return `trace attaches to kernel functions and prints every entry and exit.

PATTERN is an exact name (do_sys_openat2), a glob (vfs_*), a module-qualified
name ('name [module]', module:glob) or name@ADDRESS for one copy of a
duplicated static function. Candidates come from available_filter_functions;
the trampoline modes also need a BTF prototype.

--mode names the kernel attach paths a mode links, joined by '+':
` + modesHelp() + `auto picks from what the kernel supports and how many functions match, and
says why. A function that never returns (do_exit, do_group_exit,
make_task_dead, ...) is traced at entry only, in every mode: no exit probe,
nothing counted lost for it.

--pid and --tid must name a live process and thread when the trace starts.

--entry FUNC records the PATTERN functions only inside FUNC's calls on the
same thread (outside them they return at once, counted) and prints one call
tree per FUNC call, the path to the first function that returned the error
marked with '!' and '<- error origin'.

With -- COMMAND, ftprobe starts the command, traces only its process tree
(filtered in the kernel) and exits with the command's status.`
}

// traceExample is trace's examples.
const traceExample = `  ftprobe trace do_sys_openat2 vfs_read -- ftprobe workload open --count 3
  ftprobe trace --mode ` + attach.ModeKprobeMulti + ` 'vfs_*' --exclude 'vfs_statx*' --duration 5s
  ftprobe trace --errors --output json do_sys_openat2 -o trace.jsonl
  ftprobe trace vfs_read --arg 'file->f_path.dentry->d_name.name' --filter 'count == 1' -- ftprobe workload read
  ftprobe trace do_sys_openat2 --filter 'ret == -ENOENT' --arg filename -- ftprobe workload openfail
  ftprobe trace --entry do_sys_openat2 --errors 'path_*' 'link_path_walk*' 'lookup_*' -- ftprobe workload openfail`

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
	if !slices.Contains(outputNames(false), o.Output) {
		return fmt.Errorf("--output %q: want %s", o.Output, orList(outputNames(false)))
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
	if o.RingbufSize != 0 {
		if err := attach.ValidateRingbufSize(uint64(o.RingbufSize), rings.OnlineSlots()); err != nil {
			return fmt.Errorf("--buffer-size: %w", err)
		}
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
