package trace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/stats"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// source delivers the raw ringbuf records: a rings.Reader on the
// tracer's rings (one per CPU, merged by timestamp), or a replay of
// recorded records in tests. ReadInto returns os.ErrDeadlineExceeded when
// nothing arrived by the deadline; after Final, when nothing is left.
type source interface {
	SetDeadline(t time.Time)
	ReadInto(rec *ringbuf.Record) error
	Final()
}

// tracing is what the pipeline needs of the attached tracer
// (attach.Tracer): to detach it, and its counters and tables.
type tracing interface {
	Aggregator
	Detach()
	Losses() (attach.Losses, error)
	RecursionMisses() map[string]uint64
}

// stopper decides when the trace ends: ctx done or --duration past
// (ftprobe stopped it), the command exited, or --count events written.
type stopper struct {
	ctx      context.Context
	deadline time.Time // --duration; zero: none
	count    uint64    // --count; 0: none
	cmd      *command  // nil without a command
	now      func() time.Time
	// stopped: ftprobe ended the trace (signal, --duration, --count).
	stopped bool
	// counted: --count events were written.
	counted bool
}

// newStopper stops at ctx's end, duration after start and after count
// events (0: no limit), or when cmd exits.
func newStopper(ctx context.Context, start time.Time, duration time.Duration, count int, cmd *command) *stopper {
	s := &stopper{ctx: ctx, count: uint64(max(count, 0)), cmd: cmd, now: time.Now}
	if duration > 0 {
		s.deadline = start.Add(duration)
	}
	return s
}

// poll checks every stop condition but --count without blocking; it
// collects the command's status when it exited.
func (s *stopper) poll() bool {
	var done <-chan error
	if s.cmd != nil {
		done = s.cmd.done
	}
	select {
	case <-s.ctx.Done():
		s.stopped = true
		return true
	case err := <-done:
		s.cmd.err, s.cmd.exited = err, true
		return true
	default:
	}
	if !s.deadline.IsZero() && s.now().After(s.deadline) {
		s.stopped = true
		return true
	}
	return false
}

// reached reports whether events reach --count.
func (s *stopper) reached(events uint64) bool { return s.count > 0 && events >= s.count }

// ended reports whether poll saw the end: ftprobe stopped the trace or
// the command exited.
func (s *stopper) ended() bool { return s.stopped || (s.cmd != nil && s.cmd.exited) }

// pipeline reads the records of an attached tracer, writes them to their
// sink, stops when the stopper says, detaches, drains and accounts.
type pipeline struct {
	o          Options
	src        source
	tr         tracing
	attached   []*symbols.Func
	skipped    int // functions the plan skipped
	table      events.Table
	sink       sink
	cmd        *command // nil without a command
	stop       *stopper
	attachTook time.Duration

	start time.Time
	sum   *Summary
	w     *bufio.Writer

	rec ringbuf.Record
	ev  bpfobj.TraceEvent
	dec events.Decoder
	// exits counts the exits per function id (Summary.PerFunction once
	// the trace ends: no name hashed per event); other, ids outside the
	// table.
	exits []int
	other map[uint32]int

	lastStats, lastInterval time.Time
	prevTables              *stats.Table
	// target is the --pid/--tid task, watched so the summary can say when
	// it exited.
	target     uint32
	targetFlag string
}

// newPipeline starts the tracing window now: records of src, from tr
// attached to attached in mode, res its plan, written as o.Output
// (syms symbolizes --stack).
func newPipeline(ctx context.Context, o Options, src source, tr tracing, mode string, attached []*symbols.Func, res *symbols.Resolution, syms events.Symbolizer, cmd *command) *pipeline {
	table := make(events.Table, len(res.Funcs))
	for _, f := range res.Funcs {
		table[f.ID] = f
	}
	p := &pipeline{o: o, src: src, tr: tr, attached: attached, skipped: len(res.Skipped), table: table, cmd: cmd,
		exits: make([]int, len(table)), other: map[uint32]int{}}
	p.start = time.Now()
	p.sum = &Summary{Mode: mode, Functions: len(attached), Skipped: len(res.Skipped), PerFunction: map[string]int{},
		Deferred:  o.Filters.MinDuration > 0 || o.Filters.ErrorsOnly,
		EntryOnly: strings.TrimPrefix(symbols.EntryOnlySummary(attached), "entry only: ")}
	p.w = bufio.NewWriterSize(o.Out, 64<<10)
	// Relative times count from arming (no event is older), not from
	// the first event delivered: a leaf call's entry comes with its exit,
	// after later events of other threads.
	var base uint64
	if a, ok := tr.(interface{ ArmedAt() uint64 }); ok {
		base = a.ArmedAt()
	}
	p.sink = newSink(o, table, syms, base)
	p.stop = newStopper(ctx, p.start, o.Duration, o.Count, cmd)
	p.target, p.targetFlag = o.Filters.TID, "--tid"
	if p.target == 0 {
		p.target, p.targetFlag = o.Filters.TGID, "--pid"
	}
	p.lastStats, p.lastInterval = time.Now(), time.Now()
	return p
}

