package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
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
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

func newCompareCmd() *cobra.Command {
	var (
		cfg                          bench.Config
		jsonFile, plotFile, attachNs string
		crowdKs, from, reader        string
		quiet, schema                bool
	)
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Benchmark the attach paths side by side: fentry/fexit trampolines versus kprobe.multi (fprobe)",
		Long: `compare measures, on this kernel:
  hit     cost per call of the target with an empty counting body in every
          mode:
          ` + wrapList(bench.HitModes, 10, 66) + `;
          and with ftprobe's trace program in the trace modes among them:
          ` + wrapList(bench.TraceModes, 10, 66) + `;
          triggers: kernel (BPF_PROG_TEST_RUN driver calling
          bpf_get_numa_node_id() in batches, as the kernel's bench trig-*)
          and syscall (getppid(2) loop, probe on its handler)
  attach  wall time to attach and detach N functions: one kprobe.multi link
          versus N fentry (fexit) links versus one fentry.multi or
          fsession.multi link (7.x), with the programs' pinned memory
  crowd   hit cost of fentry and kprobe.multi while K other functions are
          traced by K fentry links or one kprobe.multi link (--crowd-by), with
          the target alone and shared with the other attach path
  stream  events per second delivered through the ringbuf, and drops
The baseline is re-measured right before every mode; medians of --runs runs
with min and max. A mode the kernel lacks keeps its row, marked unsupported.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if schema {
				_, err := cmd.OutOrStdout().Write(bench.Schema)
				return err
			}
			var err error
			if cfg.AttachN, err = parseInts(attachNs, "--attach-n"); err != nil {
				return err
			}
			if cfg.CrowdK, err = parseInts(crowdKs, "--crowd-k"); err != nil {
				return err
			}
			for _, c := range []struct {
				flag      string
				got, want []string
			}{
				{"--scenario", cfg.Scenarios, []string{"hit", "attach", "crowd", "stream"}},
				{"--trigger", cfg.Triggers, []string{bench.TriggerKernel, bench.TriggerSyscall}},
				{"--body", cfg.Bodies, []string{bench.BodyEmpty, bench.BodyTrace, bench.BodyExitOnly, bench.BodyAgg, bench.BodyFiltered, bench.BodyPredicate, bench.BodyWindow, bench.BodyTimed}},
			} {
				for _, g := range c.got {
					if !slices.Contains(c.want, g) {
						return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s %q: want %s", c.flag, g, strings.Join(c.want, ", ")))
					}
				}
			}
			if err := checkCompareModes(cfg.Modes); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			if err := bench.ValidModes(cfg.Modes); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			for _, by := range cfg.CrowdBy {
				if by != bench.CrowdByFentry && by != bench.CrowdByKprobeMulti {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--crowd-by %q: want %s or %s", by, bench.CrowdByFentry, bench.CrowdByKprobeMulti))
				}
			}
			if err := attach.ValidateRingbufSize(cfg.RingbufSize); err != nil {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--buffer-size: %w", err))
			}
			switch reader {
			case "after":
			case "during":
				cfg.ReaderDuring = true
			default:
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--reader %q: want after or during", reader))
			}
			if cfg.Runs < 1 || cfg.Calls < 1 || cfg.Batch < 1 {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--runs, --calls and --batch must be positive"))
			}
			for _, c := range []struct {
				flag string
				v    int
			}{{"--syscall-calls", cfg.SyscallCalls}, {"--stream-calls", cfg.StreamCalls}} {
				if c.v < 1 {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s %d: want 1 or more", c.flag, c.v))
				}
			}
			if plotFile != "" && !strings.HasSuffix(plotFile, ".svg") && !strings.HasSuffix(plotFile, ".png") {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--plot %s: want FILE.svg or FILE.png", plotFile))
			}
			for _, o := range [][2]string{{"--json", jsonFile}, {"--plot", plotFile}} {
				if err := checkOutPath(o[0], o[1]); err != nil {
					return exitcode.Wrap(exitcode.BadInput, err)
				}
			}
			if from != "" {
				rep, err := bench.ReadReport(from)
				if err != nil {
					return exitcode.Wrap(exitcode.BadInput, err)
				}
				return emitReport(cmd, rep, jsonFile, plotFile)
			}
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
			if !quiet {
				// One line redrawn on a terminal; plain lines in a log.
				cfg.Progress = func(m string) {
					if tty {
						fmt.Fprintf(cmd.ErrOrStderr(), "\r\033[K%s", m)
					} else {
						fmt.Fprintln(cmd.ErrOrStderr(), m)
					}
				}
			}
			if err := bench.ValidateTarget(k, cfg.Target); err != nil {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("compare: %w", err))
			}
			cfg.Version = version + " (" + revision + ")"
			rep, err := bench.Run(ctx, kin, k, cfg)
			if !quiet && tty {
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			if rep != nil {
				if eerr := emitReport(cmd, rep, jsonFile, plotFile); eerr != nil {
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
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Scenarios, "scenario", []string{"hit", "attach", "crowd", "stream"}, "scenarios to run: hit, attach, crowd, stream")
	f.StringSliceVar(&cfg.Triggers, "trigger", []string{bench.TriggerKernel, bench.TriggerSyscall}, "hit-cost triggers: kernel, syscall")
	f.StringSliceVar(&cfg.Bodies, "body", []string{bench.BodyEmpty, bench.BodyTrace, bench.BodyExitOnly, bench.BodyAgg, bench.BodyFiltered},
		"program bodies: empty (counts hits), trace (entry and exit records streamed), exit-only (one record per call, at exit), agg (in-kernel tables, as stat), filtered (trace program whose pid filter rejects every call); opt-in: predicate (trace program whose --filter predicate on arg0 rejects every call at entry), window (trace program in --entry mode, the target outside every window: every call rejected at entry; 7.3 under TCG: 0.66-1.40x the empty program on amd64, 1.38x on arm64, README), timed (the counting program plus the two timestamps of a duration: the floor under trace, exit-only and agg; with empty in the run it gets x empty, and trace, exit-only and agg get x timed: --body empty,timed,agg,trace)")
	f.StringSliceVar(&cfg.Modes, "mode", nil, "hit-cost modes to measure (default all; the trace bodies measure the trace modes among them): "+strings.Join(compareModeNames(), ", "))
	f.IntVar(&cfg.Runs, "runs", 5, "measured runs per mode (after one warm-up)")
	f.IntVar(&cfg.Calls, "calls", 200000, "calls of the target per measurement (kernel trigger)")
	f.IntVar(&cfg.SyscallCalls, "syscall-calls", 20000, "calls per measurement (syscall trigger)")
	f.IntVar(&cfg.Batch, "batch", 1000, "kernel trigger: calls per BPF_PROG_TEST_RUN")
	f.StringVar(&attachNs, "attach-n", "1,10,100,1000", "attach scenario: numbers of functions")
	f.StringVar(&crowdKs, "crowd-k", "0,10,100", "crowd scenario: numbers of other traced functions")
	f.StringSliceVar(&cfg.CrowdBy, "crowd-by", []string{bench.CrowdByFentry, bench.CrowdByKprobeMulti}, "crowd scenario: who traces the K other functions: fentry (K links), kprobe.multi (one link)")
	f.Uint32Var(&cfg.RingbufSize, "buffer-size", 4<<20, "ringbuf bytes for streaming, and for trace bodies with --reader during (at least this much with --reader after)")
	f.StringVar(&reader, "reader", "after", "trace bodies' ringbuf reader: after (drains after each timed run, from a ringbuf sized to hold it: the hit cost is what the traced thread pays) or during (drains while the calls are timed, as trace does: its work counts where it shares a CPU with the measured thread, always under single-threaded TCG)")
	f.IntVar(&cfg.StreamCalls, "stream-calls", 200000, "calls in the streaming scenario")
	f.StringVar(&cfg.Target, "target", "", "syscall trigger: probe this function instead of the getppid(2) handler (it must run once per getppid call; differences are reported as misses)")
	f.StringVar(&jsonFile, "json", "", "write the report as JSON to FILE (schema ftprobe-compare/v1, raw samples included); - prints it instead of the table")
	f.StringVar(&from, "from", "", "render a saved JSON report (table, --plot) instead of measuring")
	f.StringVar(&plotFile, "plot", "", "draw ns/hit by mode and attach time against N into FILE.svg or FILE.png")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&schema, "schema", false, "print the JSON Schema of the --json document and exit")
	return cmd
}

func emitReport(cmd *cobra.Command, rep *bench.Report, jsonFile, plotFile string) error {
	if jsonFile == "-" {
		if err := rep.WriteJSON(cmd.OutOrStdout()); err != nil {
			return err
		}
	} else {
		rep.WriteText(cmd.OutOrStdout())
	}
	if jsonFile != "" && jsonFile != "-" {
		f, err := os.Create(jsonFile)
		if err != nil {
			return exitcode.Wrap(exitcode.BadInput, err)
		}
		if err := rep.WriteJSON(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if plotFile != "" {
		if err := rep.Plot(plotFile); err != nil {
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
