package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// byteSize is a size flag: bytes, or a whole number of KiB, MiB or GiB
// ("64MiB"; K, M and G also mean them).
type byteSize uint64

func (s *byteSize) String() string {
	if *s == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*s), 10)
}

func (s *byteSize) Type() string { return "size" }

func (s *byteSize) Set(v string) error {
	num := strings.TrimRight(v, "KMGiB")
	shift := map[string]uint{"": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20, "G": 30, "GiB": 30}
	sh, ok := shift[v[len(num):]]
	n, err := strconv.ParseUint(num, 10, 64)
	if !ok || err != nil || n > math.MaxUint64>>sh {
		return fmt.Errorf("want bytes, or a number of KiB, MiB or GiB")
	}
	*s = byteSize(n << sh)
	return nil
}

// traceVars are the flag values of trace and stat that are not fields of
// trace.Options (set into it by the command).
type traceVars struct {
	outFile    *string
	bufferSize *byteSize
	pid, tid   *uint32
	interval   *time.Duration
}

// traceOutput is one --output format; perCall formats write per-call
// records, which stat does not stream.
type traceOutput struct {
	name, desc string
	perCall    bool
}

// traceOutputs are the --output formats of trace, in help order.
var traceOutputs = []traceOutput{
	{"text", "", false},
	{"json", "JSON lines: one object per event, then a summary", false},
	{"perfetto", "Chrome trace-event JSON for ui.perfetto.dev; use with -o FILE.json", true},
}

// outputNames returns the --output names trace (stat false) or stat
// accepts.
func outputNames(stat bool) []string {
	var out []string
	for _, t := range traceOutputs {
		if !stat || !t.perCall {
			out = append(out, t.name)
		}
	}
	return out
}

// outputHelp is the --output help of trace or stat: the formats it
// accepts, each with its description.
func outputHelp(stat bool) string {
	var parts []string
	for _, t := range traceOutputs {
		if stat && t.perCall {
			continue
		}
		if t.desc != "" {
			parts = append(parts, t.name+" ("+t.desc+")")
		} else {
			parts = append(parts, t.name)
		}
	}
	return orList(parts)
}

// orList joins "a, b or c".
func orList(s []string) string { return joinList(s, " or ") }

// andList joins "a, b and c".
func andList(s []string) string { return joinList(s, " and ") }

