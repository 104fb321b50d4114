// Package schematest holds what the JSON Schema tests of ftprobe's
// documents (the compare report, trace events, the trace summary) share:
// reflecting a Go type with its field comments into a schema, checking the
// committed schema is current, and compiling it to validate documents.
// Only tests import it.
package schematest

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Doc describes one schema: the Go value it reflects, the packages whose
// field comments become descriptions (import path to directory), and the
// schema's id, title and description.
type Doc struct {
	Value       any
	Comments    map[string]string
	ID, Title   string
	Description string
}

// Generate returns d's schema as indented JSON with a final newline.
func Generate(t testing.TB, d Doc) []byte {
	r := &jsonschema.Reflector{}
	for pkg, dir := range d.Comments {
		require.NoError(t, r.AddGoComments(pkg, dir))
	}
	s := r.Reflect(d.Value)
	s.ID, s.Title, s.Description = jsonschema.ID(d.ID), d.Title, d.Description
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// Current fails t when committed (the schema embedded from file) differs
// from d's generated schema; with update it rewrites file instead and
// skips, naming the test to run.
func Current(t *testing.T, d Doc, committed []byte, file string, update bool, rerun string) {
	b := Generate(t, d)
	if update {
		require.NoError(t, os.WriteFile(file, b, 0o644))
		t.Skip(file + " rewritten; rebuild to embed it")
	}
	assert.Equal(t, string(b), string(committed), file+" is stale: "+rerun)
}

// Compile compiles schema, named name, for validating documents.
func Compile(t testing.TB, schema []byte, name string) *sjs.Schema {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(schema))
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource(name, doc))
	sch, err := c.Compile(name)
	require.NoError(t, err)
	return sch
}

// Decode parses one JSON document for validation.
func Decode(t testing.TB, b []byte) any {
	v, err := sjs.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return v
}
