package trace

import (
	"bytes"
	"context"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Records as the kernel writes them (bpf/trace.bpf.c, compact form): a
// header, then the arguments of an entry, or the duration and return
// value of an exit; a comm record names a thread before its first event.

const (
	testTgid, testTid = 105, 106
	testT0            = 1_000_000_000 // first event's timestamp (ns)
)

func header(kind uint8, fn uint32, depth uint16, ts uint64, flags, nargs uint8) []byte {
	h := bpfobj.TraceRecHdr{TsNs: ts, Tgid: testTgid, Tid: testTid, FuncId: fn, Depth: depth, Cpu: 1,
		Kind: kind, Mode: 1, Flags: flags, Nargs: nargs}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&h)), events.HeaderSize)...)
}

func appendU64(b []byte, v uint64) []byte {
	return append(b, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 8)...)
}

// entryRec is an entry of function fn at depth, ts ns after testT0.
func entryRec(fn uint32, depth uint16, ts uint64, args ...uint64) []byte {
	b := header(events.KindEntry, fn, depth, testT0+ts, 0, uint8(len(args)))
	for _, a := range args {
		b = appendU64(b, a)
	}
	return b
}

// exitRec is an exit of fn at depth, ts ns after testT0, dur ns after its
// entry, returning ret.
func exitRec(fn uint32, depth uint16, ts, dur uint64, ret int64) []byte {
	return exitRecFlags(fn, depth, ts, dur, ret, 0)
}

func exitRecFlags(fn uint32, depth uint16, ts, dur uint64, ret int64, flags uint8) []byte {
	b := header(events.KindExit, fn, depth, testT0+ts, flags, 0)
	b = appendU64(b, dur)
	return appendU64(b, uint64(ret))
}

// commRec names the test thread.
func commRec(comm string) []byte {
	b := header(events.KindComm, 0, 0, testT0, 0, 0)
	var c [16]byte
	copy(c[:], comm)
	return append(b, c[:]...)
}

// replay is a source of recorded records: it hands them out in order,
// then says the deadline passed (after idle), or returns err.
type replay struct {
	recs      [][]byte
	err       error  // returned once the records are out, instead of a deadline
	empty     func() // called each time the records are out
	idle      time.Duration
	deadlines int
}

func (r *replay) SetDeadline(time.Time) { r.deadlines++ }

func (r *replay) Final() {}

func (r *replay) ReadInto(rec *ringbuf.Record) error {
	if len(r.recs) == 0 {
		if r.empty != nil {
			r.empty()
		}
		if r.err != nil {
			return r.err
		}
		time.Sleep(r.idle)
		return os.ErrDeadlineExceeded
	}
	rec.RawSample = append(rec.RawSample[:0], r.recs[0]...)
	r.recs = r.recs[1:]
	return nil
}

// fakeTracer stands for an attached attach.Tracer: its counters and
// tables are given; Detach hands late records (accepted by the kernel
// before the detach) to the source.
type fakeTracer struct {
	src      *replay
	late     [][]byte
	losses   attach.Losses
	misses   map[string]uint64
	aggs     []attach.FuncAgg
	aggErr   error
	detached int
}

func (f *fakeTracer) Detach() {
	f.detached++
	if f.src != nil {
		f.src.recs = append(f.src.recs, f.late...)
	}
}

func (f *fakeTracer) Losses() (attach.Losses, error)     { return f.losses, nil }
func (f *fakeTracer) RecursionMisses() map[string]uint64 { return f.misses }
func (f *fakeTracer) Aggregates() ([]attach.FuncAgg, error) {
	return f.aggs, f.aggErr
}

// The traced functions: do_sys_openat2 (id 0) calls ext4_file_open
// (id 1, in module ext4); do_exit (id 2) never returns.
var (
	openat2 = &symbols.Func{ID: 0, Name: "do_sys_openat2", Proto: &symbols.Proto{
		Params: []symbols.Param{
			{Name: "dfd", Type: "int", Kind: symbols.ArgInt, Size: 4},
			{Name: "filename", Type: "const char *", Kind: symbols.ArgCharPtr, Size: 8},
			{Name: "how", Type: "struct open_how *", Kind: symbols.ArgPtr, Size: 8},
		},
		Ret: "long", RetKind: symbols.RetLong,
	}}
	ext4Open = &symbols.Func{ID: 1, Name: "ext4_file_open", Module: "ext4", Proto: &symbols.Proto{
		Params:  []symbols.Param{{Name: "inode", Kind: symbols.ArgPtr, Size: 8}, {Name: "filp", Kind: symbols.ArgPtr, Size: 8}},
		RetKind: symbols.RetS32,
	}}
	doExit = &symbols.Func{ID: 2, Name: "do_exit", EntryOnly: symbols.EntryOnlyNoreturn, Proto: &symbols.Proto{
		Params: []symbols.Param{{Name: "code", Type: "long", Kind: symbols.ArgInt, Size: 8}},
	}}
	testFuncs = []*symbols.Func{openat2, ext4Open, doExit}
)

// openCall is one do_sys_openat2 call (dfd -100) opening through
// ext4_file_open, which fails with -ENOENT after 1.5 µs; the outer call
// returns 4 after 3.066 ms.
func openCall() [][]byte {
	return [][]byte{
		commRec("workload"),
		entryRec(0, 0, 0, 0xffffffffffffff9c, 0xffffe2a627bc, 0),
		entryRec(1, 1, 1000, 0xffff000012340000, 0xffff000056780000),
		exitRec(1, 1, 2500, 1500, -2),
		exitRec(0, 0, 3066000, 3066000, 4),
	}
}

// testRun is one pipeline over records, with its tracer, output and log.
type testRun struct {
	o   Options
	src *replay
	tr  *fakeTracer
	out *bytes.Buffer
	log *bytes.Buffer
	cmd *command
	// attached are the functions the tracer attached (do_sys_openat2
	// and ext4_file_open unless set).
	attached []*symbols.Func
	cancel   context.CancelFunc
	p        *pipeline
}

// newTestRun builds a pipeline that reads recs, then stops (ctx cancelled
// once the records are out) unless set differently before run.
func newTestRun(o Options, recs ...[]byte) *testRun {
	r := &testRun{o: o, src: &replay{recs: recs, idle: time.Millisecond}, out: &bytes.Buffer{}, log: &bytes.Buffer{}}
	r.tr = &fakeTracer{src: r.src}
	if r.o.Out == nil {
		r.o.Out = r.out
	}
	if r.o.Log == nil {
		r.o.Log = r.log
	}
	return r
}

// run runs the pipeline with ctx ended when the source first runs dry
// (stopWhenEmpty) or only by o's own conditions.
func (r *testRun) run(stopWhenEmpty bool) (*Summary, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.cancel = cancel
	if stopWhenEmpty && r.src.empty == nil {
		r.src.empty = cancel
	}
	res := &symbols.Resolution{Mode: "fentry+fexit", Funcs: testFuncs}
	if r.attached == nil {
		r.attached = testFuncs[:2]
	}
	r.p = newPipeline(ctx, r.o, r.src, r.tr, "fentry+fexit", r.attached, res, nil, r.cmd)
	r.p.attachTook = 20 * time.Millisecond
	return r.p.run()
}