func joinList(s []string, last string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

// traceFlags registers the flags of trace, or of stat (stat): one
// definition per flag. stat gets only the flags it uses: the options of
// per-call records (their content, their count, their buffers, their
// delivery) are trace's alone, since stat streams none.
func traceFlags(f *pflag.FlagSet, o *trace.Options, v *traceVars, stat bool) {
	pick := func(traceText, statText string) string {
		if stat {
			return statText
		}
		return traceText
	}
	// Both commands.
	f.DurationVar(v.interval, "interval", 0, pick("with stat or --quiet: print the tables of the last interval at this period", "print the tables of the calls of the last interval at this period"))
	f.StringVar(&o.Mode, "mode", "auto", orList(traceModeNames())+" (the modes above)")
	f.StringArrayVar(&o.Excludes, "exclude", nil, "remove functions matching GLOB (repeatable)")
	f.StringVar(&o.Output, "output", "text", outputHelp(stat))
	f.StringVarP(v.outFile, "out", "o", "", pick("write events to FILE", "write the tables to FILE"))
	f.Uint32Var(v.pid, "pid", 0, "only this process (tgid), filtered in the kernel")
	f.Uint32Var(v.tid, "tid", 0, "only this thread, filtered in the kernel")
	f.StringVar(&o.Filters.Comm, "comm", "", "only tasks with this comm, filtered in the kernel")
	f.DurationVar(&o.Filters.MinDuration, "min-duration", 0, pick("only calls at least this long (emitted at exit with entry args)", "count only calls at least this long"))
	f.BoolVar(&o.Filters.ErrorsOnly, "errors", false, pick("only calls returning a negative int or an error pointer", "count only calls returning a negative int or an error pointer"))
	f.DurationVar(&o.Duration, "duration", 0, "stop after tracing this long: the window from attached to detach (attaching and detaching many functions take extra time, shown in -v and the summary)")
	f.DurationVar(&o.StatsEvery, "stats-every", 0, pick("print a progress line at this interval: events, rate, losses, ftprobe's RSS and live Go heap",
		"print a progress line at this interval: calls seen in the kernel, rate, losses, ftprobe's RSS and live Go heap"))
	f.IntVar(&o.MaxFunctions, "max-functions", 2000, "refuse patterns matching more functions than this")
	f.BoolVar(&o.Hist, "hist", false, pick("at exit, a log2 latency histogram per function (implies --summary)", "add a log2 latency histogram per function"))
	f.StringArrayVar(&o.Predicates, "filter", nil, pick("keep only the calls for which EXPR holds, decided in the kernel: e.g. 'count > 4096 && ret == -EAGAIN' (parts on ret at exit, the entry then deferred; repeatable: each applies to the functions whose parameters it names, [FUNCGLOB:]EXPR scopes it)",
		"count only the calls for which EXPR holds, decided in the kernel: e.g. 'count > 4096 && ret == -EAGAIN' (repeatable: each applies to the functions whose parameters it names, [FUNCGLOB:]EXPR scopes it)"))
	f.BoolVar(&o.DryRun, "dry-run", false, pick("resolve the patterns, type-check --arg/--filter", "resolve the patterns, type-check --filter")+", load and verify every program, attach nothing: print the plan and exit 0 (2 bad input, 3 unsupported)")
	f.BoolVar(&o.Strict, "strict", false, pick("exit 1 when any event or probe run was lost or a matched function failed to attach", "exit 1 when any probe run was lost or a matched function failed to attach"))
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "print the plan: each function, its prototype, and why any was skipped")
	o.SelfCacheDir = symbols.SymbolCacheDir // what --trace-self would trace, kept per boot next to the symbols
	f.BoolVar(&o.TraceSelf, "trace-self", false, "trace the functions ftprobe's own BPF programs call too (map lookups, task storage, clock; learned from the kernel at start): without it a glob leaves them out and an exact name is refused, since a trampoline on one runs inside ftprobe's programs")
	if stat {
		return
	}
	// trace only: per-call records.
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "no per-call events: print only the kernel-built --summary/--hist tables (to stdout), as stat does")
	f.BoolVar(&o.LiveEntries, "live-entries", false, "send each entry when its call starts (by default a call with no traced call inside it sends its entry with its exit, in one record: the same events, fewer records, but a long leaf call's entry shows only when it returns)")
	f.IntVar(&o.Count, "count", 0, "stop after N events")
	f.Var(v.bufferSize, "buffer-size", fmt.Sprintf("bytes of records each CPU holds for the reader: bytes, or KiB, MiB or GiB (64MiB), a power of two from 64KiB to 2GiB (less with many CPUs: all fit one 4 GiB BPF array) (default: %s shared by the online CPUs, from %s to %s each)",
		mib(trace.RingbufTotal), mib(trace.RingbufMinPerCPU), mib(trace.RingbufMaxPerCPU)))
	f.BoolVar(&o.Graph, "graph", false, "text as a call graph per thread (function_graph style): leaf calls folded, durations on exits, markers when threads interleave")
	f.BoolVar(&o.Summary, "summary", false, "at exit, per function: calls, errors by errno, p50/p90/p99/max latency")
	f.BoolVar(&o.Strings, "strings", false, "read char * arguments at entry (first 2 per call, 127 bytes each; … marks truncation, <fault> a failed read)")
	f.BoolVar(&o.Stack, "stack", false, "record the kernel stack at entry (32 frames) and print it symbolized under the entry (JSON: \"stack\")")
	f.StringArrayVar(&o.Args, "arg", nil, "record EXPR at each entry of the functions whose parameters it names, e.g. 'file->f_path.dentry->d_name.name' (repeatable, up to 4; C syntax, checked against BTF; [FUNCGLOB:]EXPR scopes it)")
	f.StringArrayVar(&o.Entries, "entry", nil, "record the PATTERN functions only while the same thread is inside a call of FUNC (a glob too; repeatable), and print each FUNC call as a call tree with durations, arguments, return values and the error origin marked (JSON: one \"call_tree\" record per call; Perfetto: nested slices per thread, error path marked in args); a --filter scoped to FUNC opens the window only for the FUNC calls it keeps; with --errors only the FUNC calls that returned an error")
}

// modesHelp describes every trace mode from the registry
// (attach.TraceModes): the attach paths it links and how.
func modesHelp() string {
	w := 0
	for _, m := range attach.TraceModes {
		w = max(w, len(m.Name))
	}
	var b strings.Builder
	for _, m := range attach.TraceModes {
		fmt.Fprintf(&b, "  %-*s  %s\n", w, m.Name, wayHelp(m))
	}
	b.WriteString("(trampolines: BPF trampolines reached by ftrace direct calls, arm64 since 6.4;\nfprobe: one ftrace_ops for all the functions of a link, arm64 since 6.14;\nkprobes: one perf event each; tracing multi links: x86-64 only)\n")
	return b.String()
}

// wayHelp says how a trace mode links its functions: how many links,
// per function or for all, through what, since which kernel (arm64 has
// had the trampolines since 6.4 and fprobe since 6.14).
func wayHelp(m attach.TraceMode) string {
	var info attach.PathInfo
	for _, p := range m.Paths {
		info, _ = attach.PathByName(string(p))
	}
	links := map[bool]string{true: "one link", false: "two links"}[len(m.Paths) == 1]
	if info.Multi {
		links += " for all functions"
	} else {
		links += " per function"
	}
	via := "kprobes"
	switch {
	case info.Trampoline:
		via = "trampolines"
	case info.Multi:
		via = "fprobe"
	}
	return fmt.Sprintf("%s, %s, Linux %s+", links, via, m.MinKernel)
}

// mib is n bytes as "NMiB", the way --buffer-size takes it.
func mib(n int) string { return strconv.Itoa(n>>20) + "MiB" }
