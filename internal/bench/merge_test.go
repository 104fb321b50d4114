package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/schematest"
)

const (
	arm64Report = "testdata/compare-arm64-7.3.json"
	amd64Report = "testdata/compare-amd64-7.3.json"
)

// readCommitted loads one of two lab reports kept as fixtures (arm64 and
// amd64 7.3 under icount), whose figures the merge tests check.
func readCommitted(t *testing.T, path string) *Report {
	r, err := ReadReportFile(path)
	require.NoError(t, err)
	return r
}

// row returns the merged row of trigger, body and mode.
func (m *Merged) row(t *testing.T, trig, body, mode string) *MergeRow {
	for i := range m.Hit {
		if r := &m.Hit[i]; r.Trigger == trig && r.Body == body && r.Mode == mode {
			return r
		}
	}
	t.Fatalf("no row %s %s %s", trig, body, mode)
	return nil
}

// TestMergeCommittedReports merges the arm64 and amd64 lab reports (one
// clock, two arches) and checks the columns, cells and ranges against
// the reports' own figures.
func TestMergeCommittedReports(t *testing.T) {
	m, err := Merge([]string{arm64Report, amd64Report}, []*Report{readCommitted(t, arm64Report), readCommitted(t, amd64Report)})
	require.NoError(t, err)
	require.Len(t, m.Inputs, 2)
	assert.Equal(t, "7.3.4+deb13-arm64 arm64 icount", m.Inputs[0].Label)
	assert.Equal(t, "7.3.4+deb13-amd64 amd64 icount", m.Inputs[1].Label)
	assert.Equal(t, "runs 3, kernel trigger 20000 calls/run on bpf_get_numa_node_id, reader after", m.Inputs[1].Settings)

	ff := m.row(t, TriggerKernel, BodyEmpty, ModeFentryFexit)
	require.Len(t, ff.Cells, 2)
	assert.Equal(t, Range{523.8656000000001, 491.08799999999997, 530.9504}, ff.Cells[0].OverheadNs)
	assert.Equal(t, Range{349.7529, 349.62645, 357.01435000000004}, ff.Cells[1].OverheadNs)
	assert.Nil(t, ff.Cells[0].RatioEmpty, "the empty body has no x empty")

	fsm := m.row(t, TriggerKernel, BodyEmpty, ModeFSessionMulti)
	assert.False(t, fsm.Cells[0].Supported)
	assert.Contains(t, fsm.Cells[0].Reason, "this kernel refuses tracing multi links (ENOTSUP)")
	assert.True(t, fsm.Cells[1].Supported)
	assert.InDelta(t, 360.80155, fsm.Cells[1].OverheadNs.Value, 1e-9)

	// arm64 trace fentry+fexit: x empty 2.616, its range from the trace
	// row's [1360.99..1408.62] over the empty row's [491.09..530.95].
	tr := m.row(t, TriggerKernel, BodyTrace, ModeFentryFexit).Cells[0]
	require.NotNil(t, tr.RatioEmpty)
	assert.InDelta(t, 2.616329073716617, tr.RatioEmpty.Value, 1e-12)
	assert.InDelta(t, 1360.9856/530.9504, tr.RatioEmpty.Min, 1e-12)
	assert.InDelta(t, 1408.6208000000001/491.08799999999997, tr.RatioEmpty.Max, 1e-12)
	assert.InDelta(t, 1.774181388894642, tr.RatioTimed.Value, 1e-12)
	assert.Empty(t, m.Attach)
	assert.Equal(t, ModeFentryFexit, m.Hit[0].Mode, "registry order: empty body, fentry+fexit first")

	var b strings.Builder
	m.WriteText(&b)
	out := b.String()
	assert.Contains(t, out, "columns grouped by clock: icount (2)")
	assert.Regexp(t, `kernel\s+empty\s+fentry\+fexit\s+524 ±6%\s+350 ±2%\n`, out)
	assert.Regexp(t, `kernel\s+trace\s+fentry\+fexit\s+1371 ±3% x2\.62\s+1117 ±0% x3\.19\n`, out)
	assert.Regexp(t, `kernel\s+empty\s+fsession\.multi\s+- \[1\]\s+361 ±1%\n`, out)
	assert.Contains(t, out, "  [1] 7.3.4+deb13-arm64 arm64 icount: this kernel refuses tracing multi links")

	var md strings.Builder
	require.NoError(t, m.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| kernel | empty | fentry+fexit | 524 ±6% | 350 ±2% |\n")

	var js bytes.Buffer
	require.NoError(t, m.WriteJSON(&js))
	sch := schematest.Compile(t, MergeSchema, "merge_schema.json")
	assert.NoError(t, sch.Validate(schematest.Decode(t, js.Bytes())))
	require.NoError(t, m.Plot(filepath.Join(t.TempDir(), "m.svg")))
}

// TestMergeClockGroups: columns of another clock come after the icount
// ones whatever the order given, get their own label, and the table
// separates the groups.
func TestMergeClockGroups(t *testing.T) {
	hw := readCommitted(t, arm64Report)
	hw.Header.Emulated, hw.Header.Warning, hw.Header.CPU = "", "", "Neoverse-N1"
	tcg := readCommitted(t, amd64Report)
	tcg.Header.Emulated, tcg.Header.Warning = "QEMU TCG", "measured under QEMU TCG: absolute numbers do not transfer"
	m, err := Merge([]string{"hw.json", "tcg.json", arm64Report}, []*Report{hw, tcg, readCommitted(t, arm64Report)})
	require.NoError(t, err)
	var labels []string
	for _, in := range m.Inputs {
		labels = append(labels, in.Label)
	}
	assert.Equal(t, []string{"7.3.4+deb13-arm64 arm64 icount", "7.3.4+deb13-amd64 amd64 tcg", "7.3.4+deb13-arm64 arm64 hw"}, labels)
	assert.Equal(t, "icount (1), tcg (1), hw (1)", m.clockGroups())
	var b strings.Builder
	m.WriteText(&b)
	assert.Regexp(t, `kernel\s+empty\s+fentry\+fexit\s+524 ±6%\s+\|\s+350 ±2%\s+\|\s+524 ±6%\n`, b.String())
	require.NoError(t, m.Plot(filepath.Join(t.TempDir(), "m.png")))

	// Two columns of one kernel and clock on two cpus: the cpu tells them apart.
	m, err = Merge([]string{"a.json", "b.json"}, []*Report{hw, func() *Report {
		r := readCommitted(t, arm64Report)
		r.Header.Emulated, r.Header.Warning, r.Header.CPU = "", "", "Cortex-A72"
		return r
	}()})
	require.NoError(t, err)
	assert.Equal(t, "7.3.4+deb13-arm64 arm64 hw (Neoverse-N1)", m.Inputs[0].Label)
	assert.Equal(t, "7.3.4+deb13-arm64 arm64 hw (Cortex-A72)", m.Inputs[1].Label)
}

// plant returns a copy of r with the row of trigger, body and mode
// costing factor times as much in every run, its ratios recomputed.
func plant(t *testing.T, r *Report, trig, body, mode string, factor float64) *Report {
	var c Report
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &c))
	h := c.hitRow(trig, body, mode)
	require.NotNil(t, h)
	s := make([]float64, len(h.OverheadNs.Samples))
	for i, v := range h.OverheadNs.Samples {
		s[i] = v * factor
	}
	h.OverheadNs = NewStat(s)
	for i := range c.Hit {
		c.Hit[i].RatioEmpty, c.Hit[i].RatioTimed = 0, 0
	}
	c.setRatios()
	return &c
}

