package trace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// elapsed matches the tracing window of a summary line, which depends on
// the machine.
var elapsed = regexp.MustCompile(` in fentry\+fexit mode in [0-9.]+(ns|µs|ms|s)`)

// summaryLine is the log's summary line with the window left out.
func summaryLine(log string) string {
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	return elapsed.ReplaceAllString(lines[len(lines)-1], " in fentry+fexit mode in T")
}

// TestPipelineText: recorded records of a nested call come out as text
// lines (names, arguments, return values and errnos, durations, pid/tid,
// comm, depth), and the summary counts them.
func TestPipelineText(t *testing.T) {
	r := newTestRun(Options{}, openCall()...)
	sum, err := r.run(true)
	require.NoError(t, err)
	assert.Equal(t,
		"0.000000   1 workload 105/106  → do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL)\n"+
			"0.000001   1 workload 105/106    → ext4_file_open [ext4](inode=0xffff000012340000, filp=0xffff000056780000)\n"+
			"0.000003   1 workload 105/106    ← ext4_file_open [ext4] = -ENOENT  1.500µs\n"+
			"0.003066   1 workload 105/106  ← do_sys_openat2 = 4  3.066ms\n", r.out.String())
	assert.Equal(t, "ftprobe: 4 events (2 entries, 2 exits) from 2 functions in fentry+fexit mode in T; 0 skipped, 0 failed to attach; none lost", summaryLine(r.log.String()))
	assert.Equal(t, uint64(4), sum.Events)
	assert.Equal(t, uint64(2), sum.Entries)
	assert.Equal(t, uint64(2), sum.Exits)
	assert.Equal(t, map[string]int{"do_sys_openat2": 1, "ext4_file_open [ext4]": 1}, sum.PerFunction)
	assert.Equal(t, "fentry+fexit", sum.Mode)
	assert.Equal(t, 2, sum.Functions)
	assert.Equal(t, 20*time.Millisecond, sum.Attach)
	assert.NotZero(t, sum.MaxRSSBytes)
	assert.Zero(t, sum.ExitStatus)
	assert.Equal(t, 1, r.tr.detached)
	assert.True(t, r.p.stop.stopped, "ctx ended the trace")
	assert.Equal(t, "", sum.EntryOnly)
}

// TestPipelineGraph: the graph folds the leaf call onto one line and
// closes the outer call with its return value and duration.
func TestPipelineGraph(t *testing.T) {
	r := newTestRun(Options{Graph: true}, openCall()...)
	_, err := r.run(true)
	require.NoError(t, err)
	assert.Equal(t,
		"0.000000   1 105/106             |  do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) {\n"+
			"0.000001   1 105/106     1.500µs |    ext4_file_open [ext4](inode=0xffff000012340000, filp=0xffff000056780000) = -ENOENT;\n"+
			"0.003066   1 105/106     3.066ms |  } = 4  /* do_sys_openat2 */\n", r.out.String())
}

// TestPipelineGraphFlush: a call still open when the trace ends is
// written at the end (Graph.Flush).
func TestPipelineGraphFlush(t *testing.T) {
	recs := openCall()
	r := newTestRun(Options{Graph: true}, recs[:3]...)
	_, err := r.run(true)
	require.NoError(t, err)
	assert.Equal(t,
		"0.000000   1 105/106             |  do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) {\n"+
			"0.000001   1 105/106             |    ext4_file_open [ext4](inode=0xffff000012340000, filp=0xffff000056780000) {\n", r.out.String())
}

