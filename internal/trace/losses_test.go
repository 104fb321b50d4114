package trace

import (
	"testing"

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
	assert.Equal(t, "LOST: 5 ringbuf drops; incomplete: 1 stacks not captured",
		lossText(attach.Losses{RingbufDrops: 5, NoEntry: 1, StackFailures: 1}))
	s := &Summary{Mode: "fentry", Losses: attach.Losses{StringFaults: 2, NoEntry: 3}}
	assert.Contains(t, s.Line(), "; none lost (3 calls in flight at attach, detach or the command's exec: 3 exits without entry, 0 entries without exit); incomplete: 2 string reads faulted")
	assert.Equal(t, "LOST: 4 forked processes not followed (tgids map full)", lossText(attach.Losses{TreeFull: 4}))
}
