package events

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Perfetto collects calls as Chrome trace-event "complete" slices (ph "X"),
// the JSON format that ui.perfetto.dev and chrome://tracing open: one
// process per tgid, one track per thread (named by comm), one slice per
// call with its arguments ("args" or "regs", and "values"), return value
// ("ret", "ret_str") and attach mode, each as in a JSON line (Line). Timestamps are
// bpf_ktime_get_ns() in µs. Only exits with a recorded entry make a slice;
// Skipped counts the others. With --entry the slices come from the call
// trees instead (AddTree). Reference: "Trace Event Format" (Google,
// docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
type Perfetto struct {
	Table   Table
	Skipped int
	slices  []traceEvent
	threads map[[2]uint32]string
}

type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   float64        `json:"dur,omitempty"`
	Scope string         `json:"s,omitempty"` // instant events: "t" (thread)
	Pid   uint32         `json:"pid"`
	Tid   uint32         `json:"tid"`
	Args  map[string]any `json:"args,omitempty"`
}

// Add records e: exits as slices (entries are carried by their exits), and
// the entries of entry-only functions (symbols.Func.EntryOnly) as instant
// events (ph "i", thread scope).
func (p *Perfetto) Add(e *bpfobj.TraceEvent) {
	if p.threads == nil {
		p.threads = map[[2]uint32]string{}
	}
	p.threads[[2]uint32{e.Tgid, e.Tid}] = Comm(e)
	if f := p.Table.Lookup(e.FuncId); e.Kind == KindEntry && f != nil && f.EntryOnly != "" {
		// No exit will come: an instant event on the thread's track.
		p.slices = append(p.slices, traceEvent{
			Name: p.Table.FuncName(e.FuncId), Cat: "kernel", Ph: "i", Scope: "t",
			Ts: float64(e.TsNs) / 1e3, Pid: e.Tgid, Tid: e.Tid,
			Args: withArgs(map[string]any{"mode": ModeName(e.Mode), "cpu": e.Cpu, "entry_only": f.EntryOnly}, f, e),
		})
		return
	}
	if e.Kind != KindExit {
		return
	}
	if e.Flags&FlagNoEntry != 0 {
		p.Skipped++
		return
	}
	f := p.Table.Lookup(e.FuncId)
	args := withRet(map[string]any{"mode": ModeName(e.Mode), "cpu": e.Cpu}, f, e)
	if e.Flags&FlagHasArgs != 0 {
		withArgs(args, f, e)
	}
	p.slices = append(p.slices, traceEvent{
		Name: p.Table.FuncName(e.FuncId), Cat: "kernel", Ph: "X",
		Ts: float64(e.TsNs-e.DurationNs) / 1e3, Dur: float64(e.DurationNs) / 1e3,
		Pid: e.Tgid, Tid: e.Tid, Args: args,
	})
}

// AddTree records the call tree of one --entry call (Tree.Perfetto) on
// its thread's track: a complete slice per call, children inside their
// parent's slice (the kernel's entry and exit times of the same thread),
// each with "args" (the entry's arguments), "ret" and "ret_str" (the
// return value, as in a JSON line), "errno" (the name, on an error return),
// "depth", "mode" and "cpu"; the root has "entry_call": true and, when
// its error origin is known, "error_origin_func" (the origin's name). The
// calls on the path to the error origin have "error_path": true, the
// origin "error_origin": true (Tree's markErrorPath). An entry-only call
// is an instant event; a call without a recorded entry a slice of zero
// duration at its exit, "no_entry": true.
func (p *Perfetto) AddTree(root *TreeNode) {
	if p.threads == nil {
		p.threads = map[[2]uint32]string{}
	}
	e := &root.Exit
	p.threads[[2]uint32{e.Tgid, e.Tid}] = Comm(e)
	p.addNode(root, true)
}

func (p *Perfetto) addNode(n *TreeNode, root bool) {
	e := &n.Exit
	f := p.Table.Lookup(e.FuncId)
	a := n.args()
	args := map[string]any{"mode": ModeName(e.Mode), "cpu": e.Cpu, "depth": e.Depth}
	if a.Kind == KindEntry || a.Flags&FlagHasArgs != 0 {
		withArgs(args, f, a)
	}
	ev := traceEvent{Name: p.Table.FuncName(e.FuncId), Cat: "kernel", Ph: "X", Ts: float64(n.Start()) / 1e3, Pid: e.Tgid, Tid: e.Tid, Args: args}
	switch {
	case n.entryOnly:
		ev.Ph, ev.Scope = "i", "t"
		args["entry_only"] = f.EntryOnly
	case e.Flags&FlagNoEntry != 0:
		args["no_entry"] = true
		withRet(args, f, e)
	default:
		ev.Dur = float64(e.DurationNs) / 1e3
		withRet(args, f, e)
	}
	if n.Err {
		args["errno"] = ErrnoOf(f, e.Ret)
	}
	if n.Path {
		args["error_path"] = true
	}
	if n.Origin {
		args["error_origin"] = true
	}
	if root {
		args["entry_call"] = true
		if o := n.ErrorOrigin(); o != nil {
			args["error_origin_func"] = p.Table.FuncName(o.Exit.FuncId)
		}
	}
	p.slices = append(p.slices, ev)
	for _, c := range n.Children {
		p.addNode(c, false)
	}
}

// WriteTo writes the trace as one JSON document, slices sorted by start
// time (parents before children that start at the same time).
func (p *Perfetto) WriteTo(w io.Writer) (int64, error) {
	sort.SliceStable(p.slices, func(i, j int) bool {
		if p.slices[i].Ts != p.slices[j].Ts {
			return p.slices[i].Ts < p.slices[j].Ts
		}
		return p.slices[i].Dur > p.slices[j].Dur
	})
	evs := make([]traceEvent, 0, len(p.slices)+len(p.threads))
	keys := make([][2]uint32, 0, len(p.threads))
	for k := range p.threads {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || (keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1])
	})
	for _, k := range keys {
		evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", Pid: k[0], Tid: k[1], Args: map[string]any{"name": fmt.Sprintf("%s %d", p.threads[k], k[1])}})
	}
	evs = append(evs, p.slices...)
	cw := &countWriter{w: w}
	err := json.NewEncoder(cw).Encode(map[string]any{"traceEvents": evs, "displayTimeUnit": "ns"})
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// withArgs sets e's arguments in a slice's args as a JSON line has them:
// "args" or "regs", and "values" (--arg).
func withArgs(args map[string]any, f *symbols.Func, e *bpfobj.TraceEvent) map[string]any {
	args[argsField(f)] = json.RawMessage(appendArgsValue(nil, f, e))
	if e.Flags&FlagVals != 0 && f != nil && len(f.Values) > 0 {
		args["values"] = json.RawMessage(appendValuesObject(nil, f, e))
	}
	return args
}

// withRet sets e's return value in a slice's args as a JSON line has it:
// "ret" (typed) and "ret_str" (as text prints it).
func withRet(args map[string]any, f *symbols.Func, e *bpfobj.TraceEvent) map[string]any {
	args["ret"] = json.RawMessage(appendRetJSON(nil, f, e.Ret))
	args["ret_str"] = string(AppendRet(nil, f, e.Ret))
	return args
}
