// Package stats holds per-function call tables: calls, errors by errno
// name, and latency from a log-linear duration histogram, as the BPF side
// aggregates them (bpf/trace.bpf.c struct agg), with percentiles, text and
// JSON output.
//
// The histogram has one bucket per nanosecond below 16 ns and 8 buckets
// per power of two above (up to 2^41 ns, then one overflow bucket). A
// percentile is the midpoint of the bucket holding its nearest rank, so it
// is within 1/16 (6.25%) of the exact nearest-rank value (exact below
// 16 ns), and never above the maximum.
package stats

import (
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/plural"
)

// Buckets is the number of histogram buckets (FTP_HIST_BUCKETS).
const Buckets = len(bpfobj.TraceAgg{}.Hist)

const maxLog = 40 // FTP_HIST_MAXLOG

// Bucket returns the histogram bucket of a duration in ns, as the BPF
// side computes it (hist_bucket in bpf/trace.bpf.c).
func Bucket(d uint64) int {
	if d < 16 {
		return int(d)
	}
	m := bits.Len64(d) - 1
	if m > maxLog {
		return Buckets - 1
	}
	return 16 + (m-4)*8 + int((d>>(m-3))&7)
}

// Bounds returns bucket i's range [lo, hi) in ns (hi = 0: unbounded).
func Bounds(i int) (lo, hi uint64) {
	switch {
	case i < 16:
		return uint64(i), uint64(i) + 1
	case i >= Buckets-1:
		return 1 << (maxLog + 1), 0
	}
	m := (i-16)/8 + 4
	sub := uint64((i - 16) % 8)
	w := uint64(1) << (m - 3)
	lo = uint64(1)<<m + sub*w
	return lo, lo + w
}

// Func is one function's table.
type Func struct {
	Name   string            `json:"function"`
	Calls  uint64            `json:"calls"`  // completed calls counted
	Errors uint64            `json:"errors"` // of which returned an error
	Errnos map[string]uint64 `json:"errnos"` // errno name ("ENOENT", or the number) -> count
	Timed  uint64            `json:"timed"`  // calls with a duration (entry seen)
	SumNs  uint64            `json:"sum_ns"`
	MaxNs  uint64            `json:"max_ns"`
	Hist   [Buckets]uint64   `json:"-"`
}

// Add records one call (host-side use and tests): its duration in ns
// (timed = an entry was seen) and its errno name ("" when it succeeded).
func (f *Func) Add(durNs uint64, timed bool, errno string) {
	f.Calls++
	if errno != "" {
		f.Errors++
		if f.Errnos == nil {
			f.Errnos = map[string]uint64{}
		}
		f.Errnos[errno]++
	}
	if !timed {
		return
	}
	f.Timed++
	f.SumNs += durNs
	f.MaxNs = max(f.MaxNs, durNs)
	f.Hist[Bucket(durNs)]++
}

// Sub returns f minus an earlier snapshot of the same function (an
// interval's delta). Max is f's.
func (f *Func) Sub(prev *Func) *Func {
	d := *f
	if prev == nil {
		return &d
	}
	d.Calls -= prev.Calls
	d.Errors -= prev.Errors
	d.Timed -= prev.Timed
	d.SumNs -= prev.SumNs
	d.Errnos = map[string]uint64{}
	for k, v := range f.Errnos {
		if n := v - prev.Errnos[k]; n > 0 {
			d.Errnos[k] = n
		}
	}
	for i := range d.Hist {
		d.Hist[i] -= prev.Hist[i]
	}
	return &d
}

// Percentile returns the p-th percentile (0 < p <= 100) of the durations
// in ns: the midpoint of the bucket holding the nearest rank, capped at
// the maximum (see the package comment for the error bound).
func (f *Func) Percentile(p float64) uint64 {
	if f.Timed == 0 {
		return 0
	}
	rank := uint64(float64(f.Timed)*p/100 + 0.999999)
	rank = max(rank, 1)
	var n uint64
	for i, c := range f.Hist {
		n += c
		if n >= rank {
			lo, hi := Bounds(i)
			if hi == 0 || i < 16 {
				return min(lo, f.MaxNs)
			}
			return min(lo+(hi-lo)/2, f.MaxNs)
		}
	}
	return f.MaxNs
}

// Mean returns the mean duration in ns (0 without timed calls).
func (f *Func) Mean() uint64 {
	if f.Timed == 0 {
		return 0
	}
	return f.SumNs / f.Timed
}

// ErrorList is "ENOENT×3 EINVAL×1", most frequent first.
func (f *Func) ErrorList() string {
	type kv struct {
		k string
		v uint64
	}
	var kvs []kv
	for k, v := range f.Errnos {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || (kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k) })
	var parts []string
	for _, e := range kvs {
		parts = append(parts, fmt.Sprintf("%s×%d", e.k, e.v))
	}
	return strings.Join(parts, " ")
}

// Table holds every function's table, by name.
type Table struct {
	funcs map[string]*Func
}

// New returns an empty table.
func New() *Table { return &Table{funcs: map[string]*Func{}} }

