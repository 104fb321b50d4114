package events

import (
	"strconv"
	"unicode/utf8"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// Graph formats events like ftrace's function_graph tracer: one line per
// call level, nested by depth per thread, a leaf call (entry directly
// followed by its exit on the same thread) folded onto one line, the
// duration on closing lines, a marker line whenever the output switches to
// another thread, "no entry recorded" on exits whose entry was not seen, and
// an entry-only function's entry (symbols.Func.EntryOnly) on a line of its
// own ending in ";  /* entry only: noreturn */":
//
//	TIME(s) CPU TGID/TID  DURATION |  do_sys_openat2(dfd=-100, ...) {
//	TIME(s) CPU TGID/TID  12.100µs |    getname(...) = 0xffff...;
//	TIME(s) CPU TGID/TID   3.066ms |  } = 4  /* do_sys_openat2 */
type Graph struct {
	Table   Table
	Base    uint64                        // relative times count from it (ns); 0: set to the first event's
	pending map[uint32]*bpfobj.TraceEvent // held entry per thread (nil: none)
	lastTid uint32
}

// Append formats e, possibly holding an entry back to fold it with its
// exit, and returns b with any completed lines appended.
func (g *Graph) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	if g.pending == nil {
		g.pending = map[uint32]*bpfobj.TraceEvent{}
	}
	if g.Base == 0 {
		g.Base = e.TsNs
	}
	// Records are 640 bytes with --strings/--stack: each thread keeps one
	// buffer for its held entry, reused, instead of a map value per entry.
	p, ok := g.pending[e.Tid]
	held := ok && p.Kind != 0
	if e.Kind == KindEntry {
		if held {
			b = g.open(b, p)
		}
		if f := g.Table.Lookup(e.FuncId); f != nil && f.EntryOnly != "" {
			// No exit will come: one line, nothing held.
			if p != nil {
				p.Kind = 0
			}
			b = g.prefix(b, e, nil)
			b = append(b, f.Display()...)
			b = AppendArgs(b, f, e)
			b = append(b, ";  /* entry only: "...)
			b = append(b, f.EntryOnly...)
			return append(b, " */\n"...)
		}
		if p == nil {
			p = new(bpfobj.TraceEvent)
			g.pending[e.Tid] = p
		}
		*p = *e
		return b
	}
	if held && p.FuncId == e.FuncId && e.Flags&FlagNoEntry == 0 {
		p.Kind = 0
		return g.leaf(b, p, e)
	}
	if held {
		p.Kind = 0
		b = g.open(b, p)
	}
	return g.close(b, e)
}

// Flush prints entries still held back (calls that had not returned).
func (g *Graph) Flush(b []byte) []byte {
	for tid, p := range g.pending {
		if p.Kind != 0 {
			b = g.open(b, p)
		}
		delete(g.pending, tid)
	}
	return b
}

func (g *Graph) prefix(b []byte, e *bpfobj.TraceEvent, dur []byte) []byte {
	if g.lastTid != 0 && g.lastTid != e.Tid {
		b = append(b, "------ "...)
		b = strconv.AppendUint(b, uint64(e.Tgid), 10)
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(e.Tid), 10)
		b = append(b, ' ')
		b = append(b, Comm(e)...)
		b = append(b, " ------\n"...)
	}
	g.lastTid = e.Tid
	b = AppendSeconds(b, e.TsNs-min(e.TsNs, g.Base))
	b = append(b, ' ')
	b = appendPad(b, strconv.Itoa(int(e.Cpu)), 3)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.Tgid), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(e.Tid), 10)
	b = append(b, ' ')
	for i := utf8.RuneCount(dur); i < 11; i++ {
		b = append(b, ' ')
	}
	b = append(b, dur...)
	b = append(b, " |  "...)
	for i := 0; i < int(e.Depth) && i < 32; i++ {
		b = append(b, "  "...)
	}
	return b
}

func (g *Graph) open(b []byte, e *bpfobj.TraceEvent) []byte {
	b = g.prefix(b, e, nil)
	b = append(b, g.Table.FuncName(e.FuncId)...)
	b = AppendArgs(b, g.Table.Lookup(e.FuncId), e)
	return append(b, " {\n"...)
}

func (g *Graph) leaf(b []byte, en, ex *bpfobj.TraceEvent) []byte {
	f := g.Table.Lookup(en.FuncId)
	b = g.prefix(b, en, AppendDuration(nil, ex.DurationNs))
	b = append(b, g.Table.FuncName(en.FuncId)...)
	b = AppendArgs(b, f, en)
	b = append(b, " = "...)
	b = AppendRet(b, f, ex.Ret)
	return append(b, ";\n"...)
}

func (g *Graph) close(b []byte, e *bpfobj.TraceEvent) []byte {
	var dur []byte
	if e.Flags&FlagNoEntry == 0 {
		dur = AppendDuration(nil, e.DurationNs)
	}
	f := g.Table.Lookup(e.FuncId)
	b = g.prefix(b, e, dur)
	b = append(b, "} = "...)
	b = AppendRet(b, f, e.Ret)
	b = append(b, "  /* "...)
	b = append(b, g.Table.FuncName(e.FuncId)...)
	if e.Flags&FlagNoEntry != 0 {
		b = append(b, ": no entry recorded"...)
	}
	return append(b, " */\n"...)
}