// TestPipelineJSON: one JSON line per event, then the summary line with
// the counts and losses.
func TestPipelineJSON(t *testing.T) {
	r := newTestRun(Options{Output: "json"}, openCall()...)
	r.tr.losses = attach.Losses{RingbufDrops: 5, EntryHits: 9, ExitHits: 8, FilterRejects: 1}
	_, err := r.run(true)
	require.NoError(t, err)
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.out.String()))
	for sc.Scan() {
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		var m map[string]any
		require.NoError(t, d.Decode(&m), sc.Text())
		recs = append(recs, m)
	}
	require.Len(t, recs, 5)
	for i, want := range []struct{ typ, fn, depth string }{{"entry", "do_sys_openat2", "0"}, {"entry", "ext4_file_open", "1"}, {"exit", "ext4_file_open", "1"}, {"exit", "do_sys_openat2", "0"}} {
		assert.Equal(t, want.typ, recs[i]["type"], i)
		assert.Equal(t, want.fn, recs[i]["func"], i)
		assert.Equal(t, json.Number(want.depth), recs[i]["depth"], i)
		assert.Equal(t, json.Number("105"), recs[i]["tgid"])
		assert.Equal(t, json.Number("106"), recs[i]["tid"])
		assert.Equal(t, "workload", recs[i]["comm"])
	}
	assert.Equal(t, "ext4", recs[1]["module"])
	assert.Equal(t, json.Number("-2"), recs[2]["ret"])
	assert.Equal(t, "-ENOENT", recs[2]["ret_str"])
	assert.Equal(t, json.Number("1500"), recs[2]["duration_ns"])
	assert.Equal(t, json.Number("4"), recs[3]["ret"])
	assert.Equal(t, json.Number("3066000"), recs[3]["duration_ns"])
	want := map[string]any{"dfd": json.Number("-100"), "filename": "0xffffe2a627bc", "how": nil}
	assert.Equal(t, want, recs[0]["args"], "named and typed from BTF as the text line")
	assert.Equal(t, want, recs[3]["args"], "the exit carries its entry's arguments")
	assert.Contains(t, r.out.String(), `"args":{"dfd":-100,"filename":"0xffffe2a627bc","how":null}`, "in prototype order")
	// amd64's register of the int: upper 32 bits zero.
	r2 := newTestRun(Options{Output: "json"}, commRec("workload"), entryRec(0, 0, 0, 0xffffff9c, 0xffffe2a627bc, 0), exitRec(0, 0, 1000, 1000, 4))
	_, err = r2.run(true)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(r2.out.String(), `"args":{"dfd":-100,"filename":"0xffffe2a627bc","how":null}`), r2.out.String())
	s := recs[4]
	assert.Equal(t, "summary", s["type"])
	assert.Equal(t, json.Number("4"), s["events"])
	assert.Equal(t, json.Number("2"), s["entries"])
	assert.Equal(t, json.Number("2"), s["exits"])
	assert.Equal(t, json.Number("9"), s["entry_hits"])
	assert.Equal(t, json.Number("8"), s["exit_hits"])
	assert.Equal(t, json.Number("1"), s["filter_rejected"])
	assert.Equal(t, json.Number("20000000"), s["attach_ns"])
	assert.Equal(t, map[string]any{"do_sys_openat2": json.Number("1"), "ext4_file_open [ext4]": json.Number("1")}, s["per_function"])
	assert.Equal(t, json.Number("5"), s["losses"].(map[string]any)["ringbuf_drops"])
	assert.Equal(t, "ftprobe: 4 events (2 entries, 2 exits) from 2 functions in fentry+fexit mode in T; 0 skipped, 0 failed to attach; LOST: 5 ringbuf drops; --filter rejected 1 call", summaryLine(r.log.String()))
}