// Get returns name's table, created empty if missing.
func (t *Table) Get(name string) *Func {
	f := t.funcs[name]
	if f == nil {
		f = &Func{Name: name}
		t.funcs[name] = f
	}
	return f
}

// Add records one call of name (see Func.Add; timed).
func (t *Table) Add(name string, durNs uint64, errno string) {
	t.Get(name).Add(durNs, true, errno)
}

// Merge adds f's counts to name's table (two copies of one function).
func (t *Table) Merge(f *Func) {
	g := t.Get(f.Name)
	g.Calls += f.Calls
	g.Errors += f.Errors
	g.Timed += f.Timed
	g.SumNs += f.SumNs
	g.MaxNs = max(g.MaxNs, f.MaxNs)
	for k, v := range f.Errnos {
		if g.Errnos == nil {
			g.Errnos = map[string]uint64{}
		}
		g.Errnos[k] += v
	}
	for i, c := range f.Hist {
		g.Hist[i] += c
	}
}

// Sub returns t minus an earlier snapshot (an interval's deltas).
func (t *Table) Sub(prev *Table) *Table {
	out := New()
	for n, f := range t.funcs {
		var p *Func
		if prev != nil {
			p = prev.funcs[n]
		}
		out.funcs[n] = f.Sub(p)
	}
	return out
}

// Funcs returns the tables sorted by call count, then name.
func (t *Table) Funcs() []*Func {
	out := make([]*Func, 0, len(t.funcs))
	for _, f := range t.funcs {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Calls != out[j].Calls {
			return out[i].Calls > out[j].Calls
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Calls sums the calls of every function.
func (t *Table) Calls() uint64 {
	var n uint64
	for _, f := range t.funcs {
		n += f.Calls
	}
	return n
}

// WriteSummary prints one line per function: calls, errors by errno, and
// mean and p50/p90/p99/max latency.
func (t *Table) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tCALLS\tERRORS\tMEAN\tP50\tP90\tP99\tMAX\tERRNOS")
	for _, f := range t.Funcs() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Calls, f.Errors, Dur(f.Mean()),
			Dur(f.Percentile(50)), Dur(f.Percentile(90)), Dur(f.Percentile(99)), Dur(f.MaxNs), f.ErrorList())
	}
	tw.Flush()
	fmt.Fprintln(w, "(percentiles: midpoint of the in-kernel log-linear histogram bucket, within 1/16 of the exact value)")
}

// log2Rows folds the histogram into power-of-two rows: row i counts
// durations d with bits.Len64(d) == i.
func (f *Func) log2Rows() [65]uint64 {
	var rows [65]uint64
	for i, c := range f.Hist {
		if c == 0 {
			continue
		}
		lo, _ := Bounds(i)
		rows[bits.Len64(lo)] += c
	}
	return rows
}

// WriteHist prints a log2 latency histogram per function, as bpftrace's
// hist() does: [lo, hi) ns rows with counts and bars.
func (t *Table) WriteHist(w io.Writer) {
	for _, f := range t.Funcs() {
		fmt.Fprintf(w, "\n%s (%s)\n", f.Name, plural.Count(f.Calls, "call"))
		rows := f.log2Rows()
		lo, hi := -1, -1
		var peak uint64
		for i, c := range rows {
			if c > 0 {
				if lo < 0 {
					lo = i
				}
				hi = i
				peak = max(peak, c)
			}
		}
		for i := lo; i >= 0 && i <= hi; i++ {
			var a, b uint64
			if i > 0 {
				a, b = uint64(1)<<(i-1), uint64(1)<<i
			} else {
				b = 1
			}
			bar := strings.Repeat("@", int(rows[i]*40/max(peak, 1)))
			fmt.Fprintf(w, "  [%8s, %8s) %8d |%-40s|\n", Dur(a), Dur(b), rows[i], bar)
		}
	}
}

// JSONFunc is one function's table as JSON, with the percentiles.
type JSONFunc struct {
	*Func
	MeanNs uint64 `json:"mean_ns"`
	P50Ns  uint64 `json:"p50_ns"`
	P90Ns  uint64 `json:"p90_ns"`
	P99Ns  uint64 `json:"p99_ns"`
	// Hist is the log2 histogram: count of durations d with
	// bits.Len64(d) == index.
	Hist []uint64 `json:"log2_hist"`
}

// AppendJSON appends one JSON object: {"type":kind, "functions":[...]}
// plus the extra fields, and a newline.
func (t *Table) AppendJSON(b []byte, kind string, extra map[string]any) []byte {
	doc := map[string]any{"type": kind}
	for k, v := range extra {
		doc[k] = v
	}
	var fs []JSONFunc
	for _, f := range t.Funcs() {
		rows := f.log2Rows()
		n := len(rows)
		for n > 0 && rows[n-1] == 0 {
			n--
		}
		fs = append(fs, JSONFunc{Func: f, MeanNs: f.Mean(), P50Ns: f.Percentile(50), P90Ns: f.Percentile(90), P99Ns: f.Percentile(99), Hist: rows[:n]})
	}
	doc["functions"] = fs
	j, _ := json.Marshal(doc)
	return append(append(b, j...), '\n')
}

// Dur formats ns with a unit.
func Dur(ns uint64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 1_000_000_000:
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}
