package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetVsK0 checks the crowd rows' ratio: each row's ns over baseline
// (median) over the K=0 row of the same mode and sharing, never
// across modes or sharing, and none for unsupported rows.
func TestSetVsK0(t *testing.T) {
	x := func(v float64) Stat { return NewStat([]float64{v}) }
	rows := []CrowdRow{
		{Mode: ModeFentry, K: 0, Supported: true, OverheadNs: x(2)},
		{Mode: ModeKprobeMulti, K: 0, Supported: true, OverheadNs: x(4)},
		{Mode: ModeFentry, K: 0, Shared: true, Supported: true, OverheadNs: x(5)},
		{Mode: ModeFentry, By: CrowdByFentry, K: 100, Supported: true, OverheadNs: x(3)},
		{Mode: ModeKprobeMulti, By: CrowdByFentry, K: 100, Supported: true, OverheadNs: x(2)},
		{Mode: ModeFentry, By: CrowdByFentry, K: 100, Shared: true, Supported: true, OverheadNs: x(10)},
		{Mode: ModeKprobeMulti, By: CrowdByKprobeMulti, K: 100, Shared: true, Supported: true, OverheadNs: x(9)}, // its K=0 row is missing
		{Mode: ModeFentry, By: CrowdByKprobeMulti, K: 10, Supported: false, OverheadNs: x(7)},
	}
	setVsK0(rows)
	assert.InDelta(t, 1.0, rows[0].VsK0, 1e-9)
	assert.InDelta(t, 1.0, rows[1].VsK0, 1e-9)
	assert.InDelta(t, 1.5, rows[3].VsK0, 1e-9)
	assert.InDelta(t, 0.5, rows[4].VsK0, 1e-9)
	assert.InDelta(t, 2.0, rows[5].VsK0, 1e-9)
	assert.Zero(t, rows[6].VsK0, "no K=0 reference for kprobe.multi shared")
	assert.Zero(t, rows[7].VsK0, "unsupported")
}

// TestCrowdReport renders crowd rows as text and through a JSON round trip:
// the target, the crowd kind, the sharer on the target, the ratios, the
// sharer's misses and the unsupported rows' shared numbered reason.
func TestCrowdReport(t *testing.T) {
	r := &Report{Schema: SchemaID, Crowd: []CrowdRow{
		{Mode: ModeFentry, K: 0, Supported: true, NsPerHit: NewStat([]float64{300, 310, 320}), OverheadNs: NewStat([]float64{200}), VsK0: 1},
		{Mode: ModeFentry, By: CrowdByFentry, K: 100, Shared: true, Supported: true, NsPerHit: NewStat([]float64{900}), OverheadNs: NewStat([]float64{800}), VsK0: 3, SharerMisses: 7},
		{Mode: ModeKprobeMulti, By: CrowdByKprobeMulti, K: 10, Reason: "crowd: CONFIG_FPROBE not set"},
		{Mode: ModeFentry, By: CrowdByKprobeMulti, K: 10, Reason: "crowd: CONFIG_FPROBE not set"},
	}}
	r.Crowd[0].Target = "bpf_get_numa_node_id"
	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf))
	p := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	back, err := ReadReport(p)
	require.NoError(t, err)
	require.Equal(t, r.Crowd, back.Crowd)
	var out bytes.Buffer
	back.WriteText(&out)
	s := out.String()
	assert.Regexp(t, `fentry\s+-\s+0\s+alone\s+310\.0\s+\[300\.0\.\.320\.0\]\s+200\.0\s+1\.00x\s+0`, s)
	assert.Regexp(t, `fentry\s+fentry\s+100\s+\+kprobe\.multi\s+900\.0 .* 800\.0\s+3\.00x\s+0 \(sharer 7\)`, s)
	assert.Regexp(t, `kprobe\.multi\s+kprobe\.multi\s+10\s+alone\s+unsupported \[1\]`, s)
	assert.Regexp(t, `fentry\s+kprobe\.multi\s+10\s+alone\s+unsupported \[1\]`, s, "one footnote per distinct reason")
	assert.Contains(t, s, "  [1] crowd: CONFIG_FPROBE not set\n")
	assert.NotContains(t, s, "[2]")
	assert.Contains(t, s, "hit cost on bpf_get_numa_node_id (kernel trigger")
}

// TestTimedRatio checks the hit rows' ratios to the empty and timed
// bodies: each of the same mode and trigger only, x timed only for the
// bodies that measure a duration, and the text report's x timed column
// only when the run has the timed body.
func TestTimedRatio(t *testing.T) {
	x := func(v float64) Stat { return NewStat([]float64{v}) }
	row := func(trig, body, mode string, over float64) HitRow {
		return HitRow{Trigger: trig, Body: body, Mode: mode, Supported: true, NsPerHit: x(over + 20), OverheadNs: x(over)}
	}
	r := &Report{Schema: SchemaID, Hit: []HitRow{
		row(TriggerKernel, BodyEmpty, ModeFSession, 500),
		row(TriggerKernel, BodyEmpty, ModeFentryFexit, 490),
		row(TriggerKernel, BodyTimed, ModeFSession, 730),
		row(TriggerKernel, BodyAgg, ModeFSession, 803),
		row(TriggerKernel, BodyTrace, ModeFSession, 1460),
		row(TriggerKernel, BodyFiltered, ModeFSession, 480),
		row(TriggerKernel, BodyAgg, ModeFentryFexit, 1000), // no timed row of its mode
		row(TriggerSyscall, BodyAgg, ModeFSession, 900),    // no timed row of its trigger
	}}
	r.setRatios()
	h := r.Hit
	assert.InDelta(t, 730.0/500, h[2].RatioEmpty, 1e-9)
	assert.Zero(t, h[2].RatioTimed, "the timed row itself")
	assert.InDelta(t, 1.1, h[3].RatioTimed, 1e-9)
	assert.InDelta(t, 2.0, h[4].RatioTimed, 1e-9)
	assert.Zero(t, h[5].RatioTimed, "filtered measures no duration")
	assert.InDelta(t, 0.96, h[5].RatioEmpty, 1e-9)
	assert.Zero(t, h[6].RatioTimed, "no timed row of fentry+fexit")
	assert.InDelta(t, 1000.0/490, h[6].RatioEmpty, 1e-9)
	assert.Zero(t, h[7].RatioTimed, "no timed row of the syscall trigger")
	var out bytes.Buffer
	r.WriteText(&out)
	s := out.String()
	assert.Contains(t, s, "x empty  x timed  misses")
	assert.Regexp(t, `kernel\s+agg\s+fsession\s+[0-9.]+\s+823\.0\s+\[823\.0\.\.823\.0\]\s+803\.0\s+1\.61\s+1\.10\s+0`, s)
	assert.Regexp(t, `kernel\s+trace\s+fsession\s+[0-9.]+\s+1480\.0\s+\S+\s+1460\.0\s+2\.92\s+2\.00\s+0`, s)

	r.Hit = []HitRow{row(TriggerKernel, BodyEmpty, ModeFSession, 500), row(TriggerKernel, BodyAgg, ModeFSession, 803)}
	r.setRatios()
	out.Reset()
	r.WriteText(&out)
	assert.NotContains(t, out.String(), "x timed", "no timed body, no column")
}