// TestPipelinePerfetto: the calls become nested slices of one trace,
// written at the end; an exit without its entry has no slice, and the log
// says so.
func TestPipelinePerfetto(t *testing.T) {
	recs := append(openCall(), exitRecFlags(0, 0, 4000000, 0, 3, events.FlagNoEntry))
	r := newTestRun(Options{Output: "perfetto"}, recs...)
	sum, err := r.run(true)
	require.NoError(t, err)
	var doc struct {
		DisplayTimeUnit string
		TraceEvents     []struct {
			Name, Ph string
			Ts, Dur  float64
			Pid, Tid uint32
			Args     map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(r.out.Bytes(), &doc), r.out.String())
	require.Len(t, doc.TraceEvents, 3)
	assert.Equal(t, "workload 106", doc.TraceEvents[0].Args["name"])
	outer, inner := doc.TraceEvents[1], doc.TraceEvents[2]
	assert.Equal(t, "do_sys_openat2", outer.Name)
	assert.Equal(t, "X", outer.Ph)
	assert.InDelta(t, 3066.0, outer.Dur, 0.001, "µs")
	assert.Equal(t, 4.0, outer.Args["ret"])
	assert.Equal(t, "4", outer.Args["ret_str"])
	assert.Equal(t, map[string]any{"dfd": -100.0, "filename": "0xffffe2a627bc", "how": nil}, outer.Args["args"], "as a JSON line has them")
	assert.Equal(t, "ext4_file_open [ext4]", inner.Name)
	assert.InDelta(t, 1.5, inner.Dur, 0.001)
	assert.Equal(t, -2.0, inner.Args["ret"])
	assert.Equal(t, "-ENOENT", inner.Args["ret_str"])
	assert.Equal(t, uint32(105), inner.Pid)
	assert.Equal(t, uint32(106), inner.Tid)
	assert.Contains(t, r.log.String(), "ftprobe: perfetto: 1 exit without a recorded entry has no slice\n")
	assert.Equal(t, uint64(5), sum.Events)
	assert.Equal(t, 2, sum.PerFunction["do_sys_openat2"])
}

// TestPipelineCount: --count stops after that many events, written, and
// leaves what the kernel still holds undrained.
func TestPipelineCount(t *testing.T) {
	r := newTestRun(Options{Count: 2}, openCall()...)
	r.tr.late = [][]byte{exitRec(0, 0, 5000000, 1, 0)}
	sum, err := r.run(false)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), sum.Events)
	assert.Equal(t, uint64(2), sum.Entries)
	assert.Equal(t, 2, strings.Count(r.out.String(), "\n"))
	assert.True(t, r.p.stop.counted)
	assert.True(t, r.p.stop.stopped, "--count is ftprobe ending the trace")
	assert.Equal(t, 1, r.tr.detached)
	assert.Len(t, r.src.recs, 3, "not drained: two records left and the late one")
}

// TestPipelineDrain: after the detach, the records the kernel already
// accepted are read (unless --count ended the trace).
func TestPipelineDrain(t *testing.T) {
	recs := openCall()
	r := newTestRun(Options{}, recs[:3]...)
	r.tr.late = recs[3:]
	sum, err := r.run(true)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), sum.Events)
	assert.Equal(t, uint64(2), sum.Exits)
	assert.Contains(t, r.out.String(), "← do_sys_openat2 = 4  3.066ms\n")
	assert.Empty(t, r.src.recs)
}

// TestPipelineDuration: --duration ends the trace even when no record
// comes, and the window it reports is at least that long.
func TestPipelineDuration(t *testing.T) {
	r := newTestRun(Options{Duration: 30 * time.Millisecond, Verbose: true})
	sum, err := r.run(false)
	require.NoError(t, err)
	assert.True(t, r.p.stop.stopped)
	assert.GreaterOrEqual(t, sum.Elapsed, 30*time.Millisecond)
	assert.Less(t, sum.Elapsed, 10*time.Second)
	assert.Zero(t, sum.Events)
	assert.Empty(t, r.out.String())
	assert.Regexp(t, `^ftprobe: traced for [0-9]+ms, detached 2 functions in [0-9.]+(ns|µs|ms|s)\n`, r.log.String())
	assert.Greater(t, r.src.deadlines, 1, "a deadline per round, and one for the drain")
}

