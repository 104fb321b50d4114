package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Choice is one value of a compare option (a scenario, a trigger, a
// body, a crowd kind) with a one-line description of what it does: the
// registry `compare --help` and the option checks are built from.
type Choice struct {
	Name string
	Desc string
	// Default is true when the option takes it unless told otherwise.
	Default bool
}

// Scenarios are compare's scenarios, in run order.
var Scenarios = []Choice{
	{"hit", "cost per call of the target in every hit mode, for each body and trigger", true},
	{"attach", fmt.Sprintf("wall time to load, attach and detach N functions (--attach-n) in %s, with the programs' pinned memory",
		strings.Join(AttachModes, ", ")), true},
	{"crowd", fmt.Sprintf("hit cost of %s while K other functions (--crowd-k) are traced (--crowd-by), the target alone and shared with the other attach path",
		strings.Join(crowdModes, " and ")), true},
	{"stream", fmt.Sprintf("events per second delivered through the record buffers, and drops, in the trace modes %s", strings.Join(StreamModes, ", ")), true},
}

// Triggers are the ways the hit scenario calls its target.
var Triggers = []Choice{
	{TriggerKernel, "a BPF_PROG_TEST_RUN driver calling bpf_get_numa_node_id() in batches (--batch), as the kernel's bench trig-*", true},
	{TriggerSyscall, "a getppid(2) loop, the probe on its syscall handler (--target to choose another function)", true},
}

// Bodies are the program bodies the hit scenario puts on each mode, in
// report order.
var Bodies = []Choice{
	{BodyEmpty, "the counting program: counts hits only", true},
	{BodyTrace, "ftprobe's trace program, entry and exit records streamed through the record buffers", true},
	{BodyExitOnly, "the trace program sending one record per call, at exit (the --min-duration/--errors path)", true},
	{BodyAgg, "the trace program building stat's tables in the kernel, no record streamed", true},
	{BodyFiltered, "the trace program whose pid filter rejects every call", true},
	{BodyPredicate, "the trace program whose --filter predicate on the first argument rejects every call at entry", false},
	{BodyWindow, "the trace program in --entry mode, the target outside every window: every call rejected at entry", false},
	{BodyTimed, "the counting program plus the two timestamps of a duration: the floor under trace, exit-only and agg", false},
}

// CrowdBys are the crowd scenario's kinds of crowd.
var CrowdBys = []Choice{
	{CrowdByFentry, "K fentry links: a trampoline each", true},
	{CrowdByKprobeMulti, "one kprobe.multi link over the K functions: fprobe's one ftrace_ops", true},
}

// StreamModes are the trace modes the stream scenario measures.
var StreamModes = symbols.Modes

// Names returns the names of cs, only the default ones with defaults.
func Names(cs []Choice, defaults bool) []string {
	var out []string
	for _, c := range cs {
		if c.Default || !defaults {
			out = append(out, c.Name)
		}
	}
	return out
}

// HitModeNames returns the modes `compare --mode` takes: the hit modes
// but the baseline, each once.
func HitModeNames() []string {
	var out []string
	for _, m := range HitModes {
		if m != ModeBaseline && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, m := range TraceModes {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}
