package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MergeSchemaID names the merged document's format: many compare reports,
// one column per kernel (`compare --from A --from B --json FILE`).
const MergeSchemaID = "ftprobe-compare-merge/v1"

// The clocks a report can be measured on. Reports of different clocks
// are never on one axis: under icount a ns is one executed instruction,
// under plain TCG it is emulated wall time, on hardware (KVM included) it
// is wall time.
const (
	ClockIcount   = "icount"
	ClockTCG      = "tcg"
	ClockHardware = "hw"
)

// ClockOf returns the clock of a report's header: icount for QEMU TCG
// with instruction counting, tcg for QEMU TCG otherwise, hw when the
// kernel ran on a real CPU (no emulation, or KVM).
func ClockOf(h Header) string {
	switch {
	case strings.Contains(h.Emulated, "icount") || strings.Contains(h.Warning, "instruction counting"):
		return ClockIcount
	case strings.Contains(h.Emulated, "TCG"):
		return ClockTCG
	}
	return ClockHardware
}

// clockRank orders the clock groups of a merged table.
func clockRank(c string) int {
	switch c {
	case ClockIcount:
		return 0
	case ClockTCG:
		return 1
	}
	return 2
}

// MergeInput is one merged report: its file and what measured it. Its
// index in Merged.Inputs is its column.
type MergeInput struct {
	File     string `json:"file"`                      // the report's file, as given
	Label    string `json:"label"`                     // column label: release, arch and clock, with the cpu model (then the file name) where two columns would otherwise share one
	Release  string `json:"kernel_release"`            // uname -r
	Arch     string `json:"arch"`                      // kernel architecture
	Clock    string `json:"clock"`                     // icount (QEMU TCG, instruction counting), tcg (QEMU TCG) or hw (a real CPU, KVM included)
	CPU      string `json:"cpu_model"`                 // from /proc/cpuinfo
	Version  string `json:"ftprobe_version,omitempty"` // ftprobe version that measured
	Runs     int    `json:"runs"`                      // measured runs per row
	Settings string `json:"settings"`                  // the measuring settings the report records: runs, calls per run of each trigger, reader, target
}

// Range is a value with the range it moves in over runs: a median with
// its min and max, or a ratio with the range the runs' min and max give.
type Range struct {
	Value float64 `json:"value"` // the median (ns) or the ratio of the medians
	Min   float64 `json:"min"`   // lower end over runs
	Max   float64 `json:"max"`   // upper end over runs
}

// MergeCell is one kernel's figures for one row.
type MergeCell struct {
	Input      int    `json:"input"`                    // index in inputs: the kernel's column
	Supported  bool   `json:"supported"`                // false: that kernel refused the mode; reason says why
	Reason     string `json:"reason,omitempty"`         // why the mode is unsupported
	OverheadNs Range  `json:"ns_over_baseline"`         // ns per call over the baseline: median, min and max over runs
	RatioEmpty *Range `json:"ratio_to_empty,omitempty"` // the report's ratio_to_empty, with the range its rows' min and max give
	RatioTimed *Range `json:"ratio_to_timed,omitempty"` // the report's ratio_to_timed, with the range its rows' min and max give
}

// MergeRow is one hit-cost row (trigger, body, mode) across kernels.
type MergeRow struct {
	Trigger string      `json:"trigger"` // kernel or syscall
	Body    string      `json:"body"`    // the program body
	Mode    string      `json:"mode"`    // the hit mode
	Cells   []MergeCell `json:"cells"`   // one per kernel that has the row, in column order
}

// MergeAttachCell is one kernel's attach time for one attach row.
type MergeAttachCell struct {
	Input     int    `json:"input"`            // index in inputs
	Supported bool   `json:"supported"`        // false: that kernel refused the mode
	Reason    string `json:"reason,omitempty"` // why the mode is unsupported
	AttachMs  Range  `json:"attach_ms"`        // link creation, ms: median, min and max over runs
}

// MergeAttachRow is one attach row (mode, N) across kernels.
type MergeAttachRow struct {
	Mode  string            `json:"mode"`  // the attach mode
	N     int               `json:"n"`     // functions attached
	Cells []MergeAttachCell `json:"cells"` // one per kernel that has the row, in column order
}

// Merged is many compare reports side by side (MergeSchemaID): the
// inputs, grouped by clock, then the rows of each scenario with one cell
// per kernel, and the verdict against a baseline when one was given.
type Merged struct {
	Schema  string           `json:"schema"`                // MergeSchemaID, "ftprobe-compare-merge/v1"
	Inputs  []MergeInput     `json:"inputs"`                // the merged reports, in column order (grouped by clock)
	Hit     []MergeRow       `json:"hit_cost,omitempty"`    // hit scenario rows, the baseline rows aside
	Attach  []MergeAttachRow `json:"attach_cost,omitempty"` // attach scenario rows; absent when no report has them
	Verdict *Verdict         `json:"verdict,omitempty"`     // the comparison with --baseline; absent without one
}

