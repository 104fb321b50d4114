// Package trace runs one ftprobe trace: resolve patterns, attach in the
// chosen mode, optionally run a command under trace, stream events from the
// ringbuf to a writer, and account for every loss.
package trace

import (
	"encoding/json"

	"github.com/cilium/ebpf/btf"

	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/stats"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

// Options of one trace.
type Options struct {
	Patterns     []string
	Excludes     []string
	Mode         string // auto, fentry, kprobe-multi
	Filters      attach.Filters
	Output       string // text, json or perfetto
	Out          io.Writer
	Log          io.Writer // plan, notes and summary
	Verbose      bool
	Strict       bool
	Count        int           // stop after this many events (0 = no limit)
	Duration     time.Duration // stop after this long (0 = no limit)
	MaxFunctions int
	RingbufSize  uint32
	Command      []string // run and trace this command's process tree
	// Self is the path of the ftprobe executable, used to start Command
	// held until the trace is attached (default /proc/self/exe).
	Self string
	// Ready, when set, is called once everything is attached.
	Ready func()
	// Symbols reuses an already loaded symbol view (tests, repeated runs).
	Symbols *symbols.Kernel
	// Progress, when set, is called as fentry functions attach.
	Progress func(done, total int)
	// Graph formats text as a call graph (events.Graph).
	Graph bool
	// Summary prints per-function calls, errors by errno and latency
	// percentiles at exit; Hist adds log2 latency histograms.
	Summary, Hist bool
	// Quiet streams no per-call record: the kernel builds the tables
	// (Summary, Hist) and they are written to Out, as text or JSON lines
	// ("type":"stat"), every Interval (that interval's calls) and at the
	// end (every call).
	Quiet bool
	// Interval, with Quiet, writes the tables at this period.
	Interval time.Duration
	// intervalSet: --interval was given (0 is then an error).
	intervalSet bool
	// Strings reads `char *` arguments at entry (attach.Options.Strings).
	Strings bool
	// Stack records and symbolizes the kernel stack at entry
	// (attach.Options.Stack).
	Stack bool
	// StatsEvery, when set, writes a progress line to Log at this interval:
	// events and their rate, losses so far, and ftprobe's own resident set
	// and live Go heap (to check they stay flat over a long trace).
	StatsEvery time.Duration
	// Args are --arg expressions (internal/expr), recorded at entry of
	// the functions whose parameters they name; Predicates are --filter
	// expressions, each applied to the functions it names, decided in the
	// kernel at entry, or at exit for their parts on ret.
	Args       []string
	Predicates []string
	// DryRun resolves the patterns, compiles the expressions, loads
	// (verifies) every program of the chosen mode, attaches nothing,
	// prints the plan and returns a nil Summary.
	DryRun bool
}

// MemSample is ftprobe's memory at one --stats-every tick.
type MemSample struct {
	At       time.Duration `json:"at_ns"`      // since the trace started
	Events   uint64        `json:"events"`     // delivered so far
	RSSBytes uint64        `json:"rss_bytes"`  // resident set (/proc/self/statm)
	Heap     uint64        `json:"heap_bytes"` // Go live heap after the last GC (runtime/metrics /gc/heap/live:bytes)
}

// sampleMem reads ftprobe's resident set size and Go heap.
func sampleMem() (rss, heap uint64) {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	// The live heap as of the last GC: what a leak grows. (HeapInuse also
	// counts garbage not yet collected, up to GOGC's 2x of the live heap.)
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		heap = m[0].Value.Uint64()
	}
	return rss, heap
}

