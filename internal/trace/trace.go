// Package trace runs one ftprobe trace: resolve patterns, attach in the
// chosen mode, optionally run a command under trace, stream events from the
// ringbuf to a writer, and account for every loss.
package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/selfreach"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

// Options of one trace.
type Options struct {
	Patterns     []string
	Excludes     []string
	Mode         string // auto ("" too) or one of Modes
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
	// LiveEntries sends each entry as the call starts
	// (attach.Options.LiveEntries); by default a leaf call's entry comes
	// with its exit, in one record.
	LiveEntries bool
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
	// Entries are --entry patterns: the functions of Patterns are recorded
	// only while the same thread is inside a call of an entry function
	// (its window), and each entry call is written as one call tree
	// (events.Tree). The entry functions are traced too.
	Entries []string
	// entryErrors: --errors with Entries keeps the entry calls that
	// returned an error (Filters.ErrorsOnly is then off).
	entryErrors bool
	// TraceSelf traces the functions ftprobe's own BPF programs call too
	// (by default a glob leaves them out and an exact name is refused:
	// leaveOutSelf).
	TraceSelf bool
	// SelfCacheDir keeps, for the rest of the boot, which functions
	// ftprobe's own programs call (selfreach.Cache; cmd/ftprobe sets
	// symbols.SymbolCacheDir). "": learned anew by each process.
	SelfCacheDir string
	// DryRun resolves the patterns, compiles the expressions, loads
	// (verifies) every program of the chosen mode, attaches nothing,
	// prints the plan and returns a nil Summary.
	DryRun bool
	// NoSpecialize loads the BPF programs as compiled
	// (attach.Options.NoSpecialize; FTPROBE_SPECIALIZE=off).
	NoSpecialize bool
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
	Type string `json:"type"`
	// Mode is the trace mode attached (a --mode name: fentry+fexit,
	// ..., kprobe+kretprobe; auto's mixed trace, its trampoline mode and
	// its fprobe mode joined by '+').
	Mode      string `json:"mode"`
	Functions int    `json:"functions"`
	// Skipped counts the matched functions not traced (the plan's skip
	// reasons).
	Skipped int    `json:"skipped_functions"`
	Events  uint64 `json:"events"`
	Entries uint64 `json:"entries"`
	Exits   uint64 `json:"exits"`
	// Calls counts the calls in the per-function tables the kernel
	// built (stat, trace --quiet: no event streamed); absent without
	// them.
	Calls *uint64 `json:"calls,omitempty"`
	// Elapsed is the tracing window: from attached to the stop
	// (--duration bounds it), without attaching and detaching.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Attach is the time loading and attaching took (a trampoline mode attaches one
	// link per function, so it grows with the functions), Detach the time
	// detaching took; neither counts towards --duration.
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
	Deferred bool          `json:"deferred,omitempty"` // Entry is the account of --entry (absent without it).
	Entry    *EntrySummary `json:"entry,omitempty"`
}