// ReadReportFile loads one compare report (ReadReport) and checks it is
// of this version of the format: another schema id or version, a
// document that is not JSON or is cut short are errors naming the file.
func ReadReportFile(path string) (*Report, error) {
	r, err := ReadReport(path)
	if err != nil {
		return nil, err
	}
	if r.Header.Release == "" || r.Header.Arch == "" {
		return nil, fmt.Errorf("read report %s: no kernel release or arch in its header", path)
	}
	return r, nil
}

// ReadBaseline loads a baseline: a compare report (one column) or a
// document Merge wrote (MergeSchemaID). Anything else, another version
// included, is an error naming the file.
func ReadBaseline(path string) (*Merged, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	var probe struct {
		Schema string `json:"schema"`
	}
	i := strings.Index(string(b), "{")
	if i < 0 {
		return nil, fmt.Errorf("read baseline %s: no JSON document", path)
	}
	if err := json.NewDecoder(strings.NewReader(string(b[i:]))).Decode(&probe); err != nil {
		return nil, fmt.Errorf("read baseline %s: %w", path, err)
	}
	if probe.Schema != MergeSchemaID {
		r, err := ReadReportFile(path)
		if err != nil {
			if strings.HasPrefix(probe.Schema, "ftprobe-compare-merge/") {
				return nil, fmt.Errorf("read baseline %s: schema %q, want %q or %q", path, probe.Schema, MergeSchemaID, SchemaID)
			}
			return nil, err
		}
		return Merge([]string{path}, []*Report{r})
	}
	var m Merged
	if err := json.NewDecoder(strings.NewReader(string(b[i:]))).Decode(&m); err != nil {
		return nil, fmt.Errorf("read baseline %s: %w", path, err)
	}
	if len(m.Inputs) == 0 {
		return nil, fmt.Errorf("read baseline %s: no inputs", path)
	}
	m.Verdict = nil
	return &m, nil
}

// settingsOf returns the measuring settings a report records: the runs,
// each trigger's calls per run and target, and the trace bodies' reader.
func settingsOf(r *Report) string {
	parts := []string{fmt.Sprintf("runs %d", r.Header.Runs)}
	var seen []string
	reader := ""
	for _, h := range r.Hit {
		if h.Reader != "" && reader == "" {
			reader = h.Reader
		}
		if slices.Contains(seen, h.Trigger) || h.Mode != ModeBaseline {
			continue
		}
		seen = append(seen, h.Trigger)
		parts = append(parts, fmt.Sprintf("%s trigger %d calls/run on %s", h.Trigger, h.Calls, h.Target))
	}
	if reader != "" {
		parts = append(parts, "reader "+reader)
	}
	return strings.Join(parts, ", ")
}

// Merge puts reports side by side, files[i] being reports[i]'s file: one
// column per report, grouped by clock. Two reports of one kernel and
// machine (release, arch, cpu and clock) with different settings are an
// error naming both files: their figures do not measure the same thing.
func Merge(files []string, reports []*Report) (*Merged, error) {
	if len(files) != len(reports) {
		return nil, fmt.Errorf("merge: %d files for %d reports", len(files), len(reports))
	}
	m := &Merged{Schema: MergeSchemaID}
	for i, r := range reports {
		h := r.Header
		in := MergeInput{File: files[i], Release: h.Release, Arch: h.Arch, Clock: ClockOf(h), CPU: h.CPU, Version: h.Version, Runs: h.Runs, Settings: settingsOf(r)}
		for _, o := range m.Inputs {
			if o.Release == in.Release && o.Arch == in.Arch && o.CPU == in.CPU && o.Clock == in.Clock && o.Settings != in.Settings {
				return nil, fmt.Errorf("merge: %s and %s measure kernel %s %s on one machine with different settings (%s; %s)",
					o.File, in.File, in.Release, in.Arch, o.Settings, in.Settings)
			}
		}
		m.Inputs = append(m.Inputs, in)
	}
	order := make([]int, len(reports))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(clockRank(m.Inputs[a].Clock), clockRank(m.Inputs[b].Clock))
	})
	inputs := make([]MergeInput, len(order))
	sorted := make([]*Report, len(order))
	for col, i := range order {
		inputs[col], sorted[col] = m.Inputs[i], reports[i]
	}
	m.Inputs = inputs
	setLabels(m.Inputs)
	m.Hit = mergeHit(sorted)
	m.Attach = mergeAttach(sorted)
	return m, nil
}

// setLabels labels each column by release, arch and clock, adding the
// cpu model, then the file name, then the column number where two labels
// would be the same.
func setLabels(ins []MergeInput) {
	label := func(i int, level int) string {
		in := ins[i]
		s := in.Release + " " + in.Arch + " " + in.Clock
		if level >= 1 {
			s += " (" + in.CPU + ")"
		}
		if level >= 2 {
			s += " " + filepath.Base(in.File)
		}
		if level >= 3 {
			s += fmt.Sprintf(" #%d", i+1)
		}
		return s
	}
	for i := range ins {
		for level := 0; ; level++ {
			s := label(i, level)
			clash := false
			for j := range ins {
				if j != i && (label(j, level) == s) {
					clash = true
				}
			}
			if !clash || level == 3 {
				ins[i].Label = s
				break
			}
		}
	}
}

