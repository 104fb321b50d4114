package bench

import _ "embed"

// Schema is the JSON Schema (draft 2020-12) of a compare document, the
// format of `compare --json` (SchemaID). It is generated from the Report
// types and their field comments by TestSchemaCurrent (go test
// ./internal/bench -run TestSchemaCurrent -update rewrites schema.json)
// with github.com/invopop/jsonschema, and `ftprobe compare --schema`
// prints it.
//
//go:embed schema.json
var Schema []byte