// run traces until the stopper says, then detaches, drains, accounts and
// writes the end of the output and the summary.
func (p *pipeline) run() (*Summary, error) {
	if err := p.loop(); err != nil {
		return nil, err
	}
	if err := p.detach(); err != nil {
		return nil, err
	}
	p.account()
	return p.finish()
}

// loop reads and writes records until a stop condition, flushing the
// output every round, with the --interval tables, --stats-every lines
// and the --pid/--tid watch in between.
func (p *pipeline) loop() error {
	o := p.o
	for !p.stop.counted && !p.stop.poll() {
		p.src.SetDeadline(time.Now().Add(100 * time.Millisecond))
		for n := 1; ; n++ {
			err := p.src.ReadInto(&p.rec)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return fmt.Errorf("ringbuf read: %w", err)
			}
			if p.stop.counted, err = p.handle(); err != nil {
				return failed(err)
			}
			// A busy ring never runs dry: poll the stop conditions anyway.
			if p.stop.counted || (n%256 == 0 && (p.stop.poll() || p.statsDue())) {
				break
			}
		}
		if err := p.w.Flush(); err != nil {
			return failed(fmt.Errorf("write events: %w", err))
		}
		if o.Quiet && o.Interval > 0 && time.Since(p.lastInterval) >= o.Interval {
			if err := p.intervalTables(); err != nil {
				return err
			}
		}
		if p.statsDue() {
			p.sampleStats()
		}
		p.watchTarget()
		if p.stop.ended() {
			break
		}
	}
	if p.stop.counted {
		p.stop.stopped = true
	}
	p.watchTarget()
	return nil
}

// handle decodes and writes one record (two events for a call record);
// it reports --count reached.
func (p *pipeline) handle() (bool, error) {
	isEvent, err := p.dec.Decode(p.rec.RawSample, &p.ev)
	if err != nil || !isEvent {
		return false, err
	}
	done, err := p.write()
	if err != nil || done || !p.dec.Next(&p.ev) {
		return done, err
	}
	return p.write()
}

// write writes the decoded event p.ev; it reports --count reached. The
// event is formatted straight into the output buffer's free space (a
// line longer than it is copied through a larger buffer once).
func (p *pipeline) write() (bool, error) {
	sum := p.sum
	sum.Events++
	if p.ev.Kind == events.KindEntry {
		sum.Entries++
	} else {
		sum.Exits++
		if id := p.ev.FuncId; int(id) < len(p.exits) {
			p.exits[id]++
		} else {
			p.other[id]++
		}
	}
	if p.w.Available() < 512 {
		if err := p.w.Flush(); err != nil {
			return false, fmt.Errorf("write events: %w", err)
		}
	}
	if _, err := p.w.Write(p.sink.event(p.w.AvailableBuffer(), &p.ev)); err != nil {
		return false, fmt.Errorf("write events: %w", err)
	}
	return p.stop.reached(sum.Events), nil
}

// perFunction folds the exits counted by function id into
// Summary.PerFunction, by name.
func (p *pipeline) perFunction() {
	for id, n := range p.exits {
		if n > 0 {
			p.sum.PerFunction[p.table.FuncName(uint32(id))] += n
		}
	}
	for id, n := range p.other {
		p.sum.PerFunction[p.table.FuncName(id)] += n
	}
}

func (p *pipeline) statsDue() bool {
	return p.o.StatsEvery > 0 && time.Since(p.lastStats) >= p.o.StatsEvery
}

// intervalTables writes the tables of the calls since the last interval
// (--quiet --interval).
func (p *pipeline) intervalTables() error {
	p.lastInterval = time.Now()
	cur, err := Table(p.tr, p.table)
	if err != nil {
		return failed(err)
	}
	p.o.writeTables(p.w, cur.Sub(p.prevTables), time.Since(p.start), false)
	p.prevTables = cur
	if err := p.w.Flush(); err != nil {
		return failed(fmt.Errorf("write tables: %w", err))
	}
	return nil
}

// sampleStats records a --stats-every sample and writes its line (with
// Quiet, the calls seen in the kernel instead of the events).
func (p *pipeline) sampleStats() {
	p.lastStats = time.Now()
	rss, heap := sampleMem()
	at := time.Since(p.start)
	sum := p.sum
	sum.Mem = append(sum.Mem, MemSample{At: at, Events: sum.Events, RSSBytes: rss, Heap: heap})
	l, _ := p.tr.Losses()
	lost := lossText(l)
	n, what := sum.Events, "events"
	if p.o.Quiet {
		// No event streamed: the calls the kernel saw return.
		n, what = l.ExitHits, "calls seen in the kernel"
	}
	fmt.Fprintf(p.o.Log, "ftprobe: +%s: %d %s (%.0f/s), rss %.1f MiB, live heap %.1f MiB; %s\n",
		at.Round(time.Second), n, what, float64(n)/at.Seconds(), float64(rss)/(1<<20), float64(heap)/(1<<20), lost)
}