// rowRank orders rows by the registries: trigger, then body, then mode;
// names they lack come last.
func rowRank(trig, body, mode string) [3]int {
	modes := append([]string{ModeBaseline}, HitModeNames()...)
	return [3]int{rankOf(Names(Triggers, false), trig), rankOf(Names(Bodies, false), body), rankOf(modes, mode)}
}

// mergeHit builds the hit rows of reports (in column order), baseline
// rows and rows of several threads (compare --threads) aside.
func mergeHit(reports []*Report) []MergeRow {
	var rows []MergeRow
	at := map[[3]string]int{}
	for col, r := range reports {
		empty, timed := ratioBases(r)
		for _, h := range r.Hit {
			if h.Mode == ModeBaseline || h.threads() > 1 {
				continue
			}
			key := [3]string{h.Trigger, h.Body, h.Mode}
			i, ok := at[key]
			if !ok {
				i = len(rows)
				at[key] = i
				rows = append(rows, MergeRow{Trigger: h.Trigger, Body: h.Body, Mode: h.Mode})
			}
			c := MergeCell{Input: col, Supported: h.Supported, Reason: h.Reason}
			if h.Supported {
				c.OverheadNs = Range{h.OverheadNs.Median, h.OverheadNs.Min, h.OverheadNs.Max}
				c.RatioEmpty = ratioRange(h.RatioEmpty, h.OverheadNs, empty[[2]string{h.Trigger, h.Mode}])
				c.RatioTimed = ratioRange(h.RatioTimed, h.OverheadNs, timed[[2]string{h.Trigger, h.Mode}])
			}
			rows[i].Cells = append(rows[i].Cells, c)
		}
	}
	slices.SortStableFunc(rows, func(a, b MergeRow) int {
		ra, rb := rowRank(a.Trigger, a.Body, a.Mode), rowRank(b.Trigger, b.Body, b.Mode)
		if c := slices.Compare(ra[:], rb[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Trigger+" "+a.Body+" "+a.Mode, b.Trigger+" "+b.Body+" "+b.Mode)
	})
	return rows
}

// ratioBases returns the ns over baseline of the empty and timed rows of
// r by trigger and mode: what ratio_to_empty and ratio_to_timed divide by.
func ratioBases(r *Report) (empty, timed map[[2]string]Stat) {
	empty, timed = map[[2]string]Stat{}, map[[2]string]Stat{}
	for _, h := range r.Hit {
		if !h.Supported || h.threads() > 1 {
			continue
		}
		switch h.Body {
		case BodyEmpty:
			empty[[2]string{h.Trigger, h.Mode}] = h.OverheadNs
		case BodyTimed:
			timed[[2]string{h.Trigger, h.Mode}] = h.OverheadNs
		}
	}
	return empty, timed
}

// ratioRange is a ratio with the range its two rows' runs give (the
// lowest numerator over the highest denominator, and the other way
// round); nil when the report has no such ratio, the ratio alone when a
// denominator's range reaches zero.
func ratioRange(ratio float64, num, den Stat) *Range {
	if ratio == 0 {
		return nil
	}
	if den.Min <= 0 || den.Max <= 0 {
		return &Range{ratio, ratio, ratio}
	}
	return &Range{ratio, min(ratio, num.Min/den.Max), max(ratio, num.Max/den.Min)}
}

// mergeAttach builds the attach rows of reports (in column order).
func mergeAttach(reports []*Report) []MergeAttachRow {
	var rows []MergeAttachRow
	at := map[string]int{}
	for col, r := range reports {
		for _, a := range r.Attach {
			key := fmt.Sprintf("%s %d", a.Mode, a.N)
			i, ok := at[key]
			if !ok {
				i = len(rows)
				at[key] = i
				rows = append(rows, MergeAttachRow{Mode: a.Mode, N: a.N})
			}
			c := MergeAttachCell{Input: col, Supported: a.Supported, Reason: a.Reason}
			if a.Supported {
				c.AttachMs = Range{a.AttachMs.Median, a.AttachMs.Min, a.AttachMs.Max}
			}
			rows[i].Cells = append(rows[i].Cells, c)
		}
	}
	slices.SortStableFunc(rows, func(a, b MergeAttachRow) int {
		return cmp.Or(cmp.Compare(rankOf(AttachModes, a.Mode), rankOf(AttachModes, b.Mode)), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.N, b.N))
	})
	return rows
}

// rankOf is n's index in names, len(names) when it is not there.
func rankOf(names []string, n string) int {
	if i := slices.Index(names, n); i >= 0 {
		return i
	}
	return len(names)
}

// cell returns the row's cell of column col, nil when that kernel has no
// such row.
func (r *MergeRow) cell(col int) *MergeCell {
	for i := range r.Cells {
		if r.Cells[i].Input == col {
			return &r.Cells[i]
		}
	}
	return nil
}