// EntrySummary accounts for the call trees of --entry.
type EntrySummary struct {
	// Calls counts the entry function calls that completed (one tree
	// each); Shown those written (--errors keeps the ones that returned
	// an error).
	Calls uint64 `json:"entry_calls"`
	Shown uint64 `json:"trees_written"`
	// Unfinished counts the entry calls that had not returned when the
	// trace stopped (no tree written).
	Unfinished int `json:"unfinished"`
	// WindowRejected counts the calls of the traced functions made outside
	// every entry call (returned early in the kernel; not a loss).
	WindowRejected uint64 `json:"window_rejected"`
	// ThreadExits counts the threads that exited inside an entry call (its
	// tree never completes).
	ThreadExits uint64 `json:"thread_exits_in_window"`
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

// autoFentryLimit: above this many functions auto prefers kprobe.session
// or kprobe.multi+kretprobe.multi, whose one link attaches in one syscall,
// over one trampoline per function.
const autoFentryLimit = 64

// ModeAuto lets trace pick the mode (autoOrder).
const ModeAuto = attach.ModeAuto

// Modes are the attach modes --mode accepts besides auto: the registry's
// (attach.TraceModes), in its order.
var Modes = func() []string {
	var out []string
	for _, m := range attach.TraceModes {
		out = append(out, m.Name)
	}
	return out
}()

// Run performs the trace until ctx ends, Count events, Duration, or the end
// of Command. It returns the summary; the error carries an exit code
// (ClassOf; cmd/ftprobe turns it into the exit code).
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := validate(&o); err != nil {
		return nil, err
	}
	s, err := bootstrap(o)
	if err != nil {
		return nil, err
	}
	if len(o.Command) > 0 {
		o.Filters.Tree = true
	}
	var cache selfreach.Cache // --trace-self checks nothing: no cache to open (opening one hashes the embedded objects)
	if !o.TraceSelf {
		cache = selfreach.OpenCache(o.SelfCacheDir)
	}
	s.leaveOutSelf(ctx, o, selfreach.Learn, cache)
	if err := ctx.Err(); err != nil {
		// A signal while the symbols loaded: nothing made yet.
		return nil, failed(&attach.Interrupted{Cause: context.Cause(ctx), Phase: "planning"})
	}
	tAttach := time.Now()
	tracer, res, err := newPlanner(o, s.k, s.kin).plan(ctx)
	if err != nil {
		return nil, classify(err)
	}
	defer tracer.Close()
	if err := o.checkEntriesAttached(tracer); err != nil {
		return nil, err
	}
	if o.DryRun {
		fmt.Fprintf(o.Log, "ftprobe: dry run: %s in %s mode, %s loaded and verified in %s, nothing attached\n",
			plural.Count(len(res.Funcs), "function"), tracer.Mode, plural.Count(tracer.Verified, "program"), time.Since(tAttach).Round(time.Millisecond))
		return nil, nil
	}
	attachTook := time.Since(tAttach)
	s.reportAttached(o, tracer, res, attachTook)
	syms, err := stackSymbolizer(o)
	if err != nil {
		return nil, err
	}
	rd, err := tracer.Reader(rings.Options{Delay: rings.DefaultDelay, Timestamp: events.Timestamp})
	if err != nil {
		return nil, fmt.Errorf("ringbuf reader: %w", err)
	}
	defer rd.Close()
	var cmd *command
	if len(o.Command) > 0 {
		if cmd, err = startCommand(o, tracer); err != nil {
			return nil, err
		}
		// Whatever happens from here on, the command does not outlive the trace.
		defer cmd.stop()
	}
	if o.Ready != nil {
		o.Ready()
	}
	p := newPipeline(ctx, o, rd, tracer, tracer.Mode, tracer.Attached, res, syms, cmd)
	p.attachTook = attachTook
	return p.run()
}

// session is what a trace knows of the running kernel before planning.
type session struct {
	kin *kfeat.Info
	k   *symbols.Kernel
	t0  time.Time // symbols started loading
}

// bootstrap checks tracefs and the privileges, and reads the kernel's
// features and symbols (o.Symbols when set).
func bootstrap(o Options) (*session, error) {
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
	return &session{kin: kin, k: k, t0: t0}, nil
}

// reportAttached says what was attached: the trials made (--verbose), the
// time it took (--verbose), each function left out, and the mode.
func (s *session) reportAttached(o Options, t *attach.Tracer, res *symbols.Resolution, attachTook time.Duration) {
	printTrials(o, s.k)
	if o.Verbose {
		fmt.Fprintf(o.Log, "ftprobe: resolved and attached in %s (attaching %s; --duration counts from here)\n", time.Since(s.t0).Round(time.Millisecond), attachTook.Round(time.Millisecond))
	}
	for _, f := range t.Failed {
		fmt.Fprintf(o.Log, "ftprobe: not attached: %v\n", f.Err)
	}
	if o.Verbose {
		if o.NoSpecialize {
			fmt.Fprintf(o.Log, "ftprobe: BPF object: %s (frames in %s; loaded as compiled: FTPROBE_SPECIALIZE=off)\n", t.DataPath, t.Frames)
		} else {
			fmt.Fprintf(o.Log, "ftprobe: BPF object: %s (frames in %s; %d instructions its settings rule out dropped before load)\n", t.DataPath, t.Frames, t.Simplified)
		}
		if direct, compiled := t.ArgReads(); direct+compiled > 0 {
			fmt.Fprintf(o.Log, "ftprobe: %s\n", argReadsText(direct, compiled))
		}
	}
	fmt.Fprintf(o.Log, "ftprobe: tracing %s in %s mode (%s)\n", plural.Count(len(t.Attached), "function"), t.Mode, res.SkipSummary())
}

