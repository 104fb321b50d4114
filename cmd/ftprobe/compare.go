package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

// compareOptions are compare's flags.
type compareOptions struct {
	cfg               bench.Config
	out               reportFiles
	attachNs, crowdKs string
	threads           string
	reader, schema    string
	merge             mergeArgs // --from, --baseline, --threshold
	quiet             bool
}

func newCompareCmd() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Benchmark the attach paths side by side: hit cost, attach time, crowding and streaming",
		Long:  compareLong(),
		Args: func(cmd *cobra.Command, args []string) error {
			// --schema merge: the flag's optional value as a word.
			if o.schema != "" && len(args) == 1 && isSchemaKind(args[0]) {
				o.schema = args[0]
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.schema != "" {
				return printSchema(cmd.OutOrStdout(), o.schema)
			}
			if err := o.check(); err != nil {
				return err
			}
			if len(o.merge.from) > 1 || o.merge.baseline != "" {
				return runMerge(cmd, o.merge, o.out)
			}
			if len(o.merge.from) == 1 {
				rep, err := bench.ReadReport(o.merge.from[0])
				if err != nil {
					return exitcode.Wrap(exitcode.BadInput, err)
				}
				return emitReport(cmd, rep, o.out)
			}
			return runCompare(cmd, &o)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// check validates every flag value that needs no kernel (exit 2).
func (o *compareOptions) check() error {
	var err error
	if o.cfg.AttachN, err = parseInts(o.attachNs, "--attach-n"); err != nil {
		return err
	}
	if o.cfg.CrowdK, err = parseInts(o.crowdKs, "--crowd-k"); err != nil {
		return err
	}
	if o.cfg.Threads, err = bench.ParseThreads(o.threads, runtime.NumCPU()); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := checkCompareChoices(o.cfg); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := bench.ValidModes(o.cfg.Modes); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := checkCompareNumbers(&o.cfg, o.reader); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := checkCompareOutputs(o.out); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	return nil
}

// runCompare measures this kernel and writes the report, the part
// measured so far when interrupted.
func runCompare(cmd *cobra.Command, o *compareOptions) error {
	if err := needPrivilege("compare"); err != nil {
		return err
	}
	kin := kfeat.Load()
	if !kfeat.TracefsMounted() {
		return exitcode.Wrap(exitcode.Unsupported, symbols.ErrNoTracefs)
	}
	k, _, err := trial.LoadKernel(kin)
	if err != nil {
		return symbolsError("compare", err)
	}
	cfg := o.cfg
	if !cmd.Flags().Changed("attach-n") && kin.Emulated == "QEMU TCG" && slices.Contains(cfg.Scenarios, "attach") {
		cfg.AttachN = []int{1, 10, 100}
		fmt.Fprintln(cmd.ErrOrStderr(), "ftprobe compare: emulated kernel: --attach-n defaults to 1,10,100 (1000 fentry attaches take many minutes under TCG)")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tty := false
	if f, ok := cmd.ErrOrStderr().(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	if !o.quiet {
		cfg.Progress = progressLine(cmd.ErrOrStderr(), tty)
	}
	if err := bench.ValidateTarget(k, cfg.Target); err != nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("compare: %w", err))
	}
	cfg.Version = version + " (" + revision + ")"
	if cfg.NoSpecialize, err = noSpecialize(); err != nil {
		return err
	}
	if cfg.GeneralObject, err = generalObject(); err != nil {
		return err
	}
	rep, err := bench.Run(ctx, kin, k, cfg)
	if !o.quiet && tty {
		fmt.Fprintln(cmd.ErrOrStderr())
	}
	if rep != nil {
		if eerr := emitReport(cmd, rep, o.out); eerr != nil {
			return eerr
		}
	}
	if err != nil {
		code := exitcode.Failure
		if errors.Is(err, bench.ErrBadInput) {
			code = exitcode.BadInput
		}
		return exitcode.Wrap(code, fmt.Errorf("compare: %w", err))
	}
	return nil
}

// progressLine prints progress messages to w: one line redrawn on a
// terminal, plain lines in a log.
func progressLine(w io.Writer, tty bool) func(string) {
	return func(m string) {
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", m)
		} else {
			fmt.Fprintln(w, m)
		}
	}
}

// addFlags defines compare's flags on cmd.
func (o *compareOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&o.cfg.Scenarios, "scenario", bench.Names(bench.Scenarios, true), "scenarios to run: "+strings.Join(bench.Names(bench.Scenarios, false), ", ")+" (described above)")
	f.StringSliceVar(&o.cfg.Triggers, "trigger", bench.Names(bench.Triggers, true), "hit scenario's triggers: "+strings.Join(bench.Names(bench.Triggers, false), ", "))
	f.StringSliceVar(&o.cfg.Bodies, "body", bench.Names(bench.Bodies, true), "hit scenario's program bodies: "+strings.Join(bench.Names(bench.Bodies, false), ", ")+" (described above)")
	f.StringSliceVar(&o.cfg.Modes, "mode", nil, "hit modes to measure (default all): "+strings.Join(bench.HitModeNames(), ", "))
	f.StringVar(&o.threads, "threads", "1", "hit scenario: numbers of threads calling the target at once, each pinned to its own CPU (comma-separated; "+bench.ThreadsAll+": every CPU; 1 is always measured, the reference of the others)")
	f.IntVar(&o.cfg.Runs, "runs", 5, "measured runs per mode (after one warm-up)")
	f.IntVar(&o.cfg.Calls, "calls", 200000, "calls of the target per measurement (kernel trigger)")
	f.IntVar(&o.cfg.SyscallCalls, "syscall-calls", 20000, "calls per measurement (syscall trigger)")
	f.IntVar(&o.cfg.Batch, "batch", 1000, "kernel trigger: calls per BPF_PROG_TEST_RUN")
	f.StringVar(&o.attachNs, "attach-n", "1,10,100,1000", "attach scenario: numbers of functions")
	f.StringVar(&o.crowdKs, "crowd-k", "0,10,100", "crowd scenario: numbers of other traced functions")
	f.StringSliceVar(&o.cfg.CrowdBy, "crowd-by", bench.Names(bench.CrowdBys, true), "crowd scenario: who traces the K other functions: "+choicesInline(bench.CrowdBys))
	f.Uint32Var(&o.cfg.RingbufSize, "buffer-size", 4<<20, "record buffer bytes per CPU for streaming, and for trace bodies with --reader during (at least this much with --reader after)")
	f.StringVar(&o.reader, "reader", "after", "trace bodies' record reader: after (drains after each timed run, from buffers sized to hold it: the hit cost is what the traced thread pays) or during (drains while the calls are timed, as trace does: its work counts where it shares a CPU with the measured thread, always under single-threaded TCG)")
	f.IntVar(&o.cfg.StreamCalls, "stream-calls", 200000, "calls in the streaming scenario")
	f.StringVar(&o.cfg.Target, "target", "", "syscall trigger: probe this function instead of the getppid(2) handler (it must run once per getppid call; differences are reported as misses)")
	f.StringVar(&o.out.json, "json", "", "write the report as JSON to FILE (schema ftprobe-compare/v1, raw samples included); - prints it instead of the table")
	f.StringArrayVar(&o.merge.from, "from", nil, "render a saved JSON report (table, --plot, --markdown) instead of measuring; repeated, put the reports side by side: one table per scenario, a column per kernel, columns grouped by clock (icount, tcg, hw), --json writing the merged document ("+bench.MergeSchemaID+")")
	f.StringVar(&o.merge.baseline, "baseline", "", "with --from: compare every cell with the same one in OLD.json (a compare report or a merged document); exit 1 when a cell regressed (see above)")
	f.Float64Var(&o.merge.threshold, "threshold", bench.DefaultThreshold, "with --baseline: percent of the old median a cell must rise by, past both reports' run-to-run ranges, to be a regression")
	f.StringVar(&o.out.plot, "plot", "", "draw ns/hit by mode and attach time against N into FILE.svg or FILE.png")
	f.StringVar(&o.out.markdown, "markdown", "", "write the hit costs as Markdown tables to FILE (ns over baseline, x empty, x timed; what docs/benchmarks.md shows)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	f.StringVar(&o.schema, "schema", "", "print the JSON Schema of the --json document and exit: report (one run, "+bench.SchemaID+"; the default) or merge (several --from, "+bench.MergeSchemaID+")")
	f.Lookup("schema").NoOptDefVal = "report"
}

// compareLong is compare's long help, built from the registries of the
// bench package: scenarios, hit modes, bodies and triggers.
func compareLong() string {
	var b strings.Builder
	b.WriteString("compare measures, on this kernel:\n")
	writeChoices(&b, bench.Scenarios)
	b.WriteString("\n" + wrap(fmt.Sprintf("Hit modes (--mode), each against the baseline (no probe) measured right before it: %s (%s with the %s trigger only).",
		strings.Join(bench.HitModeNames(), ", "), bench.ModeRawTP, bench.TriggerSyscall), "", "", helpWidth))
	fmt.Fprintf(&b, "\nBodies (--body; default %s):\n", strings.Join(bench.Names(bench.Bodies, true), ","))
	writeChoices(&b, bench.Bodies)
	b.WriteString(wrap(fmt.Sprintf("The %s body runs on every hit mode, the others on the modes that trace: %s. With the %s body in the run, every other body's row gets x %s (its ns over the %s program's, same mode and trigger); with the %s body, %s, %s and %s get x %s (over the %s body's).",
		bench.BodyEmpty, strings.Join(bench.TraceModes, ", "), bench.BodyEmpty, bench.BodyEmpty, bench.BodyEmpty,
		bench.BodyTimed, bench.BodyTrace, bench.BodyExitOnly, bench.BodyAgg, bench.BodyTimed, bench.BodyTimed), "", "", helpWidth))
	b.WriteString("\nTriggers (--trigger):\n")
	writeChoices(&b, bench.Triggers)
	b.WriteString("\nEach row is the median of --runs runs with min and max. A mode the kernel\nlacks keeps its row, marked unsupported.\n")
	b.WriteString("\n" + wrap("Across kernels: --from A.json --from B.json puts saved reports side by side, a column per kernel (release, arch and clock), the columns of each clock apart: icount (QEMU TCG counting instructions), tcg (QEMU TCG) or hw (a real CPU). With --baseline OLD.json each cell is compared with the same trigger, body and mode there (the column of the same arch that best matches its release and machine): it regressed when its min over runs is above the old max and its median rose by more than --threshold percent. ns over baseline, x empty and x timed are compared; against another clock or cpu model, the ratios only. Exit status 1 when a cell regressed, 0 when none did (improvements are listed, never fail); 2 on a file that is not a compare report of this version, is cut short, or measures the kernel and machine of another --from with other settings.", "", "", helpWidth))
	return b.String()
}

// writeChoices writes one entry per choice: its name and description,
// wrapped under it.
func writeChoices(b *strings.Builder, cs []bench.Choice) {
	w := 0
	for _, c := range cs {
		w = max(w, len(c.Name))
	}
	for _, c := range cs {
		b.WriteString(wrap(c.Desc, fmt.Sprintf("  %-*s  ", w, c.Name), strings.Repeat(" ", w+4), helpWidth))
	}
}

// choicesInline is "a (what a does), b (what b does)".
func choicesInline(cs []bench.Choice) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Name+" ("+c.Desc+")")
	}
	return strings.Join(parts, ", ")
}