// TestPipelineLosses: the counters read after the detach are the
// summary's losses; recursion misses are named by program; --strict makes
// a loss a failure.
func TestPipelineLosses(t *testing.T) {
	r := newTestRun(Options{Strict: true, RingbufSize: 16 << 20}, openCall()...)
	r.tr.losses = attach.Losses{RingbufDrops: 5, RecursionMiss: 3, NoEntry: 2, StackFailures: 1, FailedAttaches: 1}
	r.tr.misses = map[string]uint64{"ftp_fentry (vfs_read)": 2, "ftp_kmulti": 1}
	sum, err := r.run(true)
	require.Error(t, err)
	assert.EqualError(t, err, "trace: events were lost or incomplete (--strict)")
	c, _ := ClassOf(err)
	assert.Equal(t, ClassFailure, c)
	require.NotNil(t, sum)
	assert.Equal(t, uint64(5), sum.Losses.RingbufDrops)
	assert.Contains(t, r.log.String(), "ftprobe: recursion misses by program (a program preempted or interrupted on its CPU and run again there): ftp_fentry (vfs_read) 2, ftp_kmulti 1\n")
	assert.Equal(t, "ftprobe: 4 events (2 entries, 2 exits) from 2 functions in fentry+fexit mode in T; 0 skipped, 1 failed to attach; LOST: 5 ringbuf drops, 3 recursion misses (2 calls in flight at attach, detach or the command's exec: 2 exits without entry, 0 entries without exit); incomplete: 1 stack not captured",
		summaryLine(r.log.String()))
	// Before it, what keeps the reader up.
	assert.Contains(t, r.log.String(), "ftprobe: the 16 MiB record buffer of a CPU filled faster than ftprobe read it (5 ringbuf drops): "+
		"a larger --buffer-size holds longer bursts (up to ")
	assert.Contains(t, r.log.String(), " per CPU); --min-duration or --errors send one record per kept call, at its exit; "+
		"stat counts in the kernel and sends none\nftprobe: 4 events")

	// Nothing lost, but a matched function failed to attach: its calls
	// were never seen.
	r = newTestRun(Options{Strict: true}, openCall()...)
	r.tr.losses = attach.Losses{FailedAttaches: 2}
	_, err = r.run(true)
	assert.EqualError(t, err, "trace: 2 matched functions failed to attach (--strict)")

	r = newTestRun(Options{}, openCall()...)
	r.tr.losses = attach.Losses{RingbufDrops: 5}
	_, err = r.run(true)
	assert.NoError(t, err, "a loss without --strict is no error")
}

// TestPipelineSkippedAndDeferred: the plan's skips are counted in the
// summary and its losses; --min-duration says the kernel chose the calls.
func TestPipelineSkippedAndDeferred(t *testing.T) {
	r := newTestRun(Options{Filters: attach.Filters{MinDuration: 1000}}, openCall()...)
	r.tr.losses = attach.Losses{ExitHits: 7}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.src.empty = cancel
	res := &symbols.Resolution{Mode: "fentry+fexit", Funcs: testFuncs, Skipped: []*symbols.Func{{Name: "_printk"}}}
	r.p = newPipeline(ctx, r.o, r.src, r.tr, "fentry+fexit", testFuncs[:2], res, nil, nil)
	sum, err := r.p.run()
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Skipped)
	assert.Equal(t, 1, sum.Losses.SkippedFuncs)
	assert.True(t, sum.Deferred)
	assert.Equal(t, "ftprobe: 4 events (2 entries, 2 exits) of 7 calls seen in the kernel (--min-duration/--errors chose) from 2 functions in fentry+fexit mode in T; 1 skipped, 0 failed to attach; none lost", summaryLine(r.log.String()))
}

