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

// MergeSchema is the JSON Schema of a merged document, the format of
// `compare --from A --from B --json` (MergeSchemaID), generated from the
// Merged types the same way (TestSchemaCurrent rewrites
// merge_schema.json); `ftprobe compare --schema=merge` prints it.
//
//go:embed merge_schema.json
var MergeSchema []byte