// verdictOf merges news and compares them with the arm64 lab report.
func verdictOf(t *testing.T, threshold float64, news ...*Report) *Verdict {
	files := make([]string, len(news))
	for i := range news {
		files[i] = fmt.Sprintf("new%d.json", i)
	}
	m, err := Merge(files, news)
	require.NoError(t, err)
	base, err := ReadBaseline(arm64Report)
	require.NoError(t, err)
	return m.CompareBaseline(base, arm64Report, threshold)
}

// TestVerdict plants a regression in a copy of the arm64 report and
// checks the verdict names it, measure by measure; the report against
// itself, and a rise within the threshold, pass.
func TestVerdict(t *testing.T) {
	old := readCommitted(t, arm64Report)
	v := verdictOf(t, DefaultThreshold, old)
	assert.Empty(t, v.Changes, "a report against itself")
	assert.Equal(t, []Pairing{{Kernel: "7.3.4+deb13-arm64 arm64 icount", Baseline: "7.3.4+deb13-arm64 arm64 icount"}}, v.Pairings)

	// kprobe.session's trace body up 25%: ns over baseline, x empty and
	// x timed all rise past their ranges.
	bad := plant(t, old, TriggerKernel, BodyTrace, ModeKprobeSession, 1.25)
	v = verdictOf(t, DefaultThreshold, bad)
	require.Equal(t, 3, v.Regressions(), "%+v", v.Changes)
	var measures []string
	for _, c := range v.Changes {
		assert.Equal(t, [4]string{"7.3.4+deb13-arm64 arm64 icount", TriggerKernel, BodyTrace, ModeKprobeSession}, [4]string{c.Kernel, c.Trigger, c.Body, c.Mode})
		assert.InDelta(t, 25, c.Percent, 1e-9)
		measures = append(measures, c.Measure)
	}
	assert.Equal(t, []string{MeasureNs, MeasureRatioEmpty, MeasureRatioTimed}, measures)
	assert.InDelta(t, 1997.4464, v.Changes[0].Old.Value, 1e-9)
	assert.InDelta(t, 1997.4464*1.25, v.Changes[0].New.Value, 1e-9)
	var b strings.Builder
	v.WriteText(&b)
	assert.Contains(t, b.String(), "REGRESSION: 7.3.4+deb13-arm64 arm64 icount, kernel trigger, trace body, kprobe.session: ns over baseline 1997 [1990..2040] -> 2497 [2487..2550] (+25%)\n")
	assert.Contains(t, b.String(), "verdict: 3 regression(s), 0 improvement(s)")

	// The empty body of kprobe.session up 5%: past its narrow range, not
	// past the threshold; with a threshold of 3 it is a regression (and
	// every kprobe.session x empty falls: improvements, never failures).
	small := plant(t, old, TriggerKernel, BodyEmpty, ModeKprobeSession, 1.05)
	assert.Zero(t, verdictOf(t, DefaultThreshold, small).Regressions())
	v = verdictOf(t, 3, small)
	assert.Equal(t, 1, v.Regressions())
	assert.Greater(t, len(v.Changes), 1)
	for _, c := range v.Changes {
		assert.Equal(t, c.Measure == MeasureNs, c.Regression, "%+v", c)
	}
}

