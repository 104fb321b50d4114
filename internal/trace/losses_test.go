package trace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// TestLossText: lost events and calls are LOST; failed string reads and
// stacks (their events were delivered) are incomplete, not lost; exits
// without entry (calls straddling attach) are named only next to real
// losses.
func TestLossText(t *testing.T) {
	assert.Equal(t, "none lost", lossText(attach.Losses{NoEntry: 3}))
	assert.Equal(t, "none lost; incomplete: 2 string reads faulted", lossText(attach.Losses{StringFaults: 2}))
	assert.Equal(t, "LOST: 5 ringbuf drops, 1 exits without entry; incomplete: 1 stacks not captured",
		lossText(attach.Losses{RingbufDrops: 5, NoEntry: 1, StackFailures: 1}))
	assert.Equal(t, "LOST: 4 forked processes not followed (tgids map full)", lossText(attach.Losses{TreeFull: 4}))
}
