package trace

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// vfsRead is vfs_read(file, buf, count, pos) returning ssize_t.
var vfsRead = &symbols.Func{ID: 0, Name: "vfs_read", Proto: &symbols.Proto{
	Params: []symbols.Param{
		{Name: "file", Type: "struct file *", Kind: symbols.ArgPtr, Size: 8},
		{Name: "buf", Type: "char *", Kind: symbols.ArgCharPtr, Size: 8},
		{Name: "count", Type: "size_t", Kind: symbols.ArgUint, Size: 8},
		{Name: "pos", Type: "loff_t *", Kind: symbols.ArgPtr, Size: 8},
	},
	Ret: "ssize_t", RetKind: symbols.RetLong,
}}

// callRec is a call record of vfs_read (a leaf call's entry and exit in
// one): ts ns after testT0, 1.2 µs long, returning 1.
func callRec(ts uint64) []byte {
	b := header(events.KindCall, 0, 0, testT0+ts, 0, 4)
	b = appendU64(b, 1200)
	b = appendU64(b, 1)
	for _, a := range []uint64{0xffff000012340000, 0xffffe2a627bc, 1, 0xffff800080a3bd58} {
		b = appendU64(b, a)
	}
	return b
}

// loopSource hands out recs round and round, n records in all, then
// reports the deadline passed.
type loopSource struct {
	recs [][]byte
	i, n int
}

func (s *loopSource) SetDeadline(time.Time) {}

func (s *loopSource) Final() {}

func (s *loopSource) ReadInto(rec *ringbuf.Record) error {
	if s.i >= s.n {
		return os.ErrDeadlineExceeded
	}
	rec.RawSample = append(rec.RawSample[:0], s.recs[s.i%len(s.recs)]...)
	s.i++
	return nil
}

// benchmarkPipeline runs b.N vfs_read call records (2 events each)
// through the pipeline to a discarding writer, as output.
func benchmarkPipeline(b *testing.B, output string) {
	recs := [][]byte{commRec("workload")}
	for i := uint64(0); i < 64; i++ {
		recs = append(recs, callRec(2000*i))
	}
	src := &loopSource{recs: recs[1:]}
	funcs := []*symbols.Func{vfsRead}
	res := &symbols.Resolution{Mode: "fsession", Funcs: funcs}
	o := Options{Output: output, Out: io.Discard, Log: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newPipeline(ctx, o, &loopSource{recs: recs[:1], n: 1}, &fakeTracer{}, "fsession", funcs, res, nil, nil)
	p.rec.RawSample = recs[0]
	if _, err := p.handle(); err != nil {
		b.Fatal(err)
	}
	src.n = b.N
	p.src = src
	b.ReportAllocs()
	b.ResetTimer()
	for p.src.ReadInto(&p.rec) == nil {
		if _, err := p.handle(); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.w.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if p.sum.Events != uint64(2*b.N) {
		b.Fatalf("%d events from %d call records", p.sum.Events, b.N)
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

// BenchmarkPipelineText: vfs_read call records decoded, formatted as
// text and written, per record (2 events).
func BenchmarkPipelineText(b *testing.B) { benchmarkPipeline(b, "text") }

// BenchmarkPipelineJSON: the same as JSON lines.
func BenchmarkPipelineJSON(b *testing.B) { benchmarkPipeline(b, "json") }