// checkCompareChoices checks the values of compare's list flags against
// the bench registries.
func checkCompareChoices(cfg bench.Config) error {
	for _, c := range []struct {
		flag      string
		got, want []string
	}{
		{"--scenario", cfg.Scenarios, bench.Names(bench.Scenarios, false)},
		{"--trigger", cfg.Triggers, bench.Names(bench.Triggers, false)},
		{"--body", cfg.Bodies, bench.Names(bench.Bodies, false)},
		{"--crowd-by", cfg.CrowdBy, bench.Names(bench.CrowdBys, false)},
	} {
		for _, g := range c.got {
			if !slices.Contains(c.want, g) {
				return fmt.Errorf("%s %q: want %s", c.flag, g, strings.Join(c.want, ", "))
			}
		}
	}
	return nil
}

// checkCompareOutputs checks the files compare would write: the plot's
// extension, and that each can be created.
func checkCompareOutputs(out reportFiles) error {
	if out.plot != "" && !strings.HasSuffix(out.plot, ".svg") && !strings.HasSuffix(out.plot, ".png") {
		return fmt.Errorf("--plot %s: want FILE.svg or FILE.png", out.plot)
	}
	for _, o := range [][2]string{{"--json", out.json}, {"--plot", out.plot}, {"--markdown", out.markdown}} {
		if err := checkOutPath(o[0], o[1]); err != nil {
			return err
		}
	}
	return nil
}

