package trace

import (
	"encoding/json"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/schematest"
)

var update = flag.Bool("update", false, "rewrite summary.schema.json from the Summary type")

// summaryDoc is summary.schema.json's source: the Summary type and the
// comments of this package and of attach (Losses).
var summaryDoc = schematest.Doc{
	Value: &Summary{},
	Comments: map[string]string{"github.com/ftprobe/ftprobe/internal/trace": ".",
		"github.com/ftprobe/ftprobe/internal/attach": "../attach"},
	ID:          "https://github.com/ftprobe/ftprobe/internal/trace/summary.schema.json",
	Title:       "ftprobe trace summary",
	Description: "The last JSON line of `ftprobe trace --output json`: counts of the trace, its losses (nothing is lost silently) and per-function event counts. Units are in the field names: ns, bytes.",
}

// TestSummarySchemaCurrent fails when summary.schema.json no longer
// matches the Summary type (run with -update to rewrite it).
func TestSummarySchemaCurrent(t *testing.T) {
	schematest.Current(t, summaryDoc, SummarySchema, "summary.schema.json", *update, "go test ./internal/trace -run TestSummarySchemaCurrent -update")
}

// TestSummaryMatchesSchema: a summary with every field set validates, its
// JSON carries the counts where readers look for them, and the schema
// rejects a summary without its losses or with a mistyped count.
func TestSummaryMatchesSchema(t *testing.T) {
	sch := schematest.Compile(t, SummarySchema, "summary.schema.json")
	s := &Summary{Mode: "fentry+fexit", Functions: 2, Skipped: 1, Events: 10, Entries: 5, Exits: 5, Elapsed: time.Second,
		Attach: time.Millisecond, Detach: time.Millisecond, MaxRSSBytes: 1 << 20,
		Losses:      attach.Losses{EntryHits: 7, ExitHits: 6, FilterRejects: 3, RingbufDrops: 2, ErrnoFull: 1, SkippedFuncs: 1},
		PerFunction: map[string]int{"vfs_read": 10}, TargetExited: "--pid 1 exited", EntryOnly: "do_exit (noreturn)", ExitStatus: 2,
		Mem: []MemSample{{At: time.Second, Events: 10, RSSBytes: 1 << 20, Heap: 1 << 19}}, Deferred: true}
	b := s.JSON()
	assert.NoError(t, sch.Validate(schematest.Decode(t, b)))
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, "summary", m["type"])
	assert.EqualValues(t, 7, m["entry_hits"])
	assert.EqualValues(t, 6, m["exit_hits"])
	assert.EqualValues(t, 3, m["filter_rejected"])
	losses := m["losses"].(map[string]any)
	assert.EqualValues(t, 2, losses["ringbuf_drops"])
	assert.EqualValues(t, 1, losses["errno_not_counted"], "a loss the hand-written summary left out")
	assert.NotContains(t, losses, "entry_hits", "hits are not losses")
	delete(m, "losses")
	assert.Error(t, sch.Validate(m), "losses is required")
	require.NoError(t, json.Unmarshal(b, &m))
	m["events"] = "ten"
	assert.Error(t, sch.Validate(m), "events is an integer")
}