// TestPipelineEntryOnly: an attached function traced at entry only is
// named in the summary; its entries count, with no exit.
func TestPipelineEntryOnly(t *testing.T) {
	r := newTestRun(Options{}, commRec("exiter"), entryRec(2, 0, 0, 0))
	r.attached = testFuncs
	sum, err := r.run(true)
	require.NoError(t, err)
	assert.Equal(t, "do_exit (noreturn)", sum.EntryOnly)
	assert.Equal(t, 3, sum.Functions)
	assert.Equal(t, uint64(1), sum.Entries)
	assert.Empty(t, sum.PerFunction, "exits are counted per function")
	assert.Contains(t, r.out.String(), "exiter 105/106  → do_exit(code=0)")
	assert.Equal(t, "ftprobe: 1 event (1 entry, 0 exits) from 3 functions in fentry+fexit mode in T; 0 skipped, 0 failed to attach; entry only: do_exit (noreturn); none lost", summaryLine(r.log.String()))
}

// TestPipelineTargetExited: a --pid that is gone is reported as exited
// during the trace.
func TestPipelineTargetExited(t *testing.T) {
	c := exec.Command("/bin/true")
	require.NoError(t, c.Run())
	pid := uint32(c.Process.Pid)
	r := newTestRun(Options{Filters: attach.Filters{TGID: pid}}, openCall()...)
	sum, err := r.run(true)
	require.NoError(t, err)
	assert.Regexp(t, fmt.Sprintf(`^--pid %d exited [0-9.]+(ns|µs|ms|s) into the trace$`, pid), sum.TargetExited)
	assert.Contains(t, r.log.String(), "; --pid "+strconv.Itoa(int(pid))+" exited ")

	r = newTestRun(Options{Filters: attach.Filters{TGID: uint32(os.Getpid()), TID: uint32(os.Getpid())}}, openCall()...)
	sum, err = r.run(true)
	require.NoError(t, err)
	assert.Empty(t, sum.TargetExited, "this process outlives the trace")
}

// TestPipelineStats: --stats-every samples the memory and writes a
// progress line with the losses so far.
func TestPipelineStats(t *testing.T) {
	r := newTestRun(Options{StatsEvery: time.Nanosecond}, openCall()...)
	r.tr.losses = attach.Losses{RingbufDrops: 1}
	sum, err := r.run(true)
	require.NoError(t, err)
	require.NotEmpty(t, sum.Mem)
	m := sum.Mem[0]
	assert.Equal(t, uint64(4), m.Events)
	assert.NotZero(t, m.RSSBytes)
	assert.NotZero(t, m.Heap)
	assert.Regexp(t, `(?m)^ftprobe: \+0s: 4 events \([0-9]+/s\), rss [0-9.]+ MiB, live heap [0-9.]+ MiB; LOST: 1 ringbuf drop$`, r.log.String())
}

// testAggs are kernel tables: 3 calls of do_sys_openat2, 2 timed (1 µs
// and 3 µs), one failing with -ENOENT.
func testAggs() []attach.FuncAgg {
	a := attach.FuncAgg{Func: openat2, Errs: map[int32]uint64{-2: 1}}
	a.Agg.Untimed = 1
	a.Agg.Errors = 1
	a.Agg.SumNs = 4000
	a.Agg.MaxNs = 3000
	a.Agg.Hist[100] = 2
	return []attach.FuncAgg{a}
}

