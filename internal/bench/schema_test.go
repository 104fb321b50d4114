package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite schema.json from the Report types")

// generateSchema reflects Report with the field comments of this package
// as descriptions.
func generateSchema(t *testing.T) []byte {
	r := &jsonschema.Reflector{}
	require.NoError(t, r.AddGoComments("github.com/ftprobe/ftprobe/internal/bench", "."))
	s := r.Reflect(&Report{})
	s.ID = "https://github.com/ftprobe/ftprobe/internal/bench/schema.json"
	s.Title = SchemaID
	s.Description = "One ftprobe compare run (compare --json): header, then the rows of each scenario. Units are in the field names: ns, ms, bytes, per second."
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// TestSchemaCurrent fails when schema.json no longer matches the Report
// types (run with -update to rewrite it).
func TestSchemaCurrent(t *testing.T) {
	b := generateSchema(t)
	if *update {
		require.NoError(t, os.WriteFile("schema.json", b, 0o644))
		t.Skip("schema.json rewritten; rebuild to embed it")
	}
	assert.Equal(t, string(b), string(Schema), "schema.json is stale: go test ./internal/bench -run TestSchemaCurrent -update")
}

func compileSchema(t *testing.T) *sjs.Schema {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(Schema))
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)
	return sch
}

// TestReportsMatchSchema validates the lab reports README shows and a
// report written by WriteJSON against the schema, and checks that the
// schema rejects a document with a missing or mistyped field.
func TestReportsMatchSchema(t *testing.T) {
	sch := compileSchema(t)
	files, err := filepath.Glob("../../docs/bench/compare-*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		v, err := sjs.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err, f)
		assert.NoError(t, sch.Validate(v), f)
	}
	r := &Report{Schema: SchemaID, Header: Header{Config: map[string]string{"CONFIG_FPROBE": "y"}}, Hit: []HitRow{{Trigger: TriggerKernel, Body: BodyEmpty, Mode: ModeFentry, Supported: true, NsPerHit: NewStat([]float64{1, 2})}},
		Crowd: []CrowdRow{{Mode: ModeFentry, K: 10, By: CrowdByFentry, Reason: "x"}}}
	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf))
	v, err := sjs.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.NoError(t, sch.Validate(v))

	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	delete(m, "header")
	assert.Error(t, sch.Validate(m), "header is required")
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	m["hit_cost"].([]any)[0].(map[string]any)["misses"] = "none"
	assert.Error(t, sch.Validate(m), "misses is an integer")
}
