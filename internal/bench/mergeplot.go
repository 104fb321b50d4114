package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot draws the merged hit costs of the empty body (first trigger) by
// mode, one bar series per kernel, into path (.svg or .png): one panel
// per clock, so figures of two clocks never share an axis.
func (m *Merged) Plot(path string) (err error) {
	defer func() {
		if p := recover(); p != nil { // gonum/plot panics on degenerate data
			err = fmt.Errorf("plot %s: %v", path, p)
		}
	}()
	ext := strings.TrimPrefix(filepath.Ext(path), ".")
	if ext != "svg" && ext != "png" {
		return fmt.Errorf("plot %s: want a .svg or .png file", path)
	}
	trig := ""
	for _, r := range m.Hit {
		if r.Body == BodyEmpty {
			trig = r.Trigger
			break
		}
	}
	var modes []string
	for _, r := range m.Hit {
		if r.Trigger == trig && r.Body == BodyEmpty && !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	var tiles []*plot.Plot
	for i := 0; i < len(m.Inputs); {
		j := i
		for j < len(m.Inputs) && m.Inputs[j].Clock == m.Inputs[i].Clock {
			j++
		}
		p, err := m.clockPanel(trig, modes, i, j)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		tiles = append(tiles, p)
		i = j
	}
	if len(tiles) == 0 {
		return fmt.Errorf("plot %s: no reports", path)
	}
	w := vg.Length(16) * vg.Centimeter
	h := vg.Length(6+len(modes)*max(1, len(m.Inputs))/2) * vg.Centimeter / 2
	c := vgimgCanvas(ext, vg.Length(len(tiles))*w, max(h, 10*vg.Centimeter))
	if c == nil {
		return fmt.Errorf("plot %s: cannot create a %s canvas", path, ext)
	}
	drawTiles(c, tiles)
	return saveCanvas(c, path)
}

// clockPanel is one clock's panel: columns from..to-1 of m, a bar series
// each over modes.
func (m *Merged) clockPanel(trig string, modes []string, from, to int) (*plot.Plot, error) {
	p := plot.New()
	clock := m.Inputs[from].Clock
	p.Title.Text = fmt.Sprintf("%s trigger, empty body, clock %s", trig, clock)
	p.X.Label.Text = "ns per call over baseline (median)"
	if clock == ClockIcount {
		p.X.Label.Text = "instructions per call over baseline (median; icount)"
	}
	n := to - from
	width := vg.Points(float64(min(18, 48/max(1, n))))
	for k, col := 0, from; col < to; k, col = k+1, col+1 {
		vals := make(plotter.Values, len(modes))
		for i, mode := range modes {
			for _, r := range m.Hit {
				if r.Trigger == trig && r.Body == BodyEmpty && r.Mode == mode {
					if c := r.cell(col); c != nil && c.Supported {
						vals[i] = c.OverheadNs.Value
					}
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = plotutil.Color(k)
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(k)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(m.Inputs[col].Label, bars)
	}
	p.Legend.Top = false // bottom right: beside the cheapest modes, drawn first
	p.NominalY(modes...)
	return p, nil
}