// TestPipelineQuiet: stat (--quiet) writes the kernel's tables to the
// output at each --interval and at the end; --summary writes them to
// the log after the events.
func TestPipelineQuiet(t *testing.T) {
	o := Options{Quiet: true, Summary: true}
	o.SetInterval(time.Nanosecond)
	r := newTestRun(o)
	r.tr.aggs = testAggs()
	stop := 0
	r.src.empty = func() {
		if stop++; stop == 3 {
			r.cancel()
		}
	}
	_, err := r.run(false)
	require.NoError(t, err)
	out := r.out.String()
	assert.Regexp(t, `(?m)^@ \+[0-9.]+(ns|µs|ms|s): calls in the last 1ns \(3\)$`, out, "the first interval has every call")
	assert.Regexp(t, `(?m)^@ \+[0-9.]+(ns|µs|ms|s): calls in the last 1ns \(0\)$`, out, "later ones what changed")
	assert.Regexp(t, `(?m)^@ \+[0-9.]+(ns|µs|ms|s): all calls \(3\)$`, out)
	assert.Contains(t, out, "do_sys_openat2")
	assert.Contains(t, out, "ENOENT")

	r = newTestRun(Options{Quiet: true, Summary: true, Output: "json"})
	r.tr.aggs = testAggs()
	_, err = r.run(true)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(r.out.String(), "\n"), "\n")
	require.Len(t, lines, 2, r.out.String())
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &st))
	assert.Equal(t, "stat", st["type"])
	assert.Equal(t, true, st["final"])
	assert.EqualValues(t, 3, st["calls"])
	assert.Contains(t, lines[1], `"type":"summary"`)

	r = newTestRun(Options{Summary: true, Hist: true}, openCall()...)
	r.tr.aggs = testAggs()
	_, err = r.run(true)
	require.NoError(t, err)
	log := r.log.String()
	assert.Contains(t, log, "do_sys_openat2")
	assert.Less(t, strings.Index(log, "do_sys_openat2"), strings.Index(log, "ftprobe: 4 events"), "the tables come before the summary line")
	assert.NotContains(t, r.out.String(), "all calls")

	r = newTestRun(Options{Quiet: true})
	r.tr.aggErr = errors.New("attach: tracer opened without Aggregate")
	_, err = r.run(true)
	assert.EqualError(t, err, "attach: tracer opened without Aggregate")
	c, _ := ClassOf(err)
	assert.Equal(t, ClassFailure, c)
}

// TestTable: the kernel's per-function tables named as the table names
// them, errors by errno name (a number without one).
func TestTable(t *testing.T) {
	aggs := testAggs()
	aggs[0].Errs[-9999] = 2
	tb, err := Table(&fakeTracer{aggs: aggs}, events.Table{openat2})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), tb.Calls())
	var b strings.Builder
	tb.WriteSummary(&b)
	assert.Contains(t, b.String(), "do_sys_openat2")
	assert.Contains(t, b.String(), "ENOENT")
	assert.Contains(t, b.String(), "-9999")
}

