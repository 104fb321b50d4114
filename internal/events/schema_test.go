package events

import (
	"bytes"
	"encoding/json"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/schematest"
)

var update = flag.Bool("update", false, "rewrite event.schema.json from the Line type")

// eventDoc is event.schema.json's source: the Line type and its comments.
var eventDoc = schematest.Doc{
	Value:       &Line{},
	Comments:    map[string]string{"github.com/ftprobe/ftprobe/internal/events": "."},
	ID:          "https://github.com/ftprobe/ftprobe/internal/events/event.schema.json",
	Title:       "ftprobe trace event",
	Description: "An entry or exit line of `ftprobe trace --output json`: one JSON object per line, before the summary line. Arguments, return values and --arg values are typed from BTF by one rule (see args). Units are in the field names: ns.",
}

// TestEventSchemaCurrent fails when event.schema.json no longer matches
// the Line type (run with -update to rewrite it).
func TestEventSchemaCurrent(t *testing.T) {
	schematest.Current(t, eventDoc, EventSchema, "event.schema.json", *update, "go test ./internal/events -run TestEventSchemaCurrent -update")
}

// TestEventLinesMatchSchema: the lines JSON writes (entry and exit, with
// strings, --arg values, a stack, without a prototype) validate against
// EventSchema and decode into Line without a field Line lacks.
func TestEventLinesMatchSchema(t *testing.T) {
	sch := schematest.Compile(t, EventSchema, "event.schema.json")

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
		assert.NoError(t, sch.Validate(schematest.Decode(t, line)), "%s: %s", name, line)
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
