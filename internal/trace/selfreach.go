package trace

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/selfreach"
)

// SelfReachedReason is the skip reason of a function ftprobe's own BPF
// programs call (its class, what the plan counts, before " (").
const SelfReachedReason = "called by ftprobe's own BPF programs"

// leaveOutSelf learns which of the matched functions ftprobe's own
// programs reach (internal/selfreach) and marks them skipped in every mode
// (symbols.Kernel.SelfReached): a glob leaves them out, counted with the
// reason, and an exact name is refused unless o.TraceSelf. Where the
// kernel cannot tell (no kprobe.multi, no trampolines), or with --dry-run
// (which attaches nothing), it leaves nothing out and says so. learn is
// selfreach.Learn (tests replace it).
func (s *session) leaveOutSelf(o Options, learn func(selfreach.Options) (*selfreach.Result, error)) {
	s.k.SelfReached = nil
	if o.TraceSelf {
		return
	}
	res, err := s.k.Resolve(o.allPatterns(), o.Excludes, attach.ModeKprobeMulti, 0)
	if err != nil {
		return // planning says what is wrong with the patterns
	}
	const notChecked = "ftprobe: note: not checked which matched functions ftprobe's own BPF programs call"
	if o.DryRun {
		fmt.Fprintf(o.Log, "%s (--dry-run attaches nothing; the trace leaves them out)\n", notChecked)
		return
	}
	trig, err := s.k.Resolve([]string{selfreach.Trigger}, nil, attach.ModeFentryFexit, 0)
	if err != nil {
		fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
		return
	}
	ao := attach.Options{Stack: o.Stack, LiveEntries: o.LiveEntries, RingbufSize: o.RingbufSize, Kernel: s.kin, BTF: s.k.Types}
	r, err := learn(selfreach.Options{Candidates: res.Funcs, Trigger: trig.Funcs[0], Trace: ao, Open: attach.Open})
	if err != nil {
		fmt.Fprintf(o.Log, "%s: %v\n", notChecked, err)
		return
	}
	if len(r.Reached) == 0 {
		if o.Verbose {
			fmt.Fprintf(o.Log, "ftprobe: none of %d matched functions is called by ftprobe's own BPF programs (checked in %s)\n", r.Checked, r.Took.Round(time.Millisecond))
		}
		return
	}
	s.k.SelfReached = map[uint64]string{}
	var names []string
	for _, h := range r.Reached {
		s.k.SelfReached[h.Func.Addr] = fmt.Sprintf("%s (%.1f times per traced call on this kernel: a trampoline on it runs inside ftprobe's programs, a recursion; --trace-self traces it anyway)", SelfReachedReason, h.PerCall)
		names = append(names, h.Func.Display())
	}
	sort.Strings(names)
	fmt.Fprintf(o.Log, "ftprobe: left out %d of %d matched functions: %s (checked in %s): %s (--trace-self traces them)\n",
		len(names), r.Checked, SelfReachedReason, r.Took.Round(time.Millisecond), strings.Join(names, ", "))
}
