package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/schematest"
)

var update = flag.Bool("update", false, "rewrite schema.json from the Report types")

// reportDoc is schema.json's source: the Report types and their comments.
var reportDoc = schematest.Doc{
	Value:       &Report{},
	Comments:    map[string]string{"github.com/ftprobe/ftprobe/internal/bench": "."},
	ID:          "https://github.com/ftprobe/ftprobe/internal/bench/schema.json",
	Title:       SchemaID,
	Description: "One ftprobe compare run (compare --json): header, then the rows of each scenario. Units are in the field names: ns, ms, bytes, per second.",
}

// mergeDoc is merge_schema.json's source: the Merged types and their
// comments.
var mergeDoc = schematest.Doc{
	Value:       &Merged{},
	Comments:    map[string]string{"github.com/ftprobe/ftprobe/internal/bench": "."},
	ID:          "https://github.com/ftprobe/ftprobe/internal/bench/merge_schema.json",
	Title:       MergeSchemaID,
	Description: "ftprobe compare reports side by side (compare --from A --from B --json): the inputs in column order, grouped by clock, one cell per kernel in each row, and the verdict against --baseline.",
}

// TestSchemaCurrent fails when schema.json or merge_schema.json no longer
// matches the Report or Merged types (run with -update to rewrite them).
func TestSchemaCurrent(t *testing.T) {
	t.Run("report", func(t *testing.T) {
		schematest.Current(t, reportDoc, Schema, "schema.json", *update, "go test ./internal/bench -run TestSchemaCurrent -update")
	})
	t.Run("merge", func(t *testing.T) {
		schematest.Current(t, mergeDoc, MergeSchema, "merge_schema.json", *update, "go test ./internal/bench -run TestSchemaCurrent -update")
	})
}

// TestReportsMatchSchema validates the lab reports README and
// docs/benchmarks.md show (threads-*: compare --threads) and a
// report written by WriteJSON against the schema, and checks that the
// schema rejects a document with a missing or mistyped field.
func TestReportsMatchSchema(t *testing.T) {
	sch := schematest.Compile(t, Schema, "schema.json")
	files, err := filepath.Glob("../../docs/bench/compare-*.json")
	require.NoError(t, err)
	threads, err := filepath.Glob("../../docs/bench/threads-*.json")
	require.NoError(t, err)
	require.NotEmpty(t, threads)
	files = append(files, threads...)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NoError(t, sch.Validate(schematest.Decode(t, b)), f)
	}
	r := &Report{Schema: SchemaID, Header: Header{Config: map[string]string{"CONFIG_FPROBE": "y"}}, Hit: []HitRow{{Trigger: TriggerKernel, Body: BodyEmpty, Mode: ModeFentry, Supported: true, NsPerHit: NewStat([]float64{1, 2})}},
		Crowd: []CrowdRow{{Mode: ModeFentry, K: 10, By: CrowdByFentry, Reason: "x"}}}
	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf))
	assert.NoError(t, sch.Validate(schematest.Decode(t, buf.Bytes())))

	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	delete(m, "header")
	assert.Error(t, sch.Validate(m), "header is required")
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	m["hit_cost"].([]any)[0].(map[string]any)["misses"] = "none"
	assert.Error(t, sch.Validate(m), "misses is an integer")
}
