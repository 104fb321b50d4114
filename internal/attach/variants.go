package attach

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// setting is one frozen .rodata variable of the trace object and its value.
type setting struct {
	name  string
	value any
}

// settingsOf gives the value of every setting of the trace object for
// opts, in the types of bpf/trace.bpf.c's variables.
func settingsOf(opts Options, hashFrames bool) ([]setting, error) {
	f := opts.Filters
	var comm [16]byte
	if err := f.Validate(); err != nil {
		return nil, err
	}
	copy(comm[:], f.Comm)
	var xe, xx, xv bool
	for _, p := range opts.Exprs {
		if p != nil {
			xe = xe || len(p.EntryOps) > 0
			xx = xx || len(p.ExitOps) > 0
			xv = xv || len(p.Values) > 0
		}
	}
	b2u8 := func(b bool) uint8 {
		if b {
			return 1
		}
		return 0
	}
	return []setting{
		{"filter_tgid", f.TGID}, {"filter_tid", f.TID}, {"filter_tree", b2u8(f.Tree)},
		{"filter_comm_len", uint8(len(f.Comm))}, {"filter_comm", comm},
		{"min_duration_ns", uint64(f.MinDuration.Nanoseconds())}, {"errors_only", b2u8(f.ErrorsOnly)},
		{"want_strings", b2u8(opts.Strings)}, {"want_stack", b2u8(opts.Stack)},
		{"want_events", b2u8(!opts.NoEvents)}, {"want_agg", b2u8(opts.Aggregate)},
		{"frames_in_hash", b2u8(hashFrames)},
		{"x_entry", b2u8(xe)}, {"x_exit", b2u8(xx)}, {"x_vals", b2u8(xv)},
		{"window", b2u8(len(opts.Entries) > 0)},
		// Only records come in leaves: without them it is off, as the
		// stat object fixes it.
		{"leaf_records", b2u8(!opts.LiveEntries && !opts.NoEvents)},
		{"entry_only_funcs", b2u8(anyEntryOnly(opts.Funcs) || anyEntryOnly(opts.MultiFuncs))},
	}, nil
}

// variant is one build of bpf/trace.bpf.c: the general object, or one
// whose fixed settings are constants at compile time, so that clang drops
// the paths they rule out (bpf2go TraceLean, TraceFilter, TraceStat in
// gen.go): on arm64 7.3 the lean object's fentry+fexit trace runs about
// 285 instructions per call fewer than the general one's, and the stat
// object's agg body fewer too (compare under icount; docs/benchmarks.md).
type variant struct {
	name  string
	load  func() (*ebpf.CollectionSpec, error)
	fixed map[string]any // setting -> its value there (TestVariantSettings checks each against the object's ftp_fixed_NAME)
}

// variants, the first whose fixed settings the options match is loaded.
var variants = []variant{
	// The plain trace (records, one per leaf call; no --strings,
	// --stack, --filter, --arg, --entry, --min-duration, --errors or
	// tables), frames in task storage. pid, tid, tree and comm filters
	// stay settings.
	{"lean", bpfobj.LoadTraceLean, map[string]any{
		"min_duration_ns": uint64(0), "errors_only": uint8(0),
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(1), "want_agg": uint8(0),
		"frames_in_hash": uint8(0),
		"x_entry":        uint8(0), "x_exit": uint8(0), "x_vals": uint8(0),
		"window":       uint8(0),
		"leaf_records": uint8(1),
	}},
	// Records with --filter, --min-duration, --errors (decided at exit:
	// compare's exit-only body) or --live-entries, frames in task
	// storage.
	{"filter", bpfobj.LoadTraceFilter, map[string]any{
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(1), "want_agg": uint8(0),
		"frames_in_hash": uint8(0),
		"x_vals":         uint8(0),
		"window":         uint8(0),
	}},
	// Tables only (stat, trace --quiet with --summary or --hist): every
	// filter, --filter and --entry stay settings.
	{"stat", bpfobj.LoadTraceStat, map[string]any{
		"want_strings": uint8(0), "want_stack": uint8(0),
		"want_events": uint8(0), "want_agg": uint8(1),
		"x_vals":       uint8(0),
		"leaf_records": uint8(0),
	}},
	{"general", bpfobj.LoadTrace, nil},
}

// variantOf returns the variant that serves settings.
func variantOf(settings []setting) variant {
	for _, v := range variants {
		if matches(settings, v.fixed) {
			return v
		}
	}
	return variants[len(variants)-1]
}

func matches(settings []setting, fixed map[string]any) bool {
	for _, st := range settings {
		if v, ok := fixed[st.name]; ok && v != st.value {
			return false
		}
	}
	return true
}

// setSettings writes settings into spec's variables; one the object fixes
// at compile time (fixed, the variant's) must have its value there.
func setSettings(spec *ebpf.CollectionSpec, settings []setting, fixed map[string]any) error {
	for _, st := range settings {
		vs, ok := spec.Variables[st.name]
		if !ok {
			if v, isFixed := fixed[st.name]; isFixed && v == st.value {
				continue
			}
			return fmt.Errorf("BPF object lacks variable %s", st.name)
		}
		if err := vs.Set(st.value); err != nil {
			return fmt.Errorf("set %s: %w", st.name, err)
		}
	}
	return nil
}
