package trace

import _ "embed"

// SummarySchema is the JSON Schema (draft 2020-12) of the summary record
// that ends a `trace --output json` stream (Summary.JSON). It is generated
// from the Summary and attach.Losses types and their field comments by
// TestSummarySchemaCurrent (go test ./internal/trace -run
// TestSummarySchemaCurrent -update rewrites summary.schema.json) with
// github.com/invopop/jsonschema.
//
//go:embed summary.schema.json
var SummarySchema []byte
