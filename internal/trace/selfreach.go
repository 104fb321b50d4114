package trace

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/selfreach"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// SelfReachedReason is the skip reason of a function ftprobe's own BPF
// programs call (its class, what the plan counts, before " (").
const SelfReachedReason = "called by ftprobe's own BPF programs"

// leaveOutSelf learns which of the matched functions ftprobe's own
// programs reach with this trace's settings (internal/selfreach) and
// marks them skipped in every mode (symbols.Kernel.SelfReached): a glob
// leaves them out, counted with the reason, and an exact name is refused
// unless o.TraceSelf. What was learned stays on the Kernel
// (SelfChecked): a later trace with the same settings checks only the
// functions not checked yet. Where the kernel cannot tell (no
// kprobe.multi, no trampolines), or with --dry-run (which attaches
// nothing), it leaves nothing out and says so. learn is selfreach.Learn
// (tests replace it).
func (s *session) leaveOutSelf(o Options, learn func(selfreach.Options) (*selfreach.Result, error)) {
	k := s.k
	k.SelfReached = nil
	if o.TraceSelf {
		return
	}
	res, err := k.Resolve(o.allPatterns(), o.Excludes, attach.ModeKprobeMulti, 0)
	if err != nil {
		return // planning says what is wrong with the patterns
	}
	const notChecked = "ftprobe: note: not checked which matched functions ftprobe's own BPF programs call"
	ao := s.selfOptions(o)
	key := selfKey(ao)
	known := k.SelfChecked[key]
	var todo []*symbols.Func
	for _, f := range res.Funcs {
		if _, ok := known[f.Addr]; !ok {
			todo = append(todo, f)
		}
	}
	t0 := time.Now()
	if len(todo) > 0 && o.DryRun {
		fmt.Fprintf(o.Log, "%s (--dry-run attaches nothing; the trace leaves them out)\n", notChecked)
		return
	}
	if len(todo) > 0 {
		trig, err := k.Resolve([]string{selfreach.Trigger}, nil, attach.ModeFentryFexit, 0)
		if err != nil {
			fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
			return
		}
		r, err := learn(selfreach.Options{Candidates: todo, Trigger: trig.Funcs[0], Trace: ao, Open: attach.Open})
		if err != nil {
			fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
			return
		}
		if k.SelfChecked == nil {
			k.SelfChecked = map[string]map[uint64]float64{}
		}
		if known == nil {
			known = map[uint64]float64{}
			k.SelfChecked[key] = known
		}
		for _, f := range r.Checked {
			known[f.Addr] = 0
		}
		for _, h := range r.Reached {
			known[h.Func.Addr] = h.PerCall
		}
	}
	k.SelfReached = map[uint64]string{}
	var names []string
	checked := 0
	for _, f := range res.Funcs {
		n, ok := known[f.Addr]
		if ok {
			checked++
		}
		if n > 0 {
			k.SelfReached[f.Addr] = fmt.Sprintf("%s (%.1f times per traced call on this kernel: a trampoline on it runs inside ftprobe's programs, a recursion; --trace-self traces it anyway)", SelfReachedReason, n)
			names = append(names, f.Display())
		}
	}
	took := time.Since(t0).Round(time.Millisecond)
	if len(names) == 0 {
		if o.Verbose {
			fmt.Fprintf(o.Log, "ftprobe: none of %d matched functions is %s (checked in %s)\n", checked, SelfReachedReason, took)
		}
		return
	}
	sort.Strings(names)
	fmt.Fprintf(o.Log, "ftprobe: left out %d of %d matched functions: %s (checked in %s): %s (--trace-self traces them)\n",
		len(names), checked, SelfReachedReason, took, strings.Join(names, ", "))
}

// selfOptions are the settings of the trace programs leaveOutSelf learns
// with: o's records or tables, its --entry window and the filters that
// call kernel functions (the process tree, --comm), set so the
// calibrating thread passes them; --min-duration and --errors become a
// 1 ns --min-duration (the deferred records, which the trigger's calls
// reach: they return no error).
func (s *session) selfOptions(o Options) attach.Options {
	f := attach.Filters{Tree: o.Filters.Tree}
	if o.Filters.Comm != "" {
		if b, err := os.ReadFile("/proc/self/comm"); err == nil {
			f.Comm = strings.TrimSpace(string(b))
		}
	}
	if o.Filters.MinDuration > 0 || o.Filters.ErrorsOnly || o.entryErrors {
		f.MinDuration = time.Nanosecond
	}
	ao := attach.Options{Filters: f, Stack: o.Stack, LiveEntries: o.LiveEntries, Aggregate: o.Summary || o.Hist, NoEvents: o.Quiet,
		RingbufSize: o.RingbufSize, Kernel: s.kin, BTF: s.k.Types}
	if len(o.Entries) > 0 {
		ao.Entries = map[uint32]bool{0: true}
	}
	return ao
}

// selfKey names the settings of ao that change what the trace programs
// call (symbols.Kernel.SelfChecked).
func selfKey(ao attach.Options) string {
	f := ao.Filters
	return fmt.Sprintf("tree=%t comm=%t defer=%t stack=%t live=%t agg=%t noevents=%t entry=%t",
		f.Tree, f.Comm != "", f.MinDuration > 0, ao.Stack, ao.LiveEntries, ao.Aggregate, ao.NoEvents, len(ao.Entries) > 0)
}
