package bench

import (
	"fmt"
	"io"
)

// Measures a verdict compares, named as the report's fields.
const (
	MeasureNs         = "ns_over_baseline"
	MeasureRatioEmpty = "ratio_to_empty"
	MeasureRatioTimed = "ratio_to_timed"
)

// DefaultThreshold is --threshold's default: a cell regresses only when
// its median rose by more than this many percent of the old one.
const DefaultThreshold = 10.0

// Pairing is one merged kernel and the baseline column it is compared
// with.
type Pairing struct {
	Kernel     string `json:"kernel"`                // the new column's label
	Baseline   string `json:"baseline,omitempty"`    // the baseline column's label; absent when none matches
	RatiosOnly bool   `json:"ratios_only,omitempty"` // another clock or cpu model: absolute ns are not compared, only x empty and x timed
	Note       string `json:"note,omitempty"`        // why ratios only, or why no baseline column matches
}

// Change is one cell that moved past both reports' spread and the
// threshold.
type Change struct {
	Kernel     string  `json:"kernel"`     // the new column's label
	Trigger    string  `json:"trigger"`    // kernel or syscall
	Body       string  `json:"body"`       // the program body
	Mode       string  `json:"mode"`       // the hit mode
	Measure    string  `json:"measure"`    // ns_over_baseline, ratio_to_empty or ratio_to_timed
	Old        Range   `json:"old"`        // the baseline's value and range
	New        Range   `json:"new"`        // this report's value and range
	Percent    float64 `json:"percent"`    // (new - old) / old value, in percent
	Regression bool    `json:"regression"` // true: it rose (a regression); false: it fell (an improvement, never a failure)
}

// Verdict is the comparison of merged reports with a baseline: a cell is
// a regression when its range lies wholly above the baseline's (new min
// over old max) and its value rose by more than ThresholdPct percent.
type Verdict struct {
	Baseline     string    `json:"baseline"`          // the baseline file
	ThresholdPct float64   `json:"threshold_percent"` // --threshold
	Pairings     []Pairing `json:"pairings"`          // each kernel and its baseline column
	Changes      []Change  `json:"changes"`           // regressions and improvements, in row order
}

// Regressions counts the verdict's regressions.
func (v *Verdict) Regressions() int {
	n := 0
	for _, c := range v.Changes {
		if c.Regression {
			n++
		}
	}
	return n
}

// pairBaseline returns the column of base that in is compared with: of
// the columns of in's arch, the one of the same release and machine
// (cpu and clock) first, then one of the same release, then the only one
// of the same machine; -1 with the reason when none or several match.
func pairBaseline(in MergeInput, base []MergeInput) (int, string) {
	best, bestScore, ties := -1, -1, 0
	for i, b := range base {
		if b.Arch != in.Arch {
			continue
		}
		score := 0
		if b.Release == in.Release {
			score += 2
		}
		if b.CPU == in.CPU && b.Clock == in.Clock {
			score++
		}
		switch {
		case score > bestScore:
			best, bestScore, ties = i, score, 1
		case score == bestScore:
			ties++
		}
	}
	switch {
	case best < 0:
		return -1, "no baseline column of arch " + in.Arch
	case ties > 1:
		return -1, fmt.Sprintf("%d baseline columns match as well as each other; give a baseline with one per kernel", ties)
	}
	return best, ""
}

