package kernel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/trace"
	"github.com/ftprobe/ftprobe/internal/workload"
)

// TestLeafRecords: one ringbuf record per leaf call (the default) and
// --live-entries (an entry record when each call starts) give the same
// events. ksys_read calls vfs_read: vfs_read is the leaf (its entry and
// exit in one call record), ksys_read's entry is sent on its own before
// vfs_read's record. Each of the workload's three one-byte reads shows as
// ksys_read's entry, vfs_read's entry with count 1, vfs_read's exit
// returning 1, ksys_read's exit returning 1, at depths 0, 1, 1, 0, and
// every exit's entry is exactly its duration before it (the entry's time
// is the frame's, whichever record carried it).
func TestLeafRecords(t *testing.T) {
	e := lab(t)
	for _, mode := range modes {
		for _, live := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/live=%v", mode, live), func(t *testing.T) {
				needMode(t, e, mode)
				evs, sum := traceInThreadWith(t, trace.Options{Patterns: []string{"ksys_read", "vfs_read"}, Mode: mode, LiveEntries: live, Log: testLog{t}}, func() {
					_, err := workload.Run(workload.Spec{Kind: "read", Path: "/etc/hostname", Count: 3})
					require.NoError(t, err)
				})
				want := []string{"entry ksys_read 0", "entry vfs_read 1", "exit vfs_read 1", "exit ksys_read 0"}
				var got []string
				for _, ev := range evs {
					got = append(got, fmt.Sprintf("%s %s %d", ev["type"], ev["func"], num(ev["depth"])))
				}
				require.Equal(t, append(append(append([]string{}, want...), want...), want...), got)
				open := map[string]map[string]any{}
				for _, ev := range evs {
					fn := ev["func"].(string)
					if ev["type"] == "entry" {
						open[fn] = ev
						if fn == "vfs_read" {
							assert.EqualValues(t, 1, argNum(t, ev, "count"), "vfs_read's count")
						}
						continue
					}
					en := open[fn]
					require.NotNil(t, en, "%s's entry", fn)
					assert.EqualValues(t, 1, num(ev["ret"]), "%s returns the byte read", fn)
					assert.Equal(t, num(en["ts_ns"])+num(ev["duration_ns"]), num(ev["ts_ns"]), "%s: entry + duration = exit", fn)
					delete(open, fn)
				}
				assert.EqualValues(t, 6, sum.Entries)
				assert.EqualValues(t, 6, sum.Exits)
				assertNoLosses(t, sum.Losses)
				assert.Zero(t, sum.Losses.InFlight(), "in flight: %+v", sum.Losses)
				assertNothingAttached(t)
			})
		}
	}
}
