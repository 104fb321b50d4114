package kernel

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompareThreads runs compare --threads 1,all on the kernel trigger
// and asserts every thread's calls are counted exactly, the trace body's
// records all read from the CPUs' buffers, for the rows of one thread and
// of every CPU; not timings.
func TestCompareThreads(t *testing.T) {
	lab(t)
	n := runtime.NumCPU()
	if n < 2 {
		t.Skipf("%d CPU: one thread only", n)
	}
	f := t.TempDir() + "/t.json"
	cmd := exec.Command(ftprobeBinary(t), "compare", "-q", "--runs", "1", "--scenario", "hit", "--trigger", "kernel", "--calls", "2000",
		"--threads", "1,all", "--body", "empty,trace", "--mode", "fentry+fexit", "--json", f)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	var r struct {
		Hit []struct {
			Body, Mode, Reason string
			Supported          bool
			Threads            int
			Calls              int    `json:"calls_per_run"`
			Hits               uint64 `json:"hits_last_run"`
			Expected           uint64 `json:"hits_expected"`
			Misses             int64
			Delivered          uint64  `json:"events_delivered"`
			Drops              uint64  `json:"ringbuf_drops"`
			OneThread          float64 `json:"ratio_to_one_thread"`
		} `json:"hit_cost"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	seen := map[string]bool{}
	for _, h := range r.Hit {
		seen[fmt.Sprintf("%s/%s/%d", h.Body, h.Mode, h.Threads)] = true
		require.True(t, h.Supported, "%s/%s/%d: %s", h.Body, h.Mode, h.Threads, h.Reason)
		assert.Contains(t, []int{1, n}, h.Threads)
		assert.Equal(t, 2000, h.Calls, "calls per thread")
		if h.Mode == "baseline" {
			continue
		}
		assert.Equal(t, uint64(2*2000*h.Threads), h.Expected, "%s/%d: entry and exit of every thread's calls", h.Body, h.Threads)
		assert.Equal(t, h.Expected, h.Hits, "%s/%d", h.Body, h.Threads)
		assert.Zero(t, h.Misses, "%s/%d", h.Body, h.Threads)
		if h.Threads == 1 {
			assert.Zero(t, h.OneThread, "%s/1: no x 1 thread in the one-thread row", h.Body)
		} else if h.Body == "trace" {
			// The trace body costs far more than timing noise under
			// TCG; the empty body's cost over baseline may not.
			assert.Positive(t, h.OneThread, "trace/%d: x 1 thread at several", h.Threads)
		}
		if h.Body == "trace" {
			assert.Equal(t, h.Hits, h.Delivered, "%d threads: every record read", h.Threads)
			assert.Zero(t, h.Drops)
		}
	}
	assert.Len(t, seen, 8, "baseline and fentry+fexit, empty and trace, 1 and %d threads: %v", n, seen)
}
