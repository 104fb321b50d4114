package attach

import (
	"errors"
	"fmt"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// Losses counts everything that was not delivered. Calls in flight when
// the trace started or stopped (NoEntry, OpenAtExit) are reported but are
// not losses. The counts that are not losses (hits, rejected calls,
// skipped functions) are left out of its JSON: the trace summary carries
// them at its top level.
type Losses struct {
	RingbufDrops      uint64         `json:"ringbuf_drops"`                  // events lost to a full ringbuf (a leaf call's record holds two)
	RingbufDropsByCPU map[int]uint64 `json:"ringbuf_drops_by_cpu,omitempty"` // ringbuf_drops by the CPU whose ringbuf was full or missing (CPUs 512 apart share a row)
	NoEntry           uint64         `json:"exits_without_entry"`            // exits with no matching entry frame
	DepthOverflow     uint64         `json:"depth_overflow"`                 // entries deeper than the per-thread stack
	Unwound           uint64         `json:"unwound_frames"`                 // entries whose own exit was never seen
	StackFull         uint64         `json:"stack_map_full"`                 // threads without a stack slot
	EntryHits         uint64         `json:"-"`                              // entries that passed the filters
	ExitHits          uint64         `json:"-"`                              // exits that passed the filters, or whose entry did (a filter decides at entry)
	KprobeMissed      uint64         `json:"kprobe_missed"`                  // fprobe missed runs (kprobe.multi link info, 6.7+)
	RecursionMiss     uint64         `json:"recursion_misses"`               // program runs skipped by recursion protection
	OpenAtExit        uint64         `json:"entries_without_exit"`           // frames still open when the trace stopped
	StringFaults      uint64         `json:"string_faults"`                  // --strings reads that failed (shown as <fault>)
	StackFailures     uint64         `json:"stack_failures"`                 // --stack: bpf_get_stack failures (no stack on the record)
	TreeFull          uint64         `json:"tree_not_followed"`              // forked processes of the traced command not followed (tgids map full)
	ErrnoFull         uint64         `json:"errno_not_counted"`              // errors whose errno the aggregation could not count (errs map full)
	FilterRejects     uint64         `json:"-"`                              // calls --filter rejected (not a loss)
	ExprFaults        uint64         `json:"expr_faults"`                    // --arg/--filter reads that faulted (<fault>, or the comparison false)
	WindowRejected    uint64         `json:"-"`                              // --entry: calls outside every entry function's window (not a loss)
	WindowExits       uint64         `json:"-"`                              // --entry: threads that exited inside a window (not a loss)
	SkippedFuncs      int            `json:"-"`
	FailedAttaches    int            `json:"failed_attaches"` // functions that matched but failed to attach
}

// Any reports whether anything was lost: ringbuf drops, fprobe missed
// runs, recursion misses, frames beyond the stack or without a stack slot,
// frames unwound without their own exit (a missed exit probe run), and
// string reads, --arg/--filter reads or stacks that failed (the event
// arrived without them).
func (l Losses) Any() bool {
	return l.RingbufDrops+l.DepthOverflow+l.Unwound+l.StackFull+l.KprobeMissed+l.RecursionMiss+l.StringFaults+l.StackFailures+l.TreeFull+l.ErrnoFull+l.ExprFaults > 0
}

// InFlight is the number of calls that were running when the probes were
// attached (exits without entry) or detached (entries without exit).
func (l Losses) InFlight() uint64 { return l.NoEntry + l.OpenAtExit }

// statsRows mirrors ftp_stats in bpf/trace.bpf.c: FTP_NCPU rows of
// FTP_STAT_STRIDE counters.
type statsRows [512][16]uint64

// Counters sums the BPF counters over the CPUs, indexed by
// bpfobj.TraceFtpStat.
func (t *Tracer) Counters() ([bpfobj.TraceFtpStatFTP_STAT_MAX]uint64, error) {
	var out [bpfobj.TraceFtpStatFTP_STAT_MAX]uint64
	rows, err := t.rows()
	if err != nil {
		return out, err
	}
	for _, r := range rows {
		for i := range out {
			out[i] += r[i]
		}
	}
	return out, nil
}

// rows reads ftp_stats: a row of counters per CPU.
func (t *Tracer) rows() (*statsRows, error) {
	if t.stats == nil {
		return nil, errors.New("tracer is closed")
	}
	var rows statsRows
	if err := t.stats.Get(&rows); err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return &rows, nil
}

// dropsByCPU returns the nonzero ringbuf drops of each CPU's row.
func (t *Tracer) dropsByCPU() (map[int]uint64, error) {
	rows, err := t.rows()
	if err != nil {
		return nil, err
	}
	var out map[int]uint64
	for cpu, r := range rows {
		if n := r[bpfobj.TraceFtpStatFTP_STAT_RINGBUF_DROP]; n > 0 {
			if out == nil {
				out = map[int]uint64{}
			}
			out[cpu] = n
		}
	}
	return out, nil
}

// Losses reads the counters, link and program miss counts and the frames
// still open.
func (t *Tracer) Losses() (Losses, error) {
	var l Losses
	c, err := t.Counters()
	if err != nil {
		return l, err
	}
	l.RingbufDrops = c[bpfobj.TraceFtpStatFTP_STAT_RINGBUF_DROP]
	if l.RingbufDrops > 0 {
		if l.RingbufDropsByCPU, err = t.dropsByCPU(); err != nil {
			return l, err
		}
	}
	l.NoEntry = c[bpfobj.TraceFtpStatFTP_STAT_NO_ENTRY]
	l.DepthOverflow = c[bpfobj.TraceFtpStatFTP_STAT_DEPTH_OVERFLOW]
	l.Unwound = c[bpfobj.TraceFtpStatFTP_STAT_UNWOUND]
	l.StackFull = c[bpfobj.TraceFtpStatFTP_STAT_STACK_FULL]
	l.EntryHits = c[bpfobj.TraceFtpStatFTP_STAT_ENTRY_HITS]
	l.ExitHits = c[bpfobj.TraceFtpStatFTP_STAT_EXIT_HITS]
	l.StringFaults = c[bpfobj.TraceFtpStatFTP_STAT_STR_FAULT]
	l.StackFailures = c[bpfobj.TraceFtpStatFTP_STAT_STACK_FAIL]
	l.TreeFull = c[bpfobj.TraceFtpStatFTP_STAT_TREE_FULL]
	l.ErrnoFull = c[bpfobj.TraceFtpStatFTP_STAT_AGG_FULL]
	l.FilterRejects = c[bpfobj.TraceFtpStatFTP_STAT_X_REJECT]
	l.ExprFaults = c[bpfobj.TraceFtpStatFTP_STAT_X_FAULT]
	l.WindowRejected = c[bpfobj.TraceFtpStatFTP_STAT_WINDOW_REJECT]
	if t.windowExits != nil {
		if err := t.windowExits.Get(&l.WindowExits); err != nil {
			return l, fmt.Errorf("read window_exits: %w", err)
		}
	}
	l.KprobeMissed = t.multiMissed()
	for _, p := range t.progs {
		if st, err := p.Stats(); err == nil {
			l.RecursionMiss += st.RecursionMisses
		}
	}
	// Frames pushed (entries with a frame stack) and not closed (exits
	// that found their frame, and frames unwound) are still open.
	noFrame := c[bpfobj.TraceFtpStatFTP_STAT_STACK_FULL] + c[bpfobj.TraceFtpStatFTP_STAT_ENTRY_ONLY]
	pushed := l.EntryHits - min(noFrame, l.EntryHits)
	closed := l.ExitHits - min(l.NoEntry, l.ExitHits) + l.Unwound
	if pushed > closed {
		l.OpenAtExit = pushed - closed
	}
	l.FailedAttaches = len(t.Failed)
	return l, nil
}

// RecursionMisses returns the nonzero recursion misses (program runs the
// kernel skipped because the same program was already running on that
// CPU, prog stats, 5.12+) per program: its name, and for a per-function
// program (fentry, fsession) the function, e.g. "ftp_fentry (do_exit)".
func (t *Tracer) RecursionMisses() map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range t.progs {
		st, err := p.Stats()
		if err != nil || st.RecursionMisses == 0 {
			continue
		}
		name := "?"
		if info, err := p.Info(); err == nil {
			name = info.Name
		}
		if fn := t.progFunc[p]; fn != "" {
			name += " (" + fn + ")"
		}
		out[name] += st.RecursionMisses
	}
	return out
}

func (t *Tracer) multiMissed() uint64 {
	var m uint64
	detached := false
	for _, ml := range t.multi {
		if ml == nil {
			detached = true
			continue
		}
		if info, err := ml.Info(); err == nil {
			if km := info.KprobeMulti(); km != nil {
				m += km.Missed
			}
		}
	}
	if detached || len(t.multi) == 0 {
		return t.missed
	}
	return m
}
