package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/ftprobe/ftprobe/internal/plural"
)

// WriteText prints the report as aligned tables.
func (r *Report) WriteText(w io.Writer) {
	r.writeTextHeader(w)
	if len(r.Hit) > 0 {
		writeHitText(w, r.Hit)
	}
	if len(r.Attach) > 0 {
		writeAttachText(w, r.Attach)
	}
	if len(r.Crowd) > 0 {
		writeCrowdText(w, r.Crowd)
	}
	if len(r.Stream) > 0 {
		writeStreamText(w, r.Stream)
	}
}

// writeTextHeader prints the kernel, machine and run header lines.
func (r *Report) writeTextHeader(w io.Writer) {
	h := r.Header
	fmt.Fprintf(w, "ftprobe compare: kernel %s %s, %s, %s, %s (median [min..max])\n", h.Release, h.Arch, h.CPU, plural.Count(h.CPUs, "CPU"), plural.Count(h.Runs, "run"))
	if h.Version != "" {
		fmt.Fprintf(w, "ftprobe %s\n", h.Version)
	}
	if h.GeneralObject {
		fmt.Fprintln(w, "trace bodies from the general trace object (FTPROBE_OBJECT=general)")
	}
	if h.AsCompiled {
		fmt.Fprintln(w, "trace bodies loaded as compiled (FTPROBE_SPECIALIZE=off)")
	}
	var cfg []string
	for _, k := range sortedKeys(h.Config) {
		cfg = append(cfg, strings.TrimPrefix(k, "CONFIG_")+"="+h.Config[k])
	}
	fmt.Fprintf(w, "config: %s\n", strings.Join(cfg, " "))
	if h.Warning != "" {
		fmt.Fprintf(w, "WARNING: %s\n", h.Warning)
	}
	if r.Partial {
		fmt.Fprintf(w, "INTERRUPTED: partial results\n")
	}
}

