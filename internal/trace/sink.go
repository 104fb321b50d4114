package trace

import (
	"fmt"
	"io"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/plural"
)

// sink formats the events for the output: text lines, a call graph, JSON
// lines or a Perfetto trace (newSink picks one from Options).
type sink interface {
	// event appends ev, formatted, to b; a sink that writes at the end
	// keeps it instead.
	event(b []byte, ev *bpfobj.TraceEvent) []byte
	// end writes to w what the sink kept for the end, and notes about it
	// to log.
	end(w, log io.Writer) error
	// summary writes s to w when the output carries it (JSON: its last
	// line).
	summary(w io.Writer, s *Summary)
}

// newSink is the sink of o.Output and o.Graph for the functions of table;
// syms symbolizes --stack; base is the time relative times count from (0:
// the first event's).
func newSink(o Options, table events.Table, syms events.Symbolizer, base uint64) sink {
	switch {
	case len(o.Entries) > 0:
		t := &events.Tree{Table: table, Entries: o.entryIDs(table), JSON: o.Output == "json", ErrorsOnly: o.entryErrors, Base: base}
		if o.Output == "perfetto" {
			t.Perfetto = &events.Perfetto{Table: table}
		}
		return treeSink{t: t}
	case o.Output == "perfetto":
		return perfettoSink{&events.Perfetto{Table: table}}
	case o.Output == "json":
		return jsonSink{&events.JSON{Table: table, Syms: syms}}
	case o.Graph:
		return graphSink{&events.Graph{Table: table, Base: base}}
	default:
		return textSink{&events.Text{Table: table, Syms: syms, Base: base}}
	}
}

// textSink writes a line per event (events.Text).
type textSink struct{ t *events.Text }

func (s textSink) event(b []byte, ev *bpfobj.TraceEvent) []byte { return s.t.Append(b, ev) }
func (textSink) end(w, log io.Writer) error                     { return nil }
func (textSink) summary(w io.Writer, _ *Summary)                {}

// graphSink writes the call graph (events.Graph), its open calls at the
// end.
type graphSink struct{ g *events.Graph }

func (s graphSink) event(b []byte, ev *bpfobj.TraceEvent) []byte { return s.g.Append(b, ev) }
func (s graphSink) end(w, log io.Writer) error {
	w.Write(s.g.Flush(nil))
	return nil
}
func (graphSink) summary(w io.Writer, _ *Summary) {}

// jsonSink writes a JSON line per event (events.JSON), and the summary
// as the last line.
type jsonSink struct{ j *events.JSON }

func (s jsonSink) event(b []byte, ev *bpfobj.TraceEvent) []byte { return s.j.Append(b, ev) }
func (jsonSink) end(w, log io.Writer) error                     { return nil }
func (jsonSink) summary(w io.Writer, sum *Summary)              { w.Write(sum.JSON()) }

// perfettoSink keeps the events and writes them as one Perfetto (Chrome
// JSON) trace at the end (events.Perfetto).
type perfettoSink struct{ p *events.Perfetto }

func (s perfettoSink) event(b []byte, ev *bpfobj.TraceEvent) []byte {
	s.p.Add(ev)
	return b
}

func (s perfettoSink) end(w, log io.Writer) error {
	if _, err := s.p.WriteTo(w); err != nil {
		return fmt.Errorf("write perfetto trace: %w", err)
	}
	if s.p.Skipped > 0 {
		verb := " have"
		if s.p.Skipped == 1 {
			verb = " has"
		}
		fmt.Fprintf(log, "ftprobe: perfetto: %s without a recorded entry%s no slice\n", plural.Count(s.p.Skipped, "exit"), verb)
	}
	return nil
}
func (perfettoSink) summary(w io.Writer, _ *Summary) {}

// treeSink writes a call tree per --entry call (events.Tree), and with
// JSON the summary as the last line; with Perfetto the trees' slices as
// one trace at the end.
type treeSink struct{ t *events.Tree }

func (s treeSink) event(b []byte, ev *bpfobj.TraceEvent) []byte { return s.t.Append(b, ev) }
func (s treeSink) end(w, log io.Writer) error {
	if n := s.t.Unfinished(); n > 0 {
		fmt.Fprintf(log, "ftprobe: --entry: %d entry calls had not returned when the trace stopped (no tree written)\n", n)
	}
	if s.t.Perfetto != nil {
		if _, err := s.t.Perfetto.WriteTo(w); err != nil {
			return fmt.Errorf("write perfetto trace of the --entry call trees: %w", err)
		}
	}
	return nil
}
func (s treeSink) summary(w io.Writer, sum *Summary) {
	if s.t.JSON {
		w.Write(sum.JSON())
	}
}
