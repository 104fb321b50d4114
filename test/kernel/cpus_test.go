package kernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// TestTraceTwoCPUs: two threads pinned to CPUs 0 and 1 read /dev/zero a
// byte at a time at once; trace vfs_read of this process (fentry+fexit, JSON)
// delivers every call of each, entry and exit, from the CPU it ran on,
// each thread's events in timestamp order, and nothing lost: the records
// of the two CPUs' buffers merged into one stream.
func TestTraceTwoCPUs(t *testing.T) {
	const reads = 20_000
	e := lab(t)
	require.GreaterOrEqual(t, runtime.NumCPU(), 2, "the lab VM has two CPUs")
	needMode(t, e, attach.ModeFentryFexit)
	bin := ftprobeBinary(t)
	ws := []*readWorkload{startReaderOn(t, 0, reads), startReaderOn(t, 1, reads)}
	for _, w := range ws {
		defer w.stop()
	}
	file := filepath.Join(t.TempDir(), "events")
	log := traceDuring(t, bin, []string{"--mode", attach.ModeFentryFexit, "--output", "json", "--pid", fmt.Sprint(os.Getpid()), "-o", file, "vfs_read"}, ws...)
	assert.Regexp(t, `; (none lost|LOST: \d+ recursion miss(es)?)\n$`, log)

	type seen struct {
		entries, exits int
		cpus           map[int]int
		last           uint64
		backwards      int
	}
	byTID := map[int]*seen{}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type string         `json:"type"`
			TID  int            `json:"tid"`
			CPU  int            `json:"cpu"`
			TsNs uint64         `json:"ts_ns"`
			Args map[string]any `json:"args"`
			Ret  any            `json:"ret"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		if ev.Type == "summary" {
			var sum trace.Summary
			require.NoError(t, json.Unmarshal(sc.Bytes(), &sum))
			// This process's other threads read too (ftprobe's log).
			assert.GreaterOrEqual(t, sum.Events, uint64(4*reads), "events of the two threads and the rest")
			assertNoLosses(t, sum.Losses)
			continue
		}
		s := byTID[ev.TID]
		if s == nil {
			s = &seen{cpus: map[int]int{}}
			byTID[ev.TID] = s
		}
		s.cpus[ev.CPU]++
		if ev.TsNs < s.last {
			s.backwards++
		}
		s.last = ev.TsNs
		switch {
		case ev.Type == "entry" && ev.Args["count"] == float64(1):
			s.entries++
		case ev.Type == "exit" && ev.Ret == float64(1):
			s.exits++
		}
	}
	require.NoError(t, sc.Err())
	for i, w := range ws {
		s := byTID[w.tid]
		require.NotNil(t, s, "events of the thread on CPU %d", i)
		assert.Equal(t, reads, s.entries, "entries of vfs_read(count=1) on CPU %d", i)
		assert.Equal(t, reads, s.exits, "exits returning 1 on CPU %d", i)
		assert.Equal(t, map[int]int{i: s.cpus[i]}, s.cpus, "the thread pinned to CPU %d ran there only", i)
		assert.Zero(t, s.backwards, "events of the thread on CPU %d out of timestamp order", i)
	}
	assertNothingAttached(t)
}