// TestPipelineErrors: a ringbuf that fails is an unclassed failure, a
// malformed record and an output that refuses writes are failures.
func TestPipelineErrors(t *testing.T) {
	r := newTestRun(Options{}, openCall()...)
	r.src.err = errors.New("epoll wait: bad file descriptor")
	sum, err := r.run(false)
	assert.Nil(t, sum)
	assert.EqualError(t, err, "ringbuf read: epoll wait: bad file descriptor")
	var ce *Error
	assert.False(t, errors.As(err, &ce), "unclassed: a failure")

	r = newTestRun(Options{}, commRec("x"), make([]byte, 10))
	_, err = r.run(true)
	assert.EqualError(t, err, "ringbuf record of 10 bytes, shorter than the 32-byte header")
	c, _ := ClassOf(err)
	assert.Equal(t, ClassFailure, c)
	require.True(t, errors.As(err, &ce))

	r = newTestRun(Options{Out: failWriter{}}, openCall()...)
	_, err = r.run(true)
	assert.EqualError(t, err, "write events: disk full")
	c, _ = ClassOf(err)
	assert.Equal(t, ClassFailure, c)

	// A trace larger than the output's buffer fails as it is written.
	var calls [][]byte
	for i := range uint64(1000) {
		calls = append(calls, entryRec(0, 0, 10000*i, 1, 2, 3), exitRec(0, 0, 10000*i+5000, 5000, 0))
	}
	r = newTestRun(Options{Out: failWriter{}, Output: "perfetto"}, calls...)
	_, err = r.run(true)
	assert.EqualError(t, err, "write perfetto trace: disk full")
	c, _ = ClassOf(err)
	assert.Equal(t, ClassFailure, c)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestPipelineCommand: the command's exit ends the trace, and its
// non-zero status is the trace's (ClassCommand); a command still running
// when ftprobe stops the trace is ended, its status not reported.
func TestPipelineCommand(t *testing.T) {
	c := exec.Command("/bin/sh", "-c", "exit 3")
	require.NoError(t, c.Start())
	r := newTestRun(Options{}, openCall()...)
	r.cmd = watchCommand(c)
	sum, err := r.run(false)
	require.Error(t, err)
	cl, status := ClassOf(err)
	assert.Equal(t, ClassCommand, cl)
	assert.Equal(t, 3, status)
	assert.Equal(t, 3, sum.ExitStatus)
	assert.False(t, r.p.stop.stopped)
	assert.True(t, r.cmd.exited)
	assert.Equal(t, uint64(4), sum.Events)

	c = exec.Command("/bin/sleep", "60")
	require.NoError(t, c.Start())
	r = newTestRun(Options{}, openCall()...)
	r.cmd = watchCommand(c)
	t0 := time.Now()
	sum, err = r.run(true)
	require.NoError(t, err)
	assert.Zero(t, sum.ExitStatus, "ftprobe stopped it")
	assert.True(t, r.cmd.exited)
	assert.Equal(t, 128+15, exitStatus(r.cmd.err), "SIGTERM")
	assert.Less(t, time.Since(t0), 2*time.Second)
}

// TestStopper: each stop condition on its own.
func TestStopper(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	s := newStopper(context.Background(), start, time.Second, 0, nil)
	s.now = func() time.Time { return now }
	assert.False(t, s.poll())
	now = start.Add(time.Second)
	assert.False(t, s.poll(), "at the deadline, not yet past it")
	now = now.Add(time.Nanosecond)
	assert.True(t, s.poll())
	assert.True(t, s.stopped)
	assert.True(t, s.ended())

	s = newStopper(context.Background(), start, 0, 3, nil)
	s.now = func() time.Time { return start.Add(time.Hour) }
	assert.False(t, s.poll(), "no --duration")
	assert.False(t, s.reached(2))
	assert.True(t, s.reached(3))
	assert.True(t, s.reached(4))
	assert.False(t, s.ended(), "reaching --count is the loop's to record")
	assert.False(t, newStopper(context.Background(), start, 0, 0, nil).reached(1<<40), "no --count")

	ctx, cancel := context.WithCancel(context.Background())
	s = newStopper(ctx, start, 0, 0, nil)
	assert.False(t, s.poll())
	cancel()
	assert.True(t, s.poll())
	assert.True(t, s.stopped)

	c := &command{done: make(chan error, 1)}
	s = newStopper(context.Background(), start, 0, 0, c)
	assert.False(t, s.poll())
	assert.False(t, s.ended())
	boom := errors.New("exit status 1")
	c.done <- boom
	assert.True(t, s.poll())
	assert.False(t, s.stopped, "the command ended the trace, not ftprobe")
	assert.True(t, c.exited)
	assert.Equal(t, boom, c.err)
	assert.True(t, s.ended())
	c.stop() // exited: nothing to stop
	var none *command
	none.stop()
}

// TestSinks: newSink picks the sink of the output flags.
func TestSinks(t *testing.T) {
	tb := events.Table{openat2}
	assert.IsType(t, textSink{}, newSink(Options{}, tb, nil, 0))
	assert.IsType(t, graphSink{}, newSink(Options{Graph: true}, tb, nil, 0))
	assert.IsType(t, jsonSink{}, newSink(Options{Output: "json", Graph: true}, tb, nil, 0))
	assert.IsType(t, perfettoSink{}, newSink(Options{Output: "perfetto"}, tb, nil, 0))
	var ev bpfobj.TraceEvent
	assert.Empty(t, newSink(Options{Output: "perfetto"}, tb, nil, 0).event(nil, &ev), "written at the end")
}
