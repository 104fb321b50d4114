// Package stats summarizes traced calls per function: call and error
// counts (errors by errno name), latency percentiles from the exact
// in-kernel durations, and log2 histograms.
package stats

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"text/tabwriter"
)

// maxExact is how many durations per function are kept for exact
// percentiles (8 bytes each: 512 KiB per function at most); beyond it
// percentiles come from the log2 histogram, so memory stays bounded.
const maxExact = 1 << 16

// Func accumulates one function's calls.
type Func struct {
	Name   string
	Calls  uint64
	Errors map[string]uint64 // errno name ("ENOENT") -> count
	Hist   [65]uint64        // Hist[i]: durations d with bits.Len64(d) == i (i=0: d=0)
	durs   []uint64
	Max    uint64
	sorted bool
}

// Table holds every function's accumulator.
type Table struct {
	funcs map[string]*Func
}

// New returns an empty table.
func New() *Table { return &Table{funcs: map[string]*Func{}} }

// Add records one completed call of name that took durNs nanoseconds; errno
// is the error name ("" when the call succeeded).
func (t *Table) Add(name string, durNs uint64, errno string) {
	f := t.funcs[name]
	if f == nil {
		f = &Func{Name: name, Errors: map[string]uint64{}}
		t.funcs[name] = f
	}
	f.Calls++
	if errno != "" {
		f.Errors[errno]++
	}
	f.Hist[bits.Len64(durNs)]++
	if durNs > f.Max {
		f.Max = durNs
	}
	if len(f.durs) < maxExact {
		f.durs = append(f.durs, durNs)
		f.sorted = false
	}
}

// Funcs returns the accumulators sorted by call count, then name.
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

// Percentile returns the p-th percentile (0 < p <= 100) of durations in ns:
// nearest-rank over the exact durations while all are kept, else the upper
// bound of the histogram bucket holding that rank.
func (f *Func) Percentile(p float64) uint64 {
	if f.Calls == 0 {
		return 0
	}
	rank := uint64(float64(f.Calls)*p/100 + 0.999999)
	if rank < 1 {
		rank = 1
	}
	if uint64(len(f.durs)) == f.Calls {
		if !f.sorted {
			sort.Slice(f.durs, func(i, j int) bool { return f.durs[i] < f.durs[j] })
			f.sorted = true
		}
		return f.durs[rank-1]
	}
	var n uint64
	for i, c := range f.Hist {
		n += c
		if n >= rank {
			if i == 0 {
				return 0
			}
			return min(uint64(1)<<i-1, f.Max)
		}
	}
	return f.Max
}

// ErrorCount sums the errors.
func (f *Func) ErrorCount() uint64 {
	var n uint64
	for _, c := range f.Errors {
		n += c
	}
	return n
}

// ErrorList is "ENOENT×3 EINVAL×1", most frequent first.
func (f *Func) ErrorList() string {
	type kv struct {
		k string
		v uint64
	}
	var kvs []kv
	for k, v := range f.Errors {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || (kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k) })
	var parts []string
	for _, e := range kvs {
		parts = append(parts, fmt.Sprintf("%s×%d", e.k, e.v))
	}
	return strings.Join(parts, " ")
}

// WriteSummary prints one line per function: calls, errors by errno, and
// p50/p90/p99/max latency.
func (t *Table) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tCALLS\tERRORS\tP50\tP90\tP99\tMAX\tERRNOS")
	for _, f := range t.Funcs() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Calls, f.ErrorCount(),
			Dur(f.Percentile(50)), Dur(f.Percentile(90)), Dur(f.Percentile(99)), Dur(f.Max), f.ErrorList())
	}
	tw.Flush()
}

// WriteHist prints a log2 latency histogram per function, as bpftrace's
// hist() does: [lo, hi) ns buckets with counts and bars.
func (t *Table) WriteHist(w io.Writer) {
	for _, f := range t.Funcs() {
		fmt.Fprintf(w, "\n%s (%d calls)\n", f.Name, f.Calls)
		lo, hi := -1, -1
		var peak uint64
		for i, c := range f.Hist {
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
			bar := strings.Repeat("@", int(f.Hist[i]*40/max(peak, 1)))
			fmt.Fprintf(w, "  [%8s, %8s) %8d |%-40s|\n", Dur(a), Dur(b), f.Hist[i], bar)
		}
	}
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
