package trace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// TestLossText: lost events and calls are LOST; failed string reads and
// stacks (their events were delivered) are incomplete, not lost; exits
// without entry (calls straddling attach) are not losses: the summary
// line names them as in flight, before what is incomplete.
func TestLossText(t *testing.T) {
	assert.Equal(t, "none lost", lossText(attach.Losses{NoEntry: 3}))
	assert.Equal(t, "none lost; incomplete: 2 string reads faulted", lossText(attach.Losses{StringFaults: 2}))
	assert.Equal(t, "LOST: 5 ringbuf drops; incomplete: 1 stack not captured",
		lossText(attach.Losses{RingbufDrops: 5, NoEntry: 1, StackFailures: 1}))
	s := &Summary{Mode: "fentry+fexit", Losses: attach.Losses{StringFaults: 2, NoEntry: 3}}
	assert.Contains(t, s.Line(), "; none lost (3 calls in flight at attach, detach or the command's exec: 3 exits without entry, 0 entries without exit); incomplete: 2 string reads faulted")
	assert.Equal(t, "LOST: 4 forked processes not followed (tgids map full)", lossText(attach.Losses{TreeFull: 4}))
}

// TestEntryOnlyInSummary: the summary names entry-only functions and their
// reason once, apart from losses and calls in flight.
func TestEntryOnlyInSummary(t *testing.T) {
	s := &Summary{Mode: "fentry+fexit", Functions: 2, Entries: 3, Events: 3, EntryOnly: "do_group_exit (noreturn)"}
	assert.Contains(t, s.Line(), "; 0 skipped, 0 failed to attach; entry only: do_group_exit (noreturn); none lost")
	assert.NotContains(t, s.Line(), "in flight")
	assert.Contains(t, string(s.JSON()), `"entry_only":"do_group_exit (noreturn)"`)
	s.EntryOnly = ""
	assert.NotContains(t, s.Line(), "entry only")
	assert.NotContains(t, string(s.JSON()), "entry_only")
}

// TestSummaryWindow: the summary's time is the tracing window (what
// --duration bounds); a long attach or detach is named beside it, a short
// one is not.
func TestSummaryWindow(t *testing.T) {
	s := &Summary{Mode: "fentry+fexit", Functions: 76, Elapsed: time.Second, Attach: 23*time.Second + 400*time.Millisecond, Detach: 31 * time.Second}
	assert.Contains(t, s.Line(), "from 76 functions in fentry+fexit mode in 1s (attaching took 23.4s, detaching 31s); 0 skipped")
	s.Attach, s.Detach = 20*time.Millisecond, 30*time.Millisecond
	assert.Contains(t, s.Line(), "in fentry+fexit mode in 1s; 0 skipped")
	b := s.JSON()
	assert.Contains(t, string(b), `"elapsed_ns":1000000000,"attach_ns":20000000,"detach_ns":30000000`)
}

// TestArgReadsText: -v's line on how the per-function programs read
// their arguments.
func TestArgReadsText(t *testing.T) {
	assert.Equal(t, "2 per-function programs read their arguments straight from ctx", argReadsText(2, 0))
	assert.Equal(t, "0 per-function programs read their arguments straight from ctx; 4 through bpf_get_func_arg (as compiled)", argReadsText(0, 4))
}

// TestStatSummaryLine: with the kernel's tables (stat) the summary line
// and JSON count the calls in them, not the events (none streamed), and
// still say what was lost; without tables neither names calls.
func TestStatSummaryLine(t *testing.T) {
	calls := uint64(202008)
	s := &Summary{Mode: "fentry", Functions: 3, Elapsed: 2600 * time.Millisecond, Calls: &calls,
		Losses: attach.Losses{EntryHits: 202008, ExitHits: 202008}}
	assert.Equal(t, "ftprobe: 202008 calls of 3 functions counted in the kernel in fentry mode in 2.6s; 0 skipped, 0 failed to attach; none lost", s.Line())
	assert.Contains(t, string(s.JSON()), `"events":0,"entries":0,"exits":0,"calls":202008,`)
	s.Losses.KprobeMissed = 4
	assert.Equal(t, "ftprobe: 202008 calls of 3 functions counted in the kernel in fentry mode in 2.6s; 0 skipped, 0 failed to attach; LOST: 4 fprobe missed runs", s.Line())
	zero := uint64(0)
	s.Calls = &zero
	assert.Contains(t, string(s.JSON()), `"calls":0,`, "stat counted nothing: said, not left out")
	s.Calls = nil
	assert.NotContains(t, s.Line(), "calls")
	assert.NotContains(t, string(s.JSON()), `"calls"`)
}