// reportFiles are the files compare writes beside its table: "" for
// none, "-" for JSON on stdout instead of the table.
type reportFiles struct{ json, plot, markdown string }

// rendered is what compare writes: one report or several merged.
type rendered interface {
	WriteJSON(io.Writer) error
	WriteText(io.Writer)
	WriteMarkdown(io.Writer) error
	Plot(string) error
}

func emitReport(cmd *cobra.Command, rep rendered, out reportFiles) error {
	if out.json == "-" {
		if err := rep.WriteJSON(cmd.OutOrStdout()); err != nil {
			return err
		}
	} else {
		rep.WriteText(cmd.OutOrStdout())
	}
	write := func(path string, to func(io.Writer) error) error {
		f, err := os.Create(path)
		if err != nil {
			return exitcode.Wrap(exitcode.BadInput, err)
		}
		if err := to(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if out.json != "" && out.json != "-" {
		if err := write(out.json, rep.WriteJSON); err != nil {
			return err
		}
	}
	if out.markdown != "" {
		if err := write(out.markdown, rep.WriteMarkdown); err != nil {
			return fmt.Errorf("markdown: %w", err)
		}
	}
	if out.plot != "" {
		if err := rep.Plot(out.plot); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	return nil
}

func parseInts(s, flag string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s %q: want comma-separated non-negative integers", flag, s))
		}
		out = append(out, n)
	}
	return out, nil
}

// checkCompareNumbers checks compare's buffer size, reader and counts,
// and sets cfg.ReaderDuring from reader. Its errors are bad input.
func checkCompareNumbers(cfg *bench.Config, reader string) error {
	if err := attach.ValidateRingbufSize(uint64(cfg.RingbufSize), rings.OnlineSlots()); err != nil {
		return fmt.Errorf("--buffer-size: %w", err)
	}
	switch reader {
	case "after":
	case "during":
		cfg.ReaderDuring = true
	default:
		return fmt.Errorf("--reader %q: want after or during", reader)
	}
	if cfg.Runs < 1 || cfg.Calls < 1 || cfg.Batch < 1 {
		return fmt.Errorf("--runs, --calls and --batch must be positive")
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--syscall-calls", cfg.SyscallCalls}, {"--stream-calls", cfg.StreamCalls}} {
		if c.v < 1 {
			return fmt.Errorf("%s %d: want 1 or more", c.flag, c.v)
		}
	}
	return nil
}
