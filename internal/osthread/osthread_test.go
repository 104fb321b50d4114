package osthread

import (
	"runtime"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestPin: a pinned thread's affinity is its one CPU, the last this
// process may use, and the caller's own affinity is unchanged.
func TestPin(t *testing.T) {
	cpus, err := CPUs()
	require.NoError(t, err)
	require.NotEmpty(t, cpus)
	assert.Len(t, cpus, runtime.NumCPU(), "the CPUs the process may use")
	last := cpus[len(cpus)-1]
	th := New()
	defer th.Close()
	require.NoError(t, th.Pin(last))
	var set unix.CPUSet
	var gerr error
	th.Do(func() { gerr = unix.SchedGetaffinity(0, &set) })
	require.NoError(t, gerr)
	assert.Equal(t, 1, set.Count())
	assert.True(t, set.IsSet(last))
	after, err := CPUs()
	require.NoError(t, err)
	assert.Equal(t, cpus, after)
	assert.Error(t, th.Pin(len(set)*64+1), "a CPU no set can name")
}