func (p *pipeline) watchTarget() {
	if p.target != 0 && p.sum.TargetExited == "" && !taskAlive("/proc", p.target) {
		p.sum.TargetExited = fmt.Sprintf("%s %d exited %s into the trace", p.targetFlag, p.target, time.Since(p.start).Round(time.Millisecond))
	}
}

// detach ends the tracing window: detach first so nothing new arrives,
// then drain what the kernel already accepted (unless --count was
// reached).
func (p *pipeline) detach() error {
	o, sum := p.o, p.sum
	tDetach := time.Now()
	sum.Elapsed = tDetach.Sub(p.start)
	p.tr.Detach()
	sum.Attach, sum.Detach = p.attachTook, time.Since(tDetach)
	if o.Verbose {
		fmt.Fprintf(o.Log, "ftprobe: traced for %s, detached %s in %s\n", sum.Elapsed.Round(time.Millisecond), plural.Count(len(p.attached), "function"), sum.Detach.Round(time.Millisecond))
	}
	if !p.stop.counted {
		p.src.SetDeadline(time.Now())
		p.src.Final()
		for {
			err := p.src.ReadInto(&p.rec)
			if err != nil {
				break
			}
			if _, err := p.handle(); err != nil {
				return failed(err)
			}
		}
	}
	return nil
}

// account stops the command and reads the counters into the summary.
func (p *pipeline) account() {
	sum := p.sum
	p.cmd.stop()
	p.perFunction()
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		sum.MaxRSSBytes = uint64(ru.Maxrss) * 1024 // ru_maxrss is in KiB on Linux
	}
	sum.Losses, _ = p.tr.Losses()
	sum.Losses.SkippedFuncs = p.skipped
	if ts, ok := p.sink.(treeSink); ok {
		sum.Entry = &EntrySummary{Calls: ts.t.Calls, Shown: ts.t.Shown, Unfinished: ts.t.Unfinished(),
			WindowRejected: sum.Losses.WindowRejected, ThreadExits: sum.Losses.WindowExits}
	}
	if sum.Losses.RecursionMiss > 0 {
		var parts []string
		for prog, n := range p.tr.RecursionMisses() {
			parts = append(parts, fmt.Sprintf("%s %d", prog, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(p.o.Log, "ftprobe: recursion misses by program (a program preempted or interrupted on its CPU and run again there): %s\n", strings.Join(parts, ", "))
	}
	if p.cmd != nil && !p.stop.stopped {
		sum.ExitStatus = exitStatus(p.cmd.err)
	}
}

// finish writes the end of the output (the sink's, the final tables), the
// tables of --summary/--hist and the summary line, and classes the end:
// the command's non-zero exit, or losses under --strict.
func (p *pipeline) finish() (*Summary, error) {
	o, sum := p.o, p.sum
	if err := p.sink.end(p.w, o.Log); err != nil {
		return sum, failed(err)
	}
	if o.Quiet {
		lat, err := Table(p.tr, p.table)
		if err != nil {
			return sum, failed(err)
		}
		o.writeTables(p.w, lat, sum.Elapsed, true)
		calls := lat.Calls()
		sum.Calls = &calls
	}
	p.sink.summary(p.w, sum)
	if err := p.w.Flush(); err != nil {
		return sum, failed(fmt.Errorf("write events: %w", err))
	}
	if (o.Summary || o.Hist) && !o.Quiet {
		lat, err := Table(p.tr, p.table)
		if err != nil {
			return sum, failed(err)
		}
		lat.WriteSummary(o.Log)
		if o.Hist {
			lat.WriteHist(o.Log)
		}
	}
	if advice := dropsAdvice(sum.Losses, o.RingbufSize); advice != "" {
		fmt.Fprintln(o.Log, advice)
	}
	fmt.Fprintln(o.Log, sum.Line())
	if p.cmd != nil && sum.ExitStatus != 0 {
		return sum, commandStatus(sum.ExitStatus, nil)
	}
	if o.Strict && sum.Losses.Any() {
		return sum, failed(errors.New("trace: events were lost or incomplete (--strict)"))
	}
	if o.Strict && sum.Losses.FailedAttaches > 0 {
		return sum, failed(fmt.Errorf("trace: %d matched functions failed to attach (--strict)", sum.Losses.FailedAttaches))
	}
	return sum, nil
}

// Aggregator reads the per-function tables the kernel built
// (attach.Tracer.Aggregates).
type Aggregator interface {
	Aggregates() ([]attach.FuncAgg, error)
}

// Table builds the per-function tables from the kernel's aggregation
// (attach.Options.Aggregate), named as table names them, errors by errno
// name.
func Table(t Aggregator, table events.Table) (*stats.Table, error) {
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