// writeHitText prints the hit cost table. The threads, x base and
// x 1 thread columns appear when some row has several threads
// (compare --threads), x timed when the run has the timed body.
func writeHitText(w io.Writer, hit []HitRow) {
	// x timed only when the run has the timed body (opt-in).
	withTimed := slices.ContainsFunc(hit, func(h HitRow) bool { return h.RatioTimed > 0 })
	multi := slices.ContainsFunc(hit, func(h HitRow) bool { return h.threads() > 1 })
	timedNote := ""
	if withTimed {
		timedNote = "   x timed = ns over base over the timed body's of the same mode (the duration floor: what the body adds to it);\n"
	}
	fmt.Fprintf(w, "\n== hit cost: ns per call of the target; ns over base = ns/hit minus the baseline measured just before;\n"+
		"   x ref = ns over base over fentry's (empty body) or fentry+fexit's (other bodies);\n"+
		"   x empty = ns over base over the empty program's of the same mode (what ftprobe's own body adds);\n"+
		timedNote+
		"   drops = events a full record buffer dropped, over all runs (trace bodies; reader %s)\n", readerOf(hit))
	if multi {
		fmt.Fprint(w, "   threads = threads pinned to as many CPUs calling at once, each making the calls of a run; ns/hit = their\n"+
			"   wall ns, first start to last end, per call of one thread (under QEMU icount the clock counts every vCPU's\n"+
			"   instructions, one vCPU at a time: about N times one thread's); x base = ns/hit over the baseline's, same\n"+
			"   threads, median (the baseline's short run carries the threads' start); at several threads under QEMU icount,\n"+
			"   ns over base is divided by the threads: one thread's ns, as elsewhere;\n"+
			"   x 1 thread = ns over base over the 1-thread row's of the same body and mode (what calling at once adds)\n")
	}
	head := []string{"trigger", "body", "mode", "threads", "Mhits/s", "ns/hit", "[min..max]", "ns over base", "x base", "x ref", "x 1 thread", "x empty", "x timed", "misses", "drops"}
	show := func(col string) bool {
		switch col {
		case "threads", "x base", "x 1 thread":
			return multi
		case "x timed":
			return withTimed
		}
		return true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(cells map[string]string) {
		var b strings.Builder
		for _, col := range head {
			if show(col) {
				b.WriteString(cells[col] + "\t")
			}
		}
		fmt.Fprintln(tw, b.String())
	}
	hc := map[string]string{}
	for _, col := range head {
		hc[col] = col
	}
	line(hc)
	var notes footnotes
	for _, row := range hit {
		line(hitCells(row, &notes))
	}
	tw.Flush()
	printNotes(w, notes)
}

// hitCells are the text table's cells of row by column name; an
// unsupported row's reason is numbered in notes.
func hitCells(row HitRow, notes *footnotes) map[string]string {
	c := map[string]string{"trigger": row.Trigger, "body": row.Body, "mode": row.Mode, "threads": fmt.Sprint(row.threads())}
	if !row.Supported {
		c["Mhits/s"] = fmt.Sprintf("unsupported [%d]", notes.add(row.Reason))
		return c
	}
	ratio := func(col string, x float64) {
		if x > 0 {
			c[col] = fmt.Sprintf("%.2f", x)
		}
	}
	c["Mhits/s"] = fmt.Sprintf("%.3f", row.MHitsPerSec)
	c["ns/hit"] = fmt.Sprintf("%.1f", row.NsPerHit.Median)
	c["[min..max]"] = fmt.Sprintf("[%.1f..%.1f]", row.NsPerHit.Min, row.NsPerHit.Max)
	c["misses"] = fmt.Sprint(row.Misses)
	if row.Reader != "" {
		c["drops"] = fmt.Sprint(row.Drops)
	}
	ratio("x timed", row.RatioTimed)
	if row.Mode != ModeBaseline {
		c["ns over base"] = fmt.Sprintf("%.1f", row.OverheadNs.Median)
		ratio("x base", row.RatioBaseline)
		ratio("x ref", row.RatioFentry)
		ratio("x 1 thread", row.RatioOneThread)
		ratio("x empty", row.RatioEmpty)
	}
	return c
}

// writeAttachText prints the attach and detach cost table.
func writeAttachText(w io.Writer, attach []AttachRow) {
	fmt.Fprintf(w, "\n== attach and detach cost of N functions (ms)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tN\tload\tattach\t[min..max]\tdetach\tlinks\tprograms\ttrampolines\tprog memlock\t")
	var notes footnotes
	for _, row := range attach {
		if !row.Supported {
			fmt.Fprintf(tw, "%s\t%d\tunsupported [%d]\t\t\t\t\t\t\t\t\n", row.Mode, row.N, notes.add(row.Reason))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t[%.2f..%.2f]\t%.2f\t%d\t%d\t%d\t%d B\t\n", row.Mode, row.N, row.LoadMs.Median, row.AttachMs.Median,
			row.AttachMs.Min, row.AttachMs.Max, row.DetachMs.Median, row.Links, row.Programs, row.Trampolines, row.MemlockB)
	}
	tw.Flush()
	printNotes(w, notes)
}

// writeCrowdText prints the crowded ftrace table.
func writeCrowdText(w io.Writer, crowd []CrowdRow) {
	target := crowd[0].Target
	if target == "" {
		target = "the kernel trigger's target"
	}
	fmt.Fprintf(w, "\n== crowded ftrace: hit cost on %s (kernel trigger, empty body) while K other functions are traced\n"+
		"   by a crowd of K fentry links or one kprobe.multi link, the target alone or shared with the other attach path\n"+
		"   (two ftrace_ops on its call site: ftrace_ops_list_func walks the ops list). The baseline is taken with the\n"+
		"   crowd and the sharer attached, so ns/hit includes the sharer and ns over base does not; vs K=0 = ns over base\n"+
		"   over the K=0 row's; misses: the measured probe's, then the sharer's in parentheses if any\n", target)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tcrowd\tK\ttarget\tns/hit\t[min..max]\tns over base\tvs K=0\tmisses\t")
	var notes footnotes
	for _, row := range crowd {
		by, tgt := row.By, "alone"
		if by == "" {
			by = "-"
		}
		if row.Shared {
			tgt = "+" + sharerOf(row.Mode)
		}
		if !row.Supported {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\tunsupported [%d]\t\t\t\t\t\n", row.Mode, by, row.K, tgt, notes.add(row.Reason))
			continue
		}
		vs := "-"
		if row.VsK0 > 0 {
			vs = fmt.Sprintf("%.2fx", row.VsK0)
		}
		miss := fmt.Sprint(row.Misses)
		if row.SharerMisses != 0 {
			miss += fmt.Sprintf(" (sharer %d)", row.SharerMisses)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f\t[%.1f..%.1f]\t%.1f\t%s\t%s\t\n", row.Mode, by, row.K, tgt,
			row.NsPerHit.Median, row.NsPerHit.Min, row.NsPerHit.Max, row.OverheadNs.Median, vs, miss)
	}
	tw.Flush()
	printNotes(w, notes)
}

// writeStreamText prints the streaming table.
func writeStreamText(w io.Writer, stream []StreamRow) {
	fmt.Fprintf(w, "\n== streaming: trace program (entry+exit events) through the record buffers to one reader\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tbuffer\tcalls\tproduced\tdelivered\tdropped\tevents/s\t")
	var notes footnotes
	for _, row := range stream {
		if !row.Supported {
			fmt.Fprintf(tw, "%s\t%d\tunsupported [%d]\t\t\t\t\t\n", row.Mode, row.RingbufBytes, notes.add(row.Reason))
			continue
		}
		produced := "-"
		if row.Produced > 0 {
			produced = fmt.Sprint(row.Produced)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%.0f\t\n", row.Mode, row.RingbufBytes, row.Calls, produced, row.Delivered, row.Dropped, row.EventsPerSec)
	}
	tw.Flush()
	printNotes(w, notes)
}

// ReadReport loads a report written by WriteJSON. Console captures are
// accepted: text before the first '{' and after the document is ignored.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	i := strings.Index(string(b), "{")
	if i < 0 {
		return nil, fmt.Errorf("read report %s: no JSON document", path)
	}
	var r Report
	if err := json.NewDecoder(strings.NewReader(string(b[i:]))).Decode(&r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	if r.Schema != SchemaID {
		return nil, fmt.Errorf("read report %s: schema %q, want %q", path, r.Schema, SchemaID)
	}
	return &r, nil
}

// WriteJSON writes the report as one JSON document (schema SchemaID).
func (r *Report) WriteJSON(w io.Writer) error {
	return writeIndented(w, r)
}

// writeIndented writes v as one indented JSON document.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Plot draws ns over baseline by mode (empty body, kernel trigger first,
// one thread) with min-max whiskers, attach time against N, and, when
// the run has several threads, ns over baseline against the threads,
// into path (.svg or .png, by extension).
func (r *Report) Plot(path string) (err error) {
	defer func() {
		if p := recover(); p != nil { // gonum/plot panics on degenerate data
			err = fmt.Errorf("plot %s: %v", path, p)
		}
	}()
	ext := strings.TrimPrefix(filepath.Ext(path), ".")
	if ext != "svg" && ext != "png" {
		return fmt.Errorf("--plot %s: want a .svg or .png file", path)
	}
	p1 := plot.New()
	p1.Title.Text = fmt.Sprintf("hit cost over baseline, %s %s%s", r.Header.Release, r.Header.Arch, emu(r.Header.Emulated))
	p1.X.Label.Text = "ns per call over baseline (median, min-max)"
	var names []string
	var vals plotter.Values
	var errs plotter.XErrors
	for _, row := range r.Hit {
		if row.Mode == ModeBaseline || !row.Supported || row.Body != BodyEmpty || (row.Trigger != r.Hit[0].Trigger) || row.threads() > 1 {
			continue
		}
		names = append(names, row.Mode)
		vals = append(vals, row.OverheadNs.Median)
		errs = append(errs, struct{ Low, High float64 }{row.OverheadNs.Median - row.OverheadNs.Min, row.OverheadNs.Max - row.OverheadNs.Median})
	}
	if len(vals) > 0 {
		bars, err := plotter.NewBarChart(vals, vg.Points(18))
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(0)
		bars.Horizontal = true // whole mode names as labels
		p1.Add(bars)
		pts := make(plotter.XYs, len(vals))
		for i := range vals {
			pts[i].X, pts[i].Y = vals[i], float64(i)
		}
		eb, err := plotter.NewXErrorBars(struct {
			plotter.XYer
			plotter.XErrorer
		}{pts, errs})
		if err == nil {
			p1.Add(eb)
		}
		p1.NominalY(names...)
	}
	p2 := plot.New()
	p2.Title.Text = "attach time against N"
	p2.X.Label.Text = "N functions"
	p2.Y.Label.Text = "attach ms (median, log scale)"
	var lines []any
	for _, mode := range AttachModes {
		var xy plotter.XYs
		for _, row := range r.Attach {
			if row.Mode == mode && row.Supported {
				xy = append(xy, plotter.XY{X: float64(row.N), Y: math.Max(row.AttachMs.Median, 0.001)})
			}
		}
		if len(xy) > 0 {
			lines = append(lines, mode, xy)
		}
	}
	if len(lines) > 0 {
		if err := plotutil.AddLinePoints(p2, lines...); err != nil {
			return err
		}
		p2.X.Scale = plot.LogScale{}
		// Log y too: one link (kprobe.multi, the tracing multi links)
		// and N links differ by orders of magnitude.
		p2.Y.Scale = plot.LogScale{}
		p2.Y.Tick.Marker = plot.LogTicks{}
		p2.X.Tick.Marker = plot.LogTicks{}
	} else {
		p2.Title.Text += " (no supported mode)"
	}
	tiles := []*plot.Plot{p1}
	if len(r.Attach) > 0 { // the attach scenario ran
		tiles = append(tiles, p2)
	}
	if pt, err := r.threadsPlot(); err != nil {
		return err
	} else if pt != nil {
		tiles = append(tiles, pt)
	}
	img := vg.Length(16) * vg.Centimeter
	c := vgimgCanvas(ext, vg.Length(len(tiles))*img, img)
	if c == nil {
		return fmt.Errorf("plot: cannot create %s canvas", ext)
	}
	drawTiles(c, tiles)
	return saveCanvas(c, path)
}

// threadsPlot is ns over baseline against the threads calling at once:
// a line per body and mode of the first trigger; nil when no row has
// several threads.
func (r *Report) threadsPlot() (*plot.Plot, error) {
	if !slices.ContainsFunc(r.Hit, func(h HitRow) bool { return h.threads() > 1 }) {
		return nil, nil
	}
	trig := r.Hit[0].Trigger
	p := plot.New()
	p.Title.Text = fmt.Sprintf("hit cost against threads calling at once, %s trigger", trig)
	p.X.Label.Text = "threads (one per CPU)"
	p.Y.Label.Text = "ns per call over baseline, in one thread's ns (median)"
	var names []string
	xys := map[string]plotter.XYs{}
	for _, h := range r.Hit {
		if h.Trigger != trig || h.Mode == ModeBaseline || !h.Supported || len(h.OverheadNs.Samples) == 0 {
			continue
		}
		name := h.Body + " " + h.Mode
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		xys[name] = append(xys[name], plotter.XY{X: float64(h.threads()), Y: h.OverheadNs.Median})
	}
	var lines []any
	for _, n := range names {
		lines = append(lines, n, xys[n])
	}
	if len(lines) == 0 {
		p.Title.Text += " (no supported mode)"
		return p, nil
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	return p, nil
}

// footnotes numbers the distinct reasons of a table's unsupported rows:
// rows with the same reason share its number.
type footnotes struct {
	reasons []string
	num     map[string]int
}

func (f *footnotes) add(reason string) int {
	if f.num == nil {
		f.num = map[string]int{}
	}
	if n, ok := f.num[reason]; ok {
		return n
	}
	f.reasons = append(f.reasons, reason)
	f.num[reason] = len(f.reasons)
	return len(f.reasons)
}

func printNotes(w io.Writer, f footnotes) {
	for i, n := range f.reasons {
		fmt.Fprintf(w, "  [%d] %s\n", i+1, n)
	}
}

func emu(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ", emulated)"
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// readerOf says where the trace bodies' ringbuf reader ran: "after each
// timed run", "during the timed runs", or "-" (no trace body, or a report
// from before the choice existed).
func readerOf(rows []HitRow) string {
	for _, r := range rows {
		switch r.Reader {
		case "after":
			return "after each timed run"
		case "during":
			return "during the timed runs"
		}
	}
	return "-"
}
