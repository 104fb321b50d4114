package trace

import (
	"context"
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

// learnFunc is selfreach.Learn (tests replace it).
type learnFunc func(context.Context, selfreach.Options) (*selfreach.Result, error)

// leaveOutSelf learns which of the matched functions ftprobe's own
// programs reach with this trace's settings (internal/selfreach) and
// marks them skipped in every mode (symbols.Kernel.SelfReached): a glob
// leaves them out, counted with the reason, and an exact name is refused
// unless o.TraceSelf. What was learned stays on the Kernel (SelfChecked)
// and in cache for the rest of the boot: a later trace with the same
// settings, in this process or another, checks only the functions not
// checked yet, and loads nothing when there are none. Where the kernel
// cannot tell (no kprobe.multi, no trampolines), or with --dry-run (which
// attaches nothing), it leaves nothing out and says so.
func (s *session) leaveOutSelf(ctx context.Context, o Options, learn learnFunc, cache selfreach.Cache) {
	k := s.k
	k.SelfReached = nil
	if o.TraceSelf {
		return
	}
	res, err := k.Resolve(o.allPatterns(), o.Excludes, attach.ModeKprobeMulti, 0)
	if err != nil {
		return // planning says what is wrong with the patterns
	}
	ao := s.selfOptions(o)
	key := selfKey(ao)
	t0 := time.Now()
	known, todo := s.selfKnown(key, res.Funcs, cache)
	cached := len(res.Funcs) - len(todo)
	if len(todo) > 0 && !s.learnSelf(ctx, o, learn, ao, todo, known, cache.Store) {
		return
	}
	k.SelfReached = map[uint64]string{}
	var names []string
	checked := 0
	for _, f := range res.Funcs {
		n, ok := known[f.Addr]
		if ok && n >= 0 {
			checked++
		}
		if n > 0 {
			k.SelfReached[f.Addr] = fmt.Sprintf("%s (%.1f times per traced call on this kernel: a trampoline on it runs inside ftprobe's programs, a recursion; --trace-self traces it anyway)", SelfReachedReason, n)
			names = append(names, f.Display())
		}
	}
	took := fmt.Sprintf("checked in %s", time.Since(t0).Round(time.Millisecond))
	switch {
	case len(todo) == 0:
		took = "cached for this boot"
	case cached > 0:
		took = fmt.Sprintf("checked %d in %s, %d cached for this boot", len(todo), time.Since(t0).Round(time.Millisecond), cached)
	}
	if len(names) == 0 {
		if o.Verbose {
			fmt.Fprintf(o.Log, "ftprobe: none of %d matched functions is %s (%s)\n", checked, SelfReachedReason, took)
		}
		return
	}
	sort.Strings(names)
	fmt.Fprintf(o.Log, "ftprobe: left out %d of %d matched functions: %s (%s): %s (--trace-self traces them)\n",
		len(names), checked, SelfReachedReason, took, strings.Join(names, ", "))
}

// selfKnown returns the verdicts known for the settings key, by address
// (Kernel.SelfChecked, completed from cache for funcs), and the functions
// of funcs without one.
func (s *session) selfKnown(key string, funcs []*symbols.Func, cache selfreach.Cache) (map[uint64]float64, []*symbols.Func) {
	k := s.k
	if k.SelfChecked == nil {
		k.SelfChecked = map[string]map[uint64]float64{}
	}
	known := k.SelfChecked[key]
	if known == nil {
		known = map[uint64]float64{}
		k.SelfChecked[key] = known
	}
	var file map[string]float64
	loaded := false
	var todo []*symbols.Func
	for _, f := range funcs {
		if _, ok := known[f.Addr]; ok {
			continue
		}
		if !loaded {
			file, loaded = cache.Load(key), true
		}
		if v, ok := file[selfreach.CacheName(f)]; ok {
			known[f.Addr] = v
			continue
		}
		todo = append(todo, f)
	}
	return known, todo
}

// learnSelf checks todo with learn, adds the verdicts to known and hands
// them to store (by selfreach.CacheName). false: not checked (the log
// says why, unless ctx ended).
func (s *session) learnSelf(ctx context.Context, o Options, learn learnFunc, ao attach.Options, todo []*symbols.Func,
	known map[uint64]float64, store func(string, map[string]float64) error) bool {
	const notChecked = "ftprobe: note: not checked which matched functions ftprobe's own BPF programs call"
	if o.DryRun {
		fmt.Fprintf(o.Log, "%s (--dry-run attaches nothing; the trace leaves them out)\n", notChecked)
		return false
	}
	trig, err := s.k.Resolve([]string{selfreach.Trigger}, nil, attach.ModeFentryFexit, 0)
	if err != nil {
		fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
		return false
	}
	r, err := learn(ctx, selfreach.Options{Candidates: todo, Trigger: trig.Funcs[0], Trace: ao, Open: attach.Open})
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
		}
		return false
	}
	asked := map[uint64]*symbols.Func{}
	for _, f := range todo {
		asked[f.Addr] = f
	}
	learned := map[string]float64{}
	set := func(addr uint64, v float64) {
		if f := asked[addr]; f != nil {
			known[addr] = v
			learned[selfreach.CacheName(f)] = v
		}
	}
	for _, f := range r.Refused {
		set(f.Func.Addr, selfreach.Refused)
	}
	for _, f := range r.Checked {
		set(f.Addr, 0)
	}
	for _, h := range r.Reached {
		set(h.Func.Addr, h.PerCall)
	}
	_ = store(selfKey(ao), learned)
	return true
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
