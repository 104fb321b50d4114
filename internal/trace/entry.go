package trace

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// CheckEntries checks --entry against the options that need no kernel:
// the call trees are per-call output, so --quiet, --summary and --hist do
// not combine with it (a Perfetto trace holds the trees as nested
// slices), and --min-duration would cut
// calls out of the trees. --errors then keeps the entry calls that
// returned an error (decided in user space, entryErrors), not the error
// calls themselves. Errors are bad input.
func (o *Options) CheckEntries() error {
	if len(o.Entries) == 0 {
		return nil
	}
	for _, e := range o.Entries {
		if _, err := symbols.ParsePattern(e); err != nil {
			return fmt.Errorf("--entry: %w", err)
		}
	}
	first := o.Entries[0]
	for _, c := range []struct {
		on   bool
		flag string
		why  string
	}{
		{o.Quiet, "--quiet (stat)", "the call trees are per-call output, which --quiet does not stream"},
		{o.Summary || o.Hist, "--summary/--hist", "the call trees are per-call output; the tables are not kept for them"},
		{o.Filters.MinDuration > 0, "--min-duration", "it would cut calls out of the trees (the entry calls' durations are in the trees)"},
		{o.Graph, "--graph", "--entry prints its own call tree"},
	} {
		if c.on {
			return fmt.Errorf("--entry %s with %s: %s", first, c.flag, c.why)
		}
	}
	if o.Filters.ErrorsOnly {
		o.Filters.ErrorsOnly, o.entryErrors = false, true
	}
	return nil
}

// allPatterns are the patterns to resolve: the --entry functions are
// traced too.
func (o *Options) allPatterns() []string {
	if len(o.Entries) == 0 {
		return o.Patterns
	}
	return append(append([]string{}, o.Entries...), o.Patterns...)
}

// resolveEntries resolves --entry alone in mode: a pattern that matches
// nothing, only excluded functions or nothing traceable in mode is bad
// input naming it, and so is an entry function that never returns (its
// window would never close).
func (o *Options) resolveEntries(k *symbols.Kernel, mode string) error {
	if len(o.Entries) == 0 {
		return nil
	}
	for _, e := range o.Entries {
		res, err := k.Resolve([]string{e}, o.Excludes, mode, 0)
		if err != nil {
			return badInput(fmt.Errorf("trace --entry %s: %w", e, err))
		}
		for _, f := range res.Funcs {
			if f.EntryOnly != "" {
				return badInput(fmt.Errorf("trace --entry %s: %s never returns (%s): its calls would open a window that never closes", e, f.Display(), f.EntryOnly))
			}
		}
	}
	return nil
}

// entryIDs are the IDs of the functions of fs that an --entry pattern
// matches (nil without --entry).
func (o *Options) entryIDs(fs []*symbols.Func) map[uint32]bool {
	if len(o.Entries) == 0 {
		return nil
	}
	var ps []symbols.Pattern
	for _, e := range o.Entries {
		if p, err := symbols.ParsePattern(e); err == nil {
			ps = append(ps, p)
		}
	}
	out := map[uint32]bool{}
	for _, f := range fs {
		for _, p := range ps {
			if p.MatchFunc(f) {
				out[f.ID] = true
				break
			}
		}
	}
	return out
}

// errNoEntry: none of the functions to attach is an --entry function.
var errNoEntry = errors.New("no --entry function among the functions to attach")

// checkEntryIDs fails when --entry was given and ids holds none.
func (o *Options) checkEntryIDs(ids map[uint32]bool, mode string) error {
	if len(o.Entries) > 0 && len(ids) == 0 {
		return badInput(fmt.Errorf("trace --entry %s in %s mode: %w", strings.Join(o.Entries, ","), mode, errNoEntry))
	}
	return nil
}

// checkEntriesAttached fails when --entry was given and no entry function
// is among the functions attached (each failed to attach): nothing would
// ever be recorded. Bad input naming the functions, mode and reasons.
func (o *Options) checkEntriesAttached(t *attach.Tracer) error {
	if len(o.Entries) == 0 || t.Verified > 0 || len(o.entryIDs(t.Attached)) > 0 {
		return nil
	}
	var why []string
	for _, f := range t.Failed {
		if len(o.entryIDs([]*symbols.Func{f.Func})) > 0 {
			why = append(why, fmt.Sprintf("%s: %v", f.Func.Display(), f.Err))
		}
	}
	return badInput(fmt.Errorf("trace --entry %s in %s mode: no entry function attached (%s)", strings.Join(o.Entries, ","), t.Mode, strings.Join(why, "; ")))
}
