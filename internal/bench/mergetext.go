package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/ftprobe/ftprobe/internal/plural"
)

// mergeGrid is one cross-kernel table: the key columns' heads, one head
// per kernel column, the rows' cells, and the footnotes their
// unsupported cells point to.
type mergeGrid struct {
	title string
	keys  []string
	cols  []string
	rows  [][]string // len(keys)+len(cols) cells each
	notes footnotes
}

// spread is a median's run-to-run spread: the farther of min and max
// from it, in percent of it.
func spread(r Range) string {
	if r.Value == 0 {
		return ""
	}
	d := math.Max(r.Value-r.Min, r.Max-r.Value) / math.Abs(r.Value) * 100
	return fmt.Sprintf(" ±%.0f%%", d)
}

// clockGroups is "icount (2), hw (1)": the clocks of the columns in
// order, with their number of columns.
func (m *Merged) clockGroups() string {
	var parts []string
	for i := 0; i < len(m.Inputs); {
		j := i
		for j < len(m.Inputs) && m.Inputs[j].Clock == m.Inputs[i].Clock {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", m.Inputs[i].Clock, j-i))
		i = j
	}
	return strings.Join(parts, ", ")
}

// hitGrid is the hit-cost table: a row per trigger, body and mode, a
// column per kernel, each cell the median ns over baseline with its
// spread and x empty where the row has it.
func (m *Merged) hitGrid() mergeGrid {
	g := mergeGrid{title: "hit cost across kernels: ns per call over the baseline, median ±spread over runs (the farther of min and max from it), x empty where the row has it",
		keys: []string{"trigger", "body", "mode"}}
	for _, in := range m.Inputs {
		g.cols = append(g.cols, in.Label)
	}
	for _, row := range m.Hit {
		cells := []string{row.Trigger, row.Body, row.Mode}
		for col := range m.Inputs {
			c := row.cell(col)
			switch {
			case c == nil:
				cells = append(cells, "")
			case !c.Supported:
				cells = append(cells, fmt.Sprintf("- [%d]", g.notes.add(m.Inputs[col].Label+": "+c.Reason)))
			default:
				s := fmt.Sprintf("%.0f%s", c.OverheadNs.Value, spread(c.OverheadNs))
				if c.RatioEmpty != nil {
					s += fmt.Sprintf(" x%.2f", c.RatioEmpty.Value)
				}
				cells = append(cells, s)
			}
		}
		g.rows = append(g.rows, cells)
	}
	return g
}

// attachGrid is the attach table: a row per mode and N, a column per
// kernel, each cell the median attach ms with its spread.
func (m *Merged) attachGrid() mergeGrid {
	g := mergeGrid{title: "attach time across kernels: ms to attach N functions, median ±spread over runs", keys: []string{"mode", "N"}}
	for _, in := range m.Inputs {
		g.cols = append(g.cols, in.Label)
	}
	for _, row := range m.Attach {
		cells := []string{row.Mode, fmt.Sprint(row.N)}
		for col := range m.Inputs {
			var c *MergeAttachCell
			for i := range row.Cells {
				if row.Cells[i].Input == col {
					c = &row.Cells[i]
				}
			}
			switch {
			case c == nil:
				cells = append(cells, "")
			case !c.Supported:
				cells = append(cells, fmt.Sprintf("- [%d]", g.notes.add(m.Inputs[col].Label+": "+c.Reason)))
			default:
				cells = append(cells, fmt.Sprintf("%.2f%s", c.AttachMs.Value, spread(c.AttachMs)))
			}
		}
		g.rows = append(g.rows, cells)
	}
	return g
}

// grids are the merged document's tables, the scenarios without rows
// aside.
func (m *Merged) grids() []mergeGrid {
	var out []mergeGrid
	if len(m.Hit) > 0 {
		out = append(out, m.hitGrid())
	}
	if len(m.Attach) > 0 {
		out = append(out, m.attachGrid())
	}
	return out
}

// WriteText prints the merged reports: the columns (file, cpu model,
// ftprobe version, settings), then one table per scenario with a column
// per kernel, columns grouped by clock with a "|" between groups, and
// the verdict when there is one.
func (m *Merged) WriteText(w io.Writer) {
	fmt.Fprintf(w, "ftprobe compare: %s; columns grouped by clock: %s\n", plural.Count(len(m.Inputs), "report"), m.clockGroups())
	fmt.Fprintln(w, "   (icount: a ns is one executed instruction; tcg: emulated time; hw: wall time; figures of two clocks are not comparable)")
	for i, in := range m.Inputs {
		fmt.Fprintf(w, "  [%d] %s: %s, %s, ftprobe %s, %s\n", i+1, in.Label, in.File, in.CPU, in.Version, in.Settings)
	}
	for _, g := range m.grids() {
		fmt.Fprintf(w, "\n== %s\n", g.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := append([]string{}, g.keys...)
		for col, c := range g.cols {
			head = append(head, m.groupSep(col)...)
			head = append(head, fmt.Sprintf("[%d] %s", col+1, c))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, r := range g.rows {
			line := append([]string{}, r[:len(g.keys)]...)
			for col, c := range r[len(g.keys):] {
				line = append(line, m.groupSep(col)...)
				line = append(line, c)
			}
			fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
		}
		tw.Flush()
		printNotes(w, g.notes)
	}
	if m.Verdict != nil {
		m.Verdict.WriteText(w)
	}
}

// groupSep is the "|" column before column col when it starts a new
// clock group.
func (m *Merged) groupSep(col int) []string {
	if col > 0 && m.Inputs[col].Clock != m.Inputs[col-1].Clock {
		return []string{"|"}
	}
	return nil
}

// WriteMarkdown writes the cross-kernel tables as Markdown: one table
// per scenario, a column per kernel labelled with its clock, and the
// footnotes of the unsupported cells. Errors are the writer's.
func (m *Merged) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString(m.clocksLine() + "\n")
	for _, g := range m.grids() {
		fmt.Fprintf(&b, "\n%s\n\n", g.title)
		b.WriteString("| " + strings.Join(append(append([]string{}, g.keys...), g.cols...), " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---|", len(g.keys)) + strings.Repeat("---:|", len(g.cols)) + "\n")
		for _, r := range g.rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		if len(g.notes.reasons) > 0 {
			b.WriteString("\n")
		}
		for i, n := range g.notes.reasons {
			fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the merged document (schema MergeSchemaID).
func (m *Merged) WriteJSON(w io.Writer) error {
	return writeIndented(w, m)
}

// clocksLine says how many reports there are and their clocks, warning
// only when there are several clocks.
func (m *Merged) clocksLine() string {
	clocks := map[string]bool{}
	for _, in := range m.Inputs {
		clocks[in.Clock] = true
	}
	if len(clocks) > 1 {
		return fmt.Sprintf("%s; columns grouped by clock: %s (figures of two clocks are not comparable)", plural.Count(len(m.Inputs), "report"), m.clockGroups())
	}
	return fmt.Sprintf("%s, one clock: %s", plural.Count(len(m.Inputs), "report"), m.clockGroups())
}