// Summary is the final account of a trace (also written as the last JSON
// record, with "type":"summary").
type Summary struct {
	// Type is "summary": the record's kind among the JSON lines of a
	// trace (entry, exit, comm, stat, summary).
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	Functions int    `json:"functions"`
	// Skipped counts the matched functions not traced (the plan's skip
	// reasons).
	Skipped int    `json:"skipped_functions"`
	Events  uint64 `json:"events"`
	Entries uint64 `json:"entries"`
	Exits   uint64 `json:"exits"`
	// Elapsed is the tracing window: from attached to the stop
	// (--duration bounds it), without attaching and detaching.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Attach is the time resolving and attaching took (trampolines under
	// emulation: about 0.3 s a function), Detach the time detaching took;
	// neither counts towards --duration.
	Attach time.Duration `json:"attach_ns"`
	Detach time.Duration `json:"detach_ns"`
	// MaxRSSBytes is ftprobe's peak resident set (getrusage ru_maxrss).
	MaxRSSBytes uint64 `json:"max_rss_bytes"`
	// EntryHits counts the entries that passed the filters in the
	// kernel, emitted or not (Losses.EntryHits).
	EntryHits uint64 `json:"entry_hits"`
	// ExitHits counts the exits that passed the filters, or whose entry
	// did (Losses.ExitHits).
	ExitHits uint64        `json:"exit_hits"`
	Losses   attach.Losses `json:"losses"`
	// FilterRejected counts the calls a --filter rejected in the kernel
	// (Losses.FilterRejects; not a loss).
	FilterRejected uint64 `json:"filter_rejected"`
	// PerFunction counts the events per function name.
	PerFunction map[string]int `json:"per_function"`
	// TargetExited says when the --pid process or --tid thread exited
	// during the trace ("--pid 123 exited 1.2s into the trace"; checked
	// every 100 ms from /proc), "" when it outlived the trace.
	TargetExited string `json:"target_exited,omitempty"`
	// EntryOnly names the functions traced at entry only, with the reason
	// ("do_exit, do_group_exit (noreturn)"): their calls have no exit by
	// design and are neither lost nor in flight ("" = none).
	EntryOnly string `json:"entry_only,omitempty"`
	// ExitStatus is the traced command's exit status (-- COMMAND; 0 is
	// left out).
	ExitStatus int `json:"command_exit_status,omitempty"`
	// Mem holds the --stats-every samples.
	Mem []MemSample `json:"mem_samples,omitempty"`
	// Deferred is set when --min-duration or --errors decide at exit which
	// calls are shown; Losses.ExitHits then counts every call seen.
	Deferred bool `json:"deferred,omitempty"`
}

// JSON is the summary as one JSON line, marshalled through Summary's tags
// (its JSON Schema: SummarySchema): Type is set to "summary" and the
// top-level hit and rejection counts are taken from Losses.
func (s *Summary) JSON() []byte {
	c := *s
	c.Type = "summary"
	c.EntryHits, c.ExitHits, c.FilterRejected = s.Losses.EntryHits, s.Losses.ExitHits, s.Losses.FilterRejects
	if c.PerFunction == nil {
		c.PerFunction = map[string]int{}
	}
	b, err := json.Marshal(&c)
	if err != nil { // only plain fields: cannot happen
		panic(fmt.Sprintf("trace summary JSON: %v", err))
	}
	return append(b, '\n')
}

// autoFentryLimit: above this many functions auto prefers kprobe-multi,
// whose one link attaches in one syscall, over one trampoline per function.
const autoFentryLimit = 64

// Modes are the attach modes --mode accepts besides auto.
var Modes = []string{attach.ModeFentry, attach.ModeKprobeMulti, attach.ModeKprobe, attach.ModeFSession, attach.ModeFentryMulti}

