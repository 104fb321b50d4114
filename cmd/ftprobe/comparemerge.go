package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/exitcode"
)

// isSchemaKind reports whether s names a document `compare --schema`
// describes: report (one run) or merge (several).
func isSchemaKind(s string) bool { return s == "report" || s == "merge" }

// printSchema writes the JSON Schema of kind (isSchemaKind) to w.
func printSchema(w io.Writer, kind string) error {
	s := bench.Schema
	switch kind {
	case "report":
	case "merge":
		s = bench.MergeSchema
	default:
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--schema %q: want report or merge", kind))
	}
	_, err := w.Write(s)
	return err
}

// mergeArgs are compare's flags across kernels: the reports, the
// baseline ("" for none) and the regression threshold in percent.
type mergeArgs struct {
	from      []string
	baseline  string
	threshold float64
}

// runMerge puts the --from reports side by side, compares them with the
// baseline when there is one, and writes the tables and files. Every
// input is read and checked before anything is written: bad input exits
// 2 with nothing written; a regression exits 1 after the output.
func runMerge(cmd *cobra.Command, a mergeArgs, out reportFiles) error {
	if len(a.from) == 0 {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--baseline %s: needs the reports to compare (--from)", a.baseline))
	}
	if a.threshold < 0 {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--threshold %g: want 0 or more", a.threshold))
	}
	reps := make([]*bench.Report, len(a.from))
	for i, f := range a.from {
		r, err := bench.ReadReportFile(f)
		if err != nil {
			return exitcode.Wrap(exitcode.BadInput, err)
		}
		reps[i] = r
	}
	m, err := bench.Merge(a.from, reps)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	var v *bench.Verdict
	if a.baseline != "" {
		base, err := bench.ReadBaseline(a.baseline)
		if err != nil {
			return exitcode.Wrap(exitcode.BadInput, err)
		}
		v = m.CompareBaseline(base, a.baseline, a.threshold)
	}
	if err := emitReport(cmd, m, out); err != nil {
		return err
	}
	if v != nil {
		if n := v.Regressions(); n > 0 {
			return exitcode.Wrap(exitcode.Failure, fmt.Errorf("compare: %d regression(s) against %s", n, a.baseline))
		}
	}
	return nil
}
