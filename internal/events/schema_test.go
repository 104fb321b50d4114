package events

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

var update = flag.Bool("update", false, "rewrite event.schema.json from the Line type")

func generateEventSchema(t *testing.T) []byte {
	r := &jsonschema.Reflector{}
	require.NoError(t, r.AddGoComments("github.com/ftprobe/ftprobe/internal/events", "."))
	s := r.Reflect(&Line{})
	s.ID = "https://github.com/ftprobe/ftprobe/internal/events/event.schema.json"
	s.Title = "ftprobe trace event"
	s.Description = "An entry or exit line of `ftprobe trace --output json`: one JSON object per line, before the summary line. Arguments, return values and --arg values are typed from BTF by one rule (see args). Units are in the field names: ns."
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// TestEventSchemaCurrent fails when event.schema.json no longer matches
// the Line type (run with -update to rewrite it).
func TestEventSchemaCurrent(t *testing.T) {
	b := generateEventSchema(t)
	if *update {
		require.NoError(t, os.WriteFile("event.schema.json", b, 0o644))
		t.Skip("event.schema.json rewritten; rebuild to embed it")
	}
	assert.Equal(t, string(b), string(EventSchema), "event.schema.json is stale: go test ./internal/events -run TestEventSchemaCurrent -update")
}

// TestEventLinesMatchSchema: the lines JSON writes (entry and exit, with
// strings, --arg values, a stack, without a prototype) validate against
// EventSchema and decode into Line without a field Line lacks.
func TestEventLinesMatchSchema(t *testing.T) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(EventSchema))
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource("event.schema.json", doc))
	sch, err := c.Compile("event.schema.json")
	require.NoError(t, err)

	withStr := sample(KindEntry, 0, 0)
	setStr(&withStr, 0, 1, "", -14, StrUser)
	withStack := sample(KindEntry, 0, 1)
	withStack.Flags |= FlagStack
	withStack.StackLen = 8
	raw := sample(KindExit, 2, 0)
	lines := map[string]bpfobj.TraceEvent{"entry": sample(KindEntry, 0, 0), "exit": sample(KindExit, 0, 0),
		"strings": withStr, "stack": withStack, "no prototype": raw}
	for name, e := range lines {
		line := (&JSON{Table: table}).Append(nil, &e)
		v, err := sjs.UnmarshalJSON(bytes.NewReader(line))
		require.NoError(t, err, name)
		assert.NoError(t, sch.Validate(v), "%s: %s", name, line)
		d := json.NewDecoder(bytes.NewReader(line))
		d.DisallowUnknownFields()
		var l Line
		assert.NoError(t, d.Decode(&l), "%s: %s", name, line)
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal((&JSON{Table: table}).Append(nil, &raw), &m))
	m["args"] = []any{1, 2}
	assert.Error(t, sch.Validate(m), "args is an object")
}
