package osthread

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// TestThreadKeepsItsTID: every function given to Do runs on the one thread.
func TestThreadKeepsItsTID(t *testing.T) {
	th := New()
	defer th.Close()
	for range 3 {
		var tid int
		th.Do(func() { tid = unix.Gettid() })
		assert.EqualValues(t, th.TID, tid)
	}
	assert.NotEqualValues(t, unix.Gettid(), th.TID)
}
