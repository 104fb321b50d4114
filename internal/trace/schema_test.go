package trace

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
)

var update = flag.Bool("update", false, "rewrite summary.schema.json from the Summary type")

func generateSummarySchema(t *testing.T) []byte {
	r := &jsonschema.Reflector{}
	require.NoError(t, r.AddGoComments("github.com/ftprobe/ftprobe/internal/trace", "."))
	require.NoError(t, r.AddGoComments("github.com/ftprobe/ftprobe/internal/attach", "../attach"))
	s := r.Reflect(&Summary{})
	s.ID = "https://github.com/ftprobe/ftprobe/internal/trace/summary.schema.json"
	s.Title = "ftprobe trace summary"
	s.Description = "The last JSON line of `ftprobe trace --output json`: counts of the trace, its losses (nothing is lost silently) and per-function event counts. Units are in the field names: ns, bytes."
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// TestSummarySchemaCurrent fails when summary.schema.json no longer
// matches the Summary type (run with -update to rewrite it).
func TestSummarySchemaCurrent(t *testing.T) {
	b := generateSummarySchema(t)
	if *update {
		require.NoError(t, os.WriteFile("summary.schema.json", b, 0o644))
		t.Skip("summary.schema.json rewritten; rebuild to embed it")
	}
	assert.Equal(t, string(b), string(SummarySchema), "summary.schema.json is stale: go test ./internal/trace -run TestSummarySchemaCurrent -update")
}

// TestSummaryMatchesSchema: a summary with every field set validates, its
// JSON carries the counts where readers look for them, and the schema
// rejects a summary without its losses or with a mistyped count.
func TestSummaryMatchesSchema(t *testing.T) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(SummarySchema))
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource("summary.schema.json", doc))
	sch, err := c.Compile("summary.schema.json")
	require.NoError(t, err)
	s := &Summary{Mode: "fentry+fexit", Functions: 2, Skipped: 1, Events: 10, Entries: 5, Exits: 5, Elapsed: time.Second,
		Attach: time.Millisecond, Detach: time.Millisecond, MaxRSSBytes: 1 << 20,
		Losses:      attach.Losses{EntryHits: 7, ExitHits: 6, FilterRejects: 3, RingbufDrops: 2, ErrnoFull: 1, SkippedFuncs: 1},
		PerFunction: map[string]int{"vfs_read": 10}, TargetExited: "--pid 1 exited", EntryOnly: "do_exit (noreturn)", ExitStatus: 2,
		Mem: []MemSample{{At: time.Second, Events: 10, RSSBytes: 1 << 20, Heap: 1 << 19}}, Deferred: true}
	b := s.JSON()
	v, err := sjs.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	assert.NoError(t, sch.Validate(v))
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