// argReadsText says how the per-function trampoline programs read their
// arguments (attach.Tracer.ArgReads).
func argReadsText(direct, compiled int64) string {
	out := fmt.Sprintf("%d per-function programs read their arguments straight from ctx", direct)
	if compiled > 0 {
		out += fmt.Sprintf("; %d through bpf_get_func_arg (as compiled)", compiled)
	}
	return out
}

// stackSymbolizer reads kallsyms for --stack (nil without it). Read after
// attaching: the BPF programs and trampolines just loaded are in kallsyms
// (module "bpf") and appear on fentry stacks.
func stackSymbolizer(o Options) (events.Symbolizer, error) {
	if !o.Stack {
		return nil, nil
	}
	sy, err := symbols.LoadSymbolizer()
	if err != nil {
		return nil, failed(fmt.Errorf("trace --stack: %w", err))
	}
	return sy, nil
}

// Line is the one-line summary: the events delivered, or with the
// kernel's tables (Calls: stat) the calls they count.
func (s *Summary) Line() string {
	l := s.Losses
	note := ""
	if n := l.InFlight(); n > 0 {
		note = fmt.Sprintf(" (%s in flight at attach, detach or the command's exec: %s without entry, %s without exit)",
			plural.Count(n, "call"), plural.Count(l.NoEntry, "exit"), plural.Count(l.OpenAtExit, "entry"))
	}
	lost := lossTextNote(l, note)
	seen := ""
	if s.Deferred {
		seen = fmt.Sprintf(" of %s seen in the kernel (--min-duration/--errors chose)", plural.Count(l.ExitHits, "call"))
	}
	eo := ""
	if s.EntryOnly != "" {
		eo = "; entry only: " + s.EntryOnly
	}
	if s.TargetExited != "" {
		eo += "; " + s.TargetExited
	}
	if e := s.Entry; e != nil {
		eo += fmt.Sprintf("; --entry: %s (%s written, %d unfinished), %s outside them not recorded, %s exited inside one",
			plural.Count(e.Calls, "entry call"), plural.Count(e.Shown, "tree"), e.Unfinished, plural.Count(e.WindowRejected, "call"), plural.Count(e.ThreadExits, "thread"))
	}
	// Attaching and detaching are outside the tracing window (and outside
	// --duration); when they took long, say how long.
	window := ""
	if s.Attach+s.Detach >= time.Second {
		window = fmt.Sprintf(" (attaching took %s, detaching %s)", s.Attach.Round(time.Millisecond), s.Detach.Round(time.Millisecond))
	}
	what := fmt.Sprintf("%s (%s, %s)%s from %s", plural.Count(s.Events, "event"), plural.Count(s.Entries, "entry"), plural.Count(s.Exits, "exit"), seen, plural.Count(s.Functions, "function"))
	if s.Calls != nil {
		what = fmt.Sprintf("%s of %s counted in the kernel", plural.Count(*s.Calls, "call"), plural.Count(s.Functions, "function"))
	}
	return fmt.Sprintf("ftprobe: %s in %s mode in %s%s; %d skipped, %d failed to attach%s; %s",
		what, s.Mode, s.Elapsed.Round(time.Millisecond), window, s.Skipped, l.FailedAttaches, eo, lost)
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
	// noun counted, then what befell them
	add := func(to *[]string, n uint64, noun, what string) {
		if n > 0 {
			*to = append(*to, plural.Count(n, noun)+what)
		}
	}
	add(&lost, l.RingbufDrops, "ringbuf drop", "")
	add(&lost, l.KprobeMissed, "fprobe missed run", "")
	add(&lost, l.RecursionMiss, "recursion miss", "")
	add(&lost, l.Unwound, "unwound frame", "")
	if l.DepthOverflow > 0 {
		lost = append(lost, fmt.Sprintf("%d beyond max depth", l.DepthOverflow))
	}
	add(&lost, l.StackFull, "thread", " without stack slot")
	add(&lost, l.TreeFull, "forked process", " not followed (tgids map full)")
	add(&partial, l.StringFaults, "string read", " faulted")
	add(&partial, l.StackFailures, "stack", " not captured")
	add(&partial, l.ExprFaults, "--arg/--filter read", " faulted")
	out := "none lost"
	if len(lost) > 0 {
		out = "LOST: " + strings.Join(lost, ", ")
	}
	out += note
	if len(partial) > 0 {
		out += "; incomplete: " + strings.Join(partial, ", ")
	}
	if l.FilterRejects > 0 {
		out += "; --filter rejected " + plural.Count(l.FilterRejects, "call")
	}
	return out
}