// TestVerdictRatiosOnly: a kernel measured on another cpu or clock than
// its baseline is compared by x empty and x timed only, and says so.
func TestVerdictRatiosOnly(t *testing.T) {
	old := readCommitted(t, arm64Report)
	for _, change := range []func(*Header){
		func(h *Header) { h.CPU = "Neoverse-N1" },
		func(h *Header) { h.Emulated, h.Warning = "", "" },
	} {
		moved := plant(t, old, TriggerKernel, BodyTrace, ModeKprobeSession, 1.25)
		change(&moved.Header)
		v := verdictOf(t, DefaultThreshold, moved)
		require.Len(t, v.Pairings, 1)
		assert.True(t, v.Pairings[0].RatiosOnly)
		assert.Contains(t, v.Pairings[0].Note, "another machine")
		assert.Contains(t, v.Pairings[0].Note, "ratios only")
		assert.Equal(t, 2, v.Regressions())
		for _, c := range v.Changes {
			assert.NotEqual(t, MeasureNs, c.Measure)
		}
		// The same report on the other machine: nothing moved.
		same := plant(t, old, TriggerKernel, BodyTrace, ModeKprobeSession, 1)
		change(&same.Header)
		assert.Empty(t, verdictOf(t, DefaultThreshold, same).Changes)
	}
	// Another arch has no baseline column: noted, not compared.
	v := verdictOf(t, DefaultThreshold, readCommitted(t, amd64Report))
	assert.Equal(t, "no baseline column of arch amd64", v.Pairings[0].Note)
	assert.Empty(t, v.Changes)
}