// CompareBaseline compares every cell of m with the same (trigger, body,
// mode) cell of its paired baseline column and records the verdict in m.
// A kernel paired with a column of another clock or cpu model compares
// x empty and x timed only.
func (m *Merged) CompareBaseline(base *Merged, file string, threshold float64) *Verdict {
	v := &Verdict{Baseline: file, ThresholdPct: threshold, Changes: []Change{}}
	pair := make([]int, len(m.Inputs))
	for col, in := range m.Inputs {
		b, why := pairBaseline(in, base.Inputs)
		pair[col] = b
		p := Pairing{Kernel: in.Label, Note: why}
		if b >= 0 {
			bi := base.Inputs[b]
			p.Baseline = bi.Label
			if bi.Clock != in.Clock || bi.CPU != in.CPU {
				p.RatiosOnly = true
				p.Note = fmt.Sprintf("another machine (clock %s, cpu %s; was %s, %s): ratios only", in.Clock, in.CPU, bi.Clock, bi.CPU)
			}
		}
		v.Pairings = append(v.Pairings, p)
	}
	old := map[[3]string]*MergeRow{}
	for i := range base.Hit {
		r := &base.Hit[i]
		old[[3]string{r.Trigger, r.Body, r.Mode}] = r
	}
	for _, row := range m.Hit {
		or := old[[3]string{row.Trigger, row.Body, row.Mode}]
		if or == nil {
			continue
		}
		for _, c := range row.Cells {
			if pair[c.Input] < 0 || !c.Supported {
				continue
			}
			oc := or.cell(pair[c.Input])
			if oc == nil || !oc.Supported {
				continue
			}
			ch := Change{Kernel: m.Inputs[c.Input].Label, Trigger: row.Trigger, Body: row.Body, Mode: row.Mode}
			if !v.Pairings[c.Input].RatiosOnly {
				v.add(ch, MeasureNs, &oc.OverheadNs, &c.OverheadNs)
			}
			v.add(ch, MeasureRatioEmpty, oc.RatioEmpty, c.RatioEmpty)
			v.add(ch, MeasureRatioTimed, oc.RatioTimed, c.RatioTimed)
		}
	}
	m.Verdict = v
	return v
}

// add records ch for measure when both values exist, their ranges do not
// overlap and the value moved by more than the threshold.
func (v *Verdict) add(ch Change, measure string, old, cur *Range) {
	if old == nil || cur == nil || old.Value <= 0 {
		return
	}
	pct := (cur.Value - old.Value) / old.Value * 100
	switch {
	case cur.Min > old.Max && pct > v.ThresholdPct:
		ch.Regression = true
	case cur.Max < old.Min && -pct > v.ThresholdPct:
	default:
		return
	}
	ch.Measure, ch.Old, ch.New, ch.Percent = measure, *old, *cur, pct
	v.Changes = append(v.Changes, ch)
}

// WriteText prints the verdict: the pairings with their notes, one line
// per regression and per improvement, and the count.
func (v *Verdict) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n== against the baseline %s: a regression is a cell whose range over runs lies wholly above the baseline's\n"+
		"   (new min > old max) and whose median rose more than %g%%; ns over baseline, x empty and x timed are compared\n", v.Baseline, v.ThresholdPct)
	for _, p := range v.Pairings {
		switch {
		case p.Baseline == "":
			fmt.Fprintf(w, "%s: not compared: %s\n", p.Kernel, p.Note)
		case p.RatiosOnly:
			fmt.Fprintf(w, "%s vs %s: %s\n", p.Kernel, p.Baseline, p.Note)
		default:
			fmt.Fprintf(w, "%s vs %s\n", p.Kernel, p.Baseline)
		}
	}
	for _, c := range v.Changes {
		what := "REGRESSION"
		if !c.Regression {
			what = "improvement"
		}
		fmt.Fprintf(w, "%s: %s, %s trigger, %s body, %s: %s %s -> %s (%+.0f%%)\n", what, c.Kernel, c.Trigger, c.Body, c.Mode,
			measureName(c.Measure), fmtRange(c.Measure, c.Old), fmtRange(c.Measure, c.New), c.Percent)
	}
	n := v.Regressions()
	fmt.Fprintf(w, "verdict: %d regression(s), %d improvement(s)\n", n, len(v.Changes)-n)
}

// measureName is how the tables name a measure.
func measureName(m string) string {
	switch m {
	case MeasureRatioEmpty:
		return "x empty"
	case MeasureRatioTimed:
		return "x timed"
	}
	return "ns over baseline"
}

// fmtRange is "497 [491..530]" (ns) or "1.47 [1.45..1.49]" (ratios).
func fmtRange(measure string, r Range) string {
	if measure == MeasureNs {
		return fmt.Sprintf("%.0f [%.0f..%.0f]", r.Value, r.Min, r.Max)
	}
	return fmt.Sprintf("%.2f [%.2f..%.2f]", r.Value, r.Min, r.Max)
}
