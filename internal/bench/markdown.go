package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ftprobe/ftprobe/internal/plural"
)

// WriteMarkdown writes the report's one-thread hit-cost rows as Markdown
// tables, one pair per trigger: the ns over baseline of every mode (rows) and body
// (columns), then each body's x empty with x timed in brackets where the
// run has the timed body. A mode the kernel refused keeps its row with
// "-" and a footnote naming the reason. It is what docs/benchmarks.md
// shows (`make benchmarks` splices it in), so the page's tables are the
// report's own figures. Errors are the writer's.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	for _, trig := range r.hitTriggers() {
		modes, bodies := r.hitAxes(trig)
		if len(modes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s trigger, %s %s, %s: ns over the baseline per call (median)\n\n", trig, r.Header.Release, r.Header.Arch, plural.Count(r.Header.Runs, "run"))
		r.markdownTable(&b, trig, modes, bodies, func(h *HitRow) string { return fmt.Sprintf("%.0f", h.OverheadNs.Median) })
		var ratioBodies []string
		for _, body := range bodies {
			if body != BodyEmpty {
				ratioBodies = append(ratioBodies, body)
			}
		}
		if len(ratioBodies) > 0 {
			b.WriteString("\nx empty (x timed): each body's ns over the baseline over the empty (timed) body's of the same mode\n\n")
			r.markdownTable(&b, trig, modes, ratioBodies, func(h *HitRow) string {
				s := fmt.Sprintf("%.2f", h.RatioEmpty)
				if h.RatioTimed > 0 {
					s += fmt.Sprintf(" (%.2f)", h.RatioTimed)
				}
				return s
			})
		}
		b.WriteString("\n")
	}
	notes := r.unsupportedNotes()
	for i, n := range notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markdownTable writes one table of trig's rows: a row per mode, a
// column per body, cell(row) in each measured cell.
func (r *Report) markdownTable(b *strings.Builder, trig string, modes, bodies []string, cell func(*HitRow) string) {
	b.WriteString("| mode | " + strings.Join(bodies, " | ") + " |\n|---|" + strings.Repeat("---:|", len(bodies)) + "\n")
	notes := r.unsupportedNotes()
	for _, mode := range modes {
		b.WriteString("| " + mode)
		for _, body := range bodies {
			h := r.hitRow(trig, body, mode)
			switch {
			case h == nil:
				b.WriteString(" | ")
			case !h.Supported:
				fmt.Fprintf(b, " | - [%d]", slices.Index(notes, h.Reason)+1)
			default:
				b.WriteString(" | " + cell(h))
			}
		}
		b.WriteString(" |\n")
	}
}

// hitTriggers returns the triggers of the hit rows in report order.
func (r *Report) hitTriggers() []string {
	var out []string
	for _, h := range r.Hit {
		if !slices.Contains(out, h.Trigger) {
			out = append(out, h.Trigger)
		}
	}
	return out
}

// hitAxes returns trig's modes (baseline aside) and bodies in report
// order.
func (r *Report) hitAxes(trig string) (modes, bodies []string) {
	for _, h := range r.Hit {
		if h.Trigger != trig || h.Mode == ModeBaseline || h.threads() > 1 {
			continue
		}
		if !slices.Contains(modes, h.Mode) {
			modes = append(modes, h.Mode)
		}
		if !slices.Contains(bodies, h.Body) {
			bodies = append(bodies, h.Body)
		}
	}
	return modes, bodies
}

// hitRow returns the one-thread row of trig, body and mode, nil when
// there is none.
func (r *Report) hitRow(trig, body, mode string) *HitRow {
	for i := range r.Hit {
		if h := &r.Hit[i]; h.Trigger == trig && h.Body == body && h.Mode == mode && h.threads() == 1 {
			return h
		}
	}
	return nil
}

// unsupportedNotes returns the distinct reasons of the refused rows, in
// report order.
func (r *Report) unsupportedNotes() []string {
	var out []string
	for _, h := range r.Hit {
		if !h.Supported && !slices.Contains(out, h.Reason) {
			out = append(out, h.Reason)
		}
	}
	return out
}