// TestMergeBadInput: a file that is not a compare report of this
// version, one cut short, and two reports of one kernel and machine with
// different settings are errors naming the files.
func TestMergeBadInput(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(arm64Report)
	require.NoError(t, err)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for _, c := range []struct{ name, body, msg string }{
		{"text.json", "no json here\n", "text.json: no JSON document"},
		{"trace.json", `{"schema":"ftprobe-summary/v1"}`, `trace.json: schema "ftprobe-summary/v1", want "ftprobe-compare/v1"`},
		{"v2.json", strings.Replace(string(good), SchemaID, "ftprobe-compare/v2", 1), `v2.json: schema "ftprobe-compare/v2", want "ftprobe-compare/v1"`},
		{"cut.json", string(good[:len(good)/2]), "cut.json: unexpected EOF"},
	} {
		_, err := ReadReportFile(write(c.name, c.body))
		assert.ErrorContains(t, err, c.msg)
		_, err = ReadBaseline(filepath.Join(dir, c.name))
		assert.ErrorContains(t, err, c.msg)
	}
	_, err = ReadBaseline(write("m2.json", `{"schema":"ftprobe-compare-merge/v2","inputs":[]}`))
	assert.ErrorContains(t, err, `m2.json: schema "ftprobe-compare-merge/v2", want "ftprobe-compare-merge/v1" or "ftprobe-compare/v1"`)

	other := readCommitted(t, arm64Report)
	other.Header.Runs = 5
	_, err = Merge([]string{"a.json", "b.json"}, []*Report{readCommitted(t, arm64Report), other})
	assert.EqualError(t, err, "merge: a.json and b.json measure kernel 7.3.4+deb13-arm64 arm64 on one machine with different settings "+
		"(runs 3, kernel trigger 5000 calls/run on bpf_get_numa_node_id, reader after; runs 5, kernel trigger 5000 calls/run on bpf_get_numa_node_id, reader after)")
	// The same settings twice: two columns, told apart by file name.
	m, err := Merge([]string{"x/a.json", "y/b.json"}, []*Report{readCommitted(t, arm64Report), readCommitted(t, arm64Report)})
	require.NoError(t, err)
	assert.Equal(t, "7.3.4+deb13-arm64 arm64 icount (CPU implementer 0x00 part 0x051) b.json", m.Inputs[1].Label)
}

// BenchmarkMerge merges 50 synthetic reports of every hit mode and body
// and renders the tables.
func BenchmarkMerge(b *testing.B) {
	modes := HitModeNames()
	bodies := Names(Bodies, false)
	reports := make([]*Report, 50)
	files := make([]string, 50)
	for i := range reports {
		r := &Report{Schema: SchemaID, Header: Header{Release: fmt.Sprintf("7.%d.0", i), Arch: "arm64", CPU: "cpu", Emulated: "QEMU TCG icount", Runs: 5}}
		for _, body := range bodies {
			r.Hit = append(r.Hit, HitRow{Trigger: TriggerKernel, Body: body, Mode: ModeBaseline, Supported: true, Calls: 5000})
			for j, mode := range modes {
				base := float64(300 + 100*j + 10*i)
				r.Hit = append(r.Hit, HitRow{Trigger: TriggerKernel, Body: body, Mode: mode, Supported: j%7 != 3, Calls: 5000,
					OverheadNs: NewStat([]float64{base, base * 1.01, base * 0.99, base * 1.02, base})})
			}
		}
		r.setRatios()
		reports[i], files[i] = r, fmt.Sprintf("r%d.json", i)
	}
	b.ResetTimer()
	for b.Loop() {
		m, err := Merge(files, reports)
		if err != nil {
			b.Fatal(err)
		}
		m.CompareBaseline(m, "base.json", DefaultThreshold)
		m.WriteText(io.Discard)
	}
}
