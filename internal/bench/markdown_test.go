package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteMarkdown renders a two-mode, three-body report and checks the
// cells against the rows' own figures, the refused mode's footnote and
// the x timed brackets.
func TestWriteMarkdown(t *testing.T) {
	row := func(body, mode string, over, empty, timed float64) HitRow {
		return HitRow{Trigger: TriggerKernel, Body: body, Mode: mode, Supported: true,
			OverheadNs: Stat{Median: over}, RatioEmpty: empty, RatioTimed: timed}
	}
	r := &Report{Header: Header{Release: "7.3.4", Arch: "arm64", Runs: 3}, Hit: []HitRow{
		{Trigger: TriggerKernel, Body: BodyEmpty, Mode: ModeBaseline, Supported: true},
		row(BodyEmpty, ModeFentryFexit, 497, 0, 0),
		{Trigger: TriggerKernel, Body: BodyEmpty, Mode: ModeFSessionMulti, Reason: "no multi links"},
		row(BodyTimed, ModeFentryFexit, 773, 1.56, 0),
		{Trigger: TriggerKernel, Body: BodyTimed, Mode: ModeFSessionMulti, Reason: "no multi links"},
		row(BodyTrace, ModeFentryFexit, 1368, 2.75, 1.77),
		{Trigger: TriggerKernel, Body: BodyTrace, Mode: ModeFSessionMulti, Reason: "no multi links"},
	}}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b))
	out := b.String()
	assert.Contains(t, out, "kernel trigger, 7.3.4 arm64, 3 runs")
	assert.Contains(t, out, "| mode | empty | timed | trace |\n|---|---:|---:|---:|\n")
	assert.Contains(t, out, "| fentry+fexit | 497 | 773 | 1368 |\n")
	assert.Contains(t, out, "| fsession.multi | - [1] | - [1] | - [1] |\n")
	assert.Contains(t, out, "| fentry+fexit | 1.56 | 2.75 (1.77) |\n")
	assert.Contains(t, out, "[1] no multi links\n")
	assert.NotContains(t, out, "| baseline")
}