// Run performs the trace until ctx ends, Count events, Duration, or the end
// of Command. It returns the summary; the error carries an exit code
// (ClassOf; cmd/ftprobe turns it into the exit code).
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	modes := []string{o.Mode}
	if o.Mode == "" || o.Mode == "auto" {
		modes = nil
	} else if !slices.Contains(Modes, o.Mode) {
		return nil, badInput(fmt.Errorf("--mode %q: want auto, %s", o.Mode, strings.Join(Modes, ", ")))
	}
	if err := o.CheckQuiet(); err != nil {
		return nil, badInput(err)
	}
	if o.RingbufSize != 0 {
		if err := attach.ValidateRingbufSize(o.RingbufSize); err != nil {
			return nil, badInput(fmt.Errorf("--buffer-size: %w", err))
		}
	}
	if err := o.Filters.Validate(); err != nil {
		return nil, badInput(fmt.Errorf("trace: %w", err))
	}
	if err := CheckTargets(o.Filters); err != nil {
		return nil, badInput(fmt.Errorf("trace: %w", err))
	}
	if err := o.CheckExprs(); err != nil {
		return nil, badInput(err)
	}
	if o.DryRun {
		o.Verbose = true // the plan is the output
	}
	kin := kfeat.Load()
	if !kfeat.TracefsMounted() {
		return nil, unsupported(symbols.ErrNoTracefs)
	}
	if !kfeat.HasTracingCaps() {
		return nil, badInput(fmt.Errorf("trace: %w: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run as root", kfeat.ErrPrivilege))
	}
	t0 := time.Now()
	k := o.Symbols
	var err error
	if k == nil {
		k, _, err = trial.LoadKernel(kin)
	}
	if errors.Is(err, symbols.ErrHiddenAddresses) {
		return nil, badInput(fmt.Errorf("trace: %w: %w", kfeat.ErrPrivilege, err))
	}
	if err != nil {
		return nil, unsupported(err)
	}
	if o.Verbose {
		from := "kallsyms and available_filter_functions"
		if k.FromCache {
			from = "the symbol cache (" + symbols.SymbolCacheDir + ", this boot and module set)"
		}
		fmt.Fprintf(o.Log, "ftprobe: read %d text symbols and %d available_filter_functions from %s in %s\n", len(k.Syms), len(k.Filter), from, time.Since(t0).Round(time.Millisecond))
	}
	var cmd *exec.Cmd
	var gate *os.File
	if len(o.Command) > 0 {
		o.Filters.Tree = true
	}
	var tracer *attach.Tracer
	var res *symbols.Resolution
	tAttach := time.Now()
	if modes == nil {
		tracer, res, err = openAuto(k, kin, o)
	} else {
		res, err = k.Resolve(o.Patterns, o.Excludes, o.Mode, o.MaxFunctions)
		if err != nil {
			return nil, badInput(fmt.Errorf("trace: %w", err))
		}
		printPlan(o, k, res)
		if err := o.checkAggEntryOnly(res); err != nil {
			return nil, badInput(err)
		}
		plans, perr := o.compileExprs(k, res.Funcs)
		if perr != nil {
			return nil, perr
		}
		tracer, err = attach.Open(attach.Options{Mode: o.Mode, Funcs: res.Funcs, Filters: o.Filters, RingbufSize: o.RingbufSize, Strings: o.Strings, Stack: o.Stack, Aggregate: o.Summary || o.Hist, NoEvents: o.Quiet, Kernel: kin, BTF: k.Types, Progress: o.Progress, Exprs: plans, DryRun: o.DryRun})
	}
	if err != nil {
		return nil, classify(err)
	}
	defer tracer.Close()
	if o.DryRun {
		fmt.Fprintf(o.Log, "ftprobe: dry run: %d functions in %s mode, %d programs loaded and verified in %s, nothing attached\n",
			len(res.Funcs), tracer.Mode, tracer.Verified, time.Since(tAttach).Round(time.Millisecond))
		return nil, nil
	}
	attachTook := time.Since(tAttach)
	printTrials(o, k)
	if o.Verbose {
		fmt.Fprintf(o.Log, "ftprobe: resolved and attached in %s (attaching %s; --duration counts from here)\n", time.Since(t0).Round(time.Millisecond), attachTook.Round(time.Millisecond))
	}
	for _, f := range tracer.Failed {
		fmt.Fprintf(o.Log, "ftprobe: not attached: %v\n", f.Err)
	}
	variant := ""
	if tracer.Variant != "" {
		variant = " (" + tracer.Variant + ")"
	}
	fmt.Fprintf(o.Log, "ftprobe: tracing %d functions in %s mode%s (%s)\n", len(tracer.Attached), tracer.Mode, variant, res.SkipSummary())
	var syms events.Symbolizer
	if o.Stack {
		// Read now: the BPF programs and trampolines just loaded are in
		// kallsyms (module "bpf") and appear on fentry stacks.
		sy, err := symbols.LoadSymbolizer()
		if err != nil {
			return nil, failed(fmt.Errorf("trace --stack: %w", err))
		}
		syms = sy
	}
	table := make(events.Table, len(res.Funcs))
	for _, f := range res.Funcs {
		table[f.ID] = f
	}
	rd, err := tracer.Reader()
	if err != nil {
		return nil, fmt.Errorf("ringbuf reader: %w", err)
	}
	defer rd.Close()

	cmdDone := make(chan error, 1)
	cmdExited := false
	var cmdErr error
	// stopCommand ends a command that is still running: SIGTERM, then
	// SIGKILL after 2 s, and collects its status.
	stopCommand := func() {
		if cmd == nil || cmdExited {
			return
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case cmdErr = <-cmdDone:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			cmdErr = <-cmdDone
		}
		cmdExited = true
	}
	if len(o.Command) > 0 {
		cmd, gate, err = startGated(o)
		if err != nil {
			var le errLauncher
			if errors.As(err, &le) {
				return nil, failed(err)
			}
			return nil, badInput(err)
		}
		go func() { cmdDone <- cmd.Wait() }()
		// Whatever happens from here on, the command does not outlive the trace.
		defer stopCommand()
		if err := tracer.AddTGIDAtExec(uint32(cmd.Process.Pid)); err != nil {
			gate.Close()
			return nil, fmt.Errorf("trace: filter command: %w", err)
		}
		gate.Write([]byte{1})
		gate.Close()
	}
	if o.Ready != nil {
		o.Ready()
	}
	start := time.Now()
	sum := &Summary{Mode: tracer.Mode, Functions: len(tracer.Attached), Skipped: len(res.Skipped), PerFunction: map[string]int{},
		Deferred:  o.Filters.MinDuration > 0 || o.Filters.ErrorsOnly,
		EntryOnly: strings.TrimPrefix(symbols.EntryOnlySummary(tracer.Attached), "entry only: ")}
	w := bufio.NewWriterSize(o.Out, 64<<10)
	var text *events.Text
	var js *events.JSON
	var graph *events.Graph
	var perf *events.Perfetto
	switch {
	case o.Output == "perfetto":
		perf = &events.Perfetto{Table: table}
	case o.Output == "json":
		js = &events.JSON{Table: table, Syms: syms}
	case o.Graph:
		graph = &events.Graph{Table: table}
	default:
		text = &events.Text{Table: table, Syms: syms}
	}
	var (
		rec       ringbuf.Record
		ev        bpfobj.TraceEvent
		dec       events.Decoder
		buf       []byte
		countDone bool
		stopped   bool // ftprobe ended the trace (signal, --duration, --count)
	)
	var deadline time.Time
	if o.Duration > 0 {
		deadline = start.Add(o.Duration)
	}
	// shouldStop polls every stop condition without blocking.
	shouldStop := func() bool {
		select {
		case <-ctx.Done():
			stopped = true
			return true
		case cmdErr = <-cmdDone:
			cmdExited = true
			return true
		default:
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			stopped = true
			return true
		}
		return false
	}
	// The --pid/--tid target, watched so the summary can say when it exited.
	target, targetFlag := o.Filters.TID, "--tid"
	if target == 0 {
		target, targetFlag = o.Filters.TGID, "--pid"
	}
	watchTarget := func() {
		if target != 0 && sum.TargetExited == "" && !taskAlive("/proc", target) {
			sum.TargetExited = fmt.Sprintf("%s %d exited %s into the trace", targetFlag, target, time.Since(start).Round(time.Millisecond))
		}
	}
	lastStats := time.Now()
	lastInterval := time.Now()
	var prevTables *stats.Table
	statsDue := func() bool { return o.StatsEvery > 0 && time.Since(lastStats) >= o.StatsEvery }
	// handle decodes and writes one record; it reports --count reached.
	handle := func() (bool, error) {
		isEvent, err := dec.Decode(rec.RawSample, &ev)
		if err != nil || !isEvent {
			return false, err
		}
		sum.Events++
		if ev.Kind == events.KindEntry {
			sum.Entries++
		} else {
			sum.Exits++
			sum.PerFunction[table.FuncName(ev.FuncId)]++
		}
		buf = buf[:0]
		switch {
		case perf != nil:
			perf.Add(&ev)
		case js != nil:
			buf = js.Append(buf, &ev)
		case graph != nil:
			buf = graph.Append(buf, &ev)
		default:
			buf = text.Append(buf, &ev)
		}
		if _, err := w.Write(buf); err != nil {
			return false, fmt.Errorf("write events: %w", err)
		}
		return o.Count > 0 && sum.Events >= uint64(o.Count), nil
	}
	for !countDone && !shouldStop() {
		rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
		for n := 1; ; n++ {
			err := rd.ReadInto(&rec)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("ringbuf read: %w", err)
			}
			if countDone, err = handle(); err != nil {
				return nil, failed(err)
			}
			// A busy ring never runs dry: poll the stop conditions anyway.
			if countDone || (n%256 == 0 && (shouldStop() || statsDue())) {
				break
			}
		}
		if err := w.Flush(); err != nil {
			return nil, failed(fmt.Errorf("write events: %w", err))
		}
		if o.Quiet && o.Interval > 0 && time.Since(lastInterval) >= o.Interval {
			lastInterval = time.Now()
			cur, err := Table(tracer, table)
			if err != nil {
				return nil, failed(err)
			}
			o.writeTables(w, cur.Sub(prevTables), time.Since(start), false)
			prevTables = cur
			if err := w.Flush(); err != nil {
				return nil, failed(fmt.Errorf("write tables: %w", err))
			}
		}
		if statsDue() {
			lastStats = time.Now()
			rss, heap := sampleMem()
			at := time.Since(start)
			sum.Mem = append(sum.Mem, MemSample{At: at, Events: sum.Events, RSSBytes: rss, Heap: heap})
			l, _ := tracer.Losses()
			lost := lossText(l)
			fmt.Fprintf(o.Log, "ftprobe: +%s: %d events (%.0f/s), rss %.1f MiB, live heap %.1f MiB; %s\n",
				at.Round(time.Second), sum.Events, float64(sum.Events)/at.Seconds(), float64(rss)/(1<<20), float64(heap)/(1<<20), lost)
		}
		watchTarget()
		if stopped || cmdExited {
			break
		}
	}
	if countDone {
		stopped = true
	}
	watchTarget()
	// Detach first so nothing new arrives, then drain what the kernel
	// already accepted (unless --count was reached), then read the counters.
	tDetach := time.Now()
	sum.Elapsed = tDetach.Sub(start)
	tracer.Detach()
	sum.Attach, sum.Detach = attachTook, time.Since(tDetach)
	if o.Verbose {
		fmt.Fprintf(o.Log, "ftprobe: traced for %s, detached %d functions in %s\n", sum.Elapsed.Round(time.Millisecond), len(tracer.Attached), sum.Detach.Round(time.Millisecond))
	}
	if !countDone {
		rd.SetDeadline(time.Now())
		for {
			err := rd.ReadInto(&rec)
			if err != nil {
				break
			}
			if _, err := handle(); err != nil {
				return nil, failed(err)
			}
		}
	}
	stopCommand()
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		sum.MaxRSSBytes = uint64(ru.Maxrss) * 1024 // ru_maxrss is in KiB on Linux
	}
	sum.Losses, _ = tracer.Losses()
	sum.Losses.SkippedFuncs = len(res.Skipped)
	if sum.Losses.RecursionMiss > 0 {
		var parts []string
		for p, n := range tracer.RecursionMisses() {
			parts = append(parts, fmt.Sprintf("%s %d", p, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(o.Log, "ftprobe: recursion misses by program (a program preempted or interrupted on its CPU and run again there): %s\n", strings.Join(parts, ", "))
	}
	if cmd != nil && !stopped {
		sum.ExitStatus = exitStatus(cmdErr)
	}
	if graph != nil {
		w.Write(graph.Flush(nil))
	}
	if perf != nil {
		if _, err := perf.WriteTo(w); err != nil {
			return sum, failed(fmt.Errorf("write perfetto trace: %w", err))
		}
		if perf.Skipped > 0 {
			fmt.Fprintf(o.Log, "ftprobe: perfetto: %d exits without a recorded entry have no slice\n", perf.Skipped)
		}
	}
	if o.Quiet {
		lat, err := Table(tracer, table)
		if err != nil {
			return sum, failed(err)
		}
		o.writeTables(w, lat, sum.Elapsed, true)
	}
	if js != nil {
		w.Write(sum.JSON())
	}
	if err := w.Flush(); err != nil {
		return sum, failed(fmt.Errorf("write events: %w", err))
	}
	if (o.Summary || o.Hist) && !o.Quiet {
		lat, err := Table(tracer, table)
		if err != nil {
			return sum, failed(err)
		}
		lat.WriteSummary(o.Log)
		if o.Hist {
			lat.WriteHist(o.Log)
		}
	}
	fmt.Fprintln(o.Log, sum.Line())
	if cmd != nil && sum.ExitStatus != 0 {
		return sum, commandStatus(sum.ExitStatus, nil)
	}
	if o.Strict && sum.Losses.Any() {
		return sum, failed(errors.New("trace: events were lost or incomplete (--strict)"))
	}
	return sum, nil
}

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

// openAuto picks the mode: fentry for up to autoFentryLimit functions
// (lower per-call cost), kprobe-multi above (one attach syscall), and the
// other one when the first is unsupported on this kernel.
func openAuto(k *symbols.Kernel, kin *kfeat.Info, o Options) (*attach.Tracer, *symbols.Resolution, error) {
	resF, errF := k.Resolve(o.Patterns, o.Excludes, attach.ModeFentry, 0)
	order := []string{attach.ModeFentry, attach.ModeKprobeMulti, attach.ModeKprobe}
	why := "fentry/fexit trampolines cost less per call"
	if errF != nil || len(resF.Funcs) > autoFentryLimit {
		order = []string{attach.ModeKprobeMulti, attach.ModeFentry, attach.ModeKprobe}
		why = "one kprobe.multi link attaches many functions in one syscall"
		if errF != nil {
			why = "not every function can take fentry"
		}
	}
	if errF == nil && len(resF.Funcs) <= autoFentryLimit && len(resF.Skipped) == 0 && attach.KernelHasAttachType("BPF_TRACE_FSESSION") {
		// 7.0: one trampoline program per function for entry and exit:
		// half fentry+fexit's programs and links, so it attaches in about
		// half the time (arm64 7.3: 76 functions in 47 s against 97 s),
		// and compare's trace body costs it no more per call (README).
		order = append([]string{attach.ModeFSession}, order...)
		why = "fsession: one trampoline program per function for entry and exit, half of fentry+fexit's programs and links"
	}
	if errF == nil && attach.KernelHasAttachType("BPF_TRACE_FENTRY_MULTI") {
		// 7.x: trampolines' per-call cost with one link for all functions;
		// where the kernel refuses the link (arm64 7.3), the order above.
		order = append([]string{attach.ModeFentryMulti}, order...)
		why = "this kernel has tracing multi links: trampoline per-call cost, all functions attached with one link"
	}
	var firstErr error
	var unavailable, tried []string
	for i, m := range order {
		res, err := k.Resolve(o.Patterns, o.Excludes, m, o.MaxFunctions)
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
		if (m == attach.ModeFentry || m == attach.ModeFentryMulti) && len(res.Skipped) > 0 {
			if t, mres, err := openMixed(k, kin, o, res, m); err == nil {
				return t, mres, nil
			} else if !errors.Is(err, kfeat.ErrUnsupported) {
				return nil, nil, err
			}
			// kprobe.multi is missing: fentry alone, with its skips.
		}
		plans, err := o.compileExprs(k, res.Funcs)
		if err != nil {
			return nil, nil, err
		}
		t, err := attach.Open(attach.Options{Mode: m, Funcs: res.Funcs, Filters: o.Filters, RingbufSize: o.RingbufSize, Strings: o.Strings, Stack: o.Stack, Aggregate: o.Summary || o.Hist, NoEvents: o.Quiet, Kernel: kin, BTF: k.Types, Progress: o.Progress, Exprs: plans, DryRun: o.DryRun})
		if err == nil {
			if i == 0 {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %d functions: %s\n", m, len(res.Funcs), why)
			} else if o.Verbose {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %d functions; unavailable here: %s\n", m, len(res.Funcs), strings.Join(unavailable, "; "))
			} else {
				fmt.Fprintf(o.Log, "ftprobe: auto mode picked %s for %d functions; %s unavailable here (--verbose says why)\n", m, len(res.Funcs), strings.Join(tried, ", "))
			}
			return t, res, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if !errors.Is(err, kfeat.ErrUnsupported) {
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
func openMixed(k *symbols.Kernel, kin *kfeat.Info, o Options, resF *symbols.Resolution, tramp string) (*attach.Tracer, *symbols.Resolution, error) {
	resK, err := k.Resolve(o.Patterns, o.Excludes, attach.ModeKprobeMulti, 0)
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
	t, err := attach.Open(attach.Options{Mode: attach.ModeMixed, MixedTrampoline: tramp, Funcs: fs, MultiFuncs: ms, Filters: o.Filters, RingbufSize: o.RingbufSize, Strings: o.Strings, Stack: o.Stack, Aggregate: o.Summary || o.Hist, NoEvents: o.Quiet, Kernel: kin, BTF: k.Types, Progress: o.Progress, Exprs: plans, DryRun: o.DryRun})
	if err != nil {
		return nil, nil, err
	}
	var parts []string
	for r, n := range why {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	fmt.Fprintf(o.Log, "ftprobe: auto mode: %d functions through %s trampolines (cheaper per call), %d through kprobe.multi because %s cannot take them: %s\n",
		len(fs), tramp, len(ms), tramp, strings.Join(parts, ", "))
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

// startGated starts o.Command through `ftprobe internal-exec`, which waits
// on a pipe until the caller has added the child to the filter, so not one
// call of the command is missed. It returns once the launcher runs (it
// says so on a second pipe): the launcher's own exec of ftprobe is then
// over, and the next exec in that process is the command's, where the
// tree filter starts tracing it (Tracer.AddTGIDAtExec).
func startGated(o Options) (*exec.Cmd, *os.File, error) {
	self := o.Self
	if self == "" {
		self = "/proc/self/exe"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	defer rr.Close()
	cmd := exec.Command(self, append([]string{"internal-exec", "--"}, o.Command...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{r, rw}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		rw.Close()
		return nil, nil, fmt.Errorf("start %s: %w", o.Command[0], err)
	}
	r.Close()
	rw.Close()
	rr.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := rr.Read(make([]byte, 1)); err != nil {
		w.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, fmt.Errorf("start %s: the launcher did not start: %w", o.Command[0], errLauncher{err})
	}
	return cmd, w, nil
}

// errLauncher marks a launcher that started but never said it runs: a
// runtime failure, not bad input.
type errLauncher struct{ error }

func (e errLauncher) Unwrap() error { return e.error }

// ExecGated is the child side of startGated: say it runs on fd 4, wait
// for the gate on fd 3, then exec argv.
func ExecGated(argv []string) error {
	ready := os.NewFile(4, "ready")
	ready.Write([]byte{1})
	ready.Close()
	gate := os.NewFile(3, "gate")
	b := make([]byte, 1)
	if _, err := gate.Read(b); err != nil {
		return fmt.Errorf("trace gate: %w", err)
	}
	gate.Close()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return commandStatus(127, fmt.Errorf("command %s: %w", argv[0], err))
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return commandStatus(126, fmt.Errorf("exec %s: %w", path, err))
	}
	return nil
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

// Line is the one-line summary.
func (s *Summary) Line() string {
	l := s.Losses
	note := ""
	if n := l.InFlight(); n > 0 {
		note = fmt.Sprintf(" (%d calls in flight at attach, detach or the command's exec: %d exits without entry, %d entries without exit)", n, l.NoEntry, l.OpenAtExit)
	}
	lost := lossTextNote(l, note)
	seen := ""
	if s.Deferred {
		seen = fmt.Sprintf(" of %d calls seen in the kernel (--min-duration/--errors chose)", l.ExitHits)
	}
	eo := ""
	if s.EntryOnly != "" {
		eo = "; entry only: " + s.EntryOnly
	}
	if s.TargetExited != "" {
		eo += "; " + s.TargetExited
	}
	// Attaching and detaching are outside the tracing window (and outside
	// --duration); when they took long, say how long.
	window := ""
	if s.Attach+s.Detach >= time.Second {
		window = fmt.Sprintf(" (attaching took %s, detaching %s)", s.Attach.Round(time.Millisecond), s.Detach.Round(time.Millisecond))
	}
	return fmt.Sprintf("ftprobe: %d events (%d entries, %d exits)%s from %d functions in %s mode in %s%s; %d skipped, %d failed to attach%s; %s",
		s.Events, s.Entries, s.Exits, seen, s.Functions, s.Mode, s.Elapsed.Round(time.Millisecond), window, s.Skipped, l.FailedAttaches, eo, lost)
}

// lossText is "none lost" or "LOST: " and every nonzero loss counter,
// then "; incomplete: " and the string reads and stacks that failed (the
// events carrying them were delivered). Calls in flight (exits without
// entry, entries without exit) are not losses: Summary.Line names them.
func lossText(l attach.Losses) string { return lossTextNote(l, "") }

// lossTextNote is lossText with note right after the lost part, before
// what is incomplete.
func lossTextNote(l attach.Losses, note string) string {
	var lost, partial []string
	add := func(to *[]string, n uint64, what string) {
		if n > 0 {
			*to = append(*to, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(&lost, l.RingbufDrops, "ringbuf drops")
	add(&lost, l.KprobeMissed, "fprobe missed runs")
	add(&lost, l.RecursionMiss, "recursion misses")
	add(&lost, l.Unwound, "unwound frames")
	add(&lost, l.DepthOverflow, "beyond max depth")
	add(&lost, l.StackFull, "threads without stack slot")
	add(&lost, l.TreeFull, "forked processes not followed (tgids map full)")
	add(&partial, l.StringFaults, "string reads faulted")
	add(&partial, l.StackFailures, "stacks not captured")
	add(&partial, l.ExprFaults, "--arg/--filter reads faulted")
	out := "none lost"
	if len(lost) > 0 {
		out = "LOST: " + strings.Join(lost, ", ")
	}
	out += note
	if len(partial) > 0 {
		out += "; incomplete: " + strings.Join(partial, ", ")
	}
	if l.FilterRejects > 0 {
		out += fmt.Sprintf("; --filter rejected %d calls", l.FilterRejects)
	}
	return out
}

// Table builds the per-function tables from the kernel's aggregation
// (attach.Options.Aggregate), named as table names them, errors by errno
// name.
func Table(t *attach.Tracer, table events.Table) (*stats.Table, error) {
	aggs, err := t.Aggregates()
	if err != nil {
		return nil, err
	}
	out := stats.New()
	for _, a := range aggs {
		f := &stats.Func{Name: table.FuncName(a.Func.ID), Calls: a.Calls(), Errors: a.Agg.Errors,
			Timed: a.Timed(), SumNs: a.Agg.SumNs, MaxNs: a.Agg.MaxNs, Hist: a.Agg.Hist, Errnos: map[string]uint64{}}
		for ret, n := range a.Errs {
			name := events.ErrnoOf(a.Func, int64(ret))
			if name == "" {
				name = fmt.Sprint(ret)
			}
			f.Errnos[name] += n
		}
		out.Merge(f)
	}
	return out, nil
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
	if o.Strings || o.Stack {
		return errors.New("trace: --arg/--filter with --strings or --stack is not supported yet (name string fields with --arg instead of --strings)")
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
				f.Values = append(f.Values, symbols.Value{Name: v.Expr, Kind: v.Kind, Size: v.Size, Enum: v.Enum})
			}
			if o.Verbose {
				for _, l := range p.Describe() {
					fmt.Fprintf(o.Log, "ftprobe: %s: %s\n", f.Display(), l)
				}
			}
		}
	}
	return plans, nil
}
