package attach

import (
	"errors"
	"fmt"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// FuncAgg is one function's in-kernel table (Options.Aggregate).
type FuncAgg struct {
	Func *symbols.Func
	Agg  bpfobj.TraceAgg
	Errs map[int32]uint64 // return value (negative errno) -> calls
}

// Timed is the number of calls with a duration: the histogram's total
// (struct agg keeps no separate count).
func (a FuncAgg) Timed() uint64 {
	var n uint64
	for _, c := range a.Agg.Hist {
		n += c
	}
	return n
}

// Calls is every counted call: timed ones and those without a recorded
// entry.
func (a FuncAgg) Calls() uint64 { return a.Agg.Untimed + a.Timed() }

// Aggregates reads the per-function tables the BPF side built
// (Options.Aggregate): calls, errors and the duration histogram from the
// aggs array, errors by value from the errs hash. Functions without calls
// are left out. It fails when the tracer was opened without Aggregate.
func (t *Tracer) Aggregates() ([]FuncAgg, error) {
	if t.aggFuncs == nil || t.maps.Aggs == nil {
		return nil, errors.New("attach: tracer opened without Aggregate")
	}
	var out []FuncAgg
	byID := map[uint32]int{}
	for id, f := range t.aggFuncs {
		if f == nil {
			continue
		}
		var a bpfobj.TraceAgg
		if err := t.maps.Aggs.Lookup(uint32(id), &a); err != nil {
			return nil, fmt.Errorf("read aggs[%d]: %w", id, err)
		}
		if (FuncAgg{Agg: a}).Calls() == 0 {
			continue
		}
		byID[uint32(id)] = len(out)
		out = append(out, FuncAgg{Func: f, Agg: a, Errs: map[int32]uint64{}})
	}
	var k bpfobj.TraceErrkey
	var n uint64
	it := t.maps.Errs.Iterate()
	for it.Next(&k, &n) {
		if i, ok := byID[k.FuncId]; ok {
			out[i].Errs[k.Err] += n
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read errs: %w", err)
	}
	return out, nil
}
