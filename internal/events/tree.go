package events

import (
	"strconv"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// Tree groups the events of each call of an --entry function into one
// call tree and writes it when the entry function returns: function_graph
// style text, or one JSON object per entry call ("type":"call_tree", the
// tree under "call_tree").
//
// The tree is built from the exits, which arrive in post-order with the
// call's depth, its entry's arguments (paired by the Decoder, or carried
// by a deferred exit), duration and return value: an exit at depth d takes
// the completed calls waiting at depth d+1 that started after it as its
// children. An exit at depth 0 of an entry function is a tree's root. An
// entry is kept until its exit only for what the exit lacks (--strings,
// --arg values); an entry-only function's entry (symbols.Func.EntryOnly)
// is a leaf.
//
// The error origin (retsnoop's): when the root returned an error, the path
// follows, level by level, the first child that returned the same value,
// down to the call that first returned it (none of its children did). A
// child that failed with another value (-ECHILD before a retry) is not on
// the path. Text marks that path
// with a leading "!" and the origin's line with "<- error origin"; JSON
// sets "error_path" on the path's nodes, "error_origin" on the origin and
// names it at the top level.
type Tree struct {
	Table Table
	// Entries are the IDs of the entry functions.
	Entries map[uint32]bool
	// JSON writes JSON lines instead of text.
	JSON bool
	// ErrorsOnly writes only the trees whose entry call returned an error
	// (--errors).
	ErrorsOnly bool
	Base       uint64 // timestamp of the first event (ns), set on first use
	// Perfetto, when set, takes each tree to write as nested slices
	// (Perfetto.AddTree) instead of text or JSON; Perfetto.WriteTo then
	// writes them all at the end.
	Perfetto *Perfetto
	// Calls counts the entry calls completed, Shown those written.
	Calls, Shown uint64
	threads      map[uint32]*treeThread
}

// TreeNode is one call of a tree.
type TreeNode struct {
	Exit     bpfobj.TraceEvent // the exit (for an entry-only call: its entry)
	Entry    *bpfobj.TraceEvent
	Children []*TreeNode
	// Err: the call returned an error; Path: it is on the path from the
	// root to the error origin; Origin: it is the origin.
	Err, Path, Origin bool
	entryOnly         bool
}

// Start is the call's entry time (ns).
func (n *TreeNode) Start() uint64 {
	if n.Entry != nil {
		return n.Entry.TsNs
	}
	if n.entryOnly || n.Exit.Flags&FlagNoEntry != 0 {
		return n.Exit.TsNs
	}
	return n.Exit.TsNs - n.Exit.DurationNs
}

type treeThread struct {
	pending [][]*TreeNode // completed calls by depth, waiting for their parent
	open    [16]*bpfobj.TraceEvent
}

// Append takes one event and returns b with any tree completed by it.
func (t *Tree) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	if t.threads == nil {
		t.threads = map[uint32]*treeThread{}
	}
	if t.Base == 0 {
		t.Base = e.TsNs
	}
	th := t.threads[e.Tid]
	if th == nil {
		th = &treeThread{}
		t.threads[e.Tid] = th
	}
	d := int(e.Depth)
	f := t.Table.Lookup(e.FuncId)
	if e.Kind == KindEntry {
		if f != nil && f.EntryOnly != "" {
			th.add(d, &TreeNode{Exit: *e, entryOnly: true})
			return b
		}
		if d < len(th.open) {
			c := *e
			th.open[d] = &c
		}
		return b
	}
	n := &TreeNode{Exit: *e}
	if d < len(th.open) && th.open[d] != nil && th.open[d].FuncId == e.FuncId && e.Flags&FlagNoEntry == 0 {
		n.Entry = th.open[d]
	}
	if d < len(th.open) {
		th.open[d] = nil
	}
	n.Err = ErrnoOf(f, e.Ret) != ""
	if d+1 < len(th.pending) {
		start := n.Start()
		for _, c := range th.pending[d+1] {
			if c.Start() >= start {
				n.Children = append(n.Children, c)
			}
		}
		// Deeper leftovers belong to calls whose exit was not seen.
		for i := d + 1; i < len(th.pending); i++ {
			th.pending[i] = nil
		}
	}
	if d == 0 {
		th.pending = th.pending[:0]
		if !t.Entries[e.FuncId] {
			return b // not inside a window (an exit without its entry)
		}
		t.Calls++
		markErrorPath(n)
		if t.ErrorsOnly && !n.Err {
			return b
		}
		t.Shown++
		if t.Perfetto != nil {
			t.Perfetto.AddTree(n)
			return b
		}
		if t.JSON {
			return t.appendJSON(b, n)
		}
		return t.appendText(b, n)
	}
	th.add(d, n)
	return b
}

// Unfinished counts the entry calls that had not returned (their tree is
// not written).
func (t *Tree) Unfinished() int {
	n := 0
	for _, th := range t.threads {
		if e := th.open[0]; e != nil && t.Entries[e.FuncId] {
			n++
		}
	}
	return n
}

func (th *treeThread) add(d int, n *TreeNode) {
	for len(th.pending) <= d {
		th.pending = append(th.pending, nil)
	}
	th.pending[d] = append(th.pending[d], n)
}

// markErrorPath marks the path from root to its error origin.
func markErrorPath(root *TreeNode) *TreeNode {
	if !root.Err {
		return nil
	}
	n := root
	for {
		n.Path = true
		var next *TreeNode
		for _, c := range n.Children {
			if c.Err && c.Exit.Ret == n.Exit.Ret {
				next = c
				break
			}
		}
		if next == nil {
			n.Origin = true
			return n
		}
		n = next
	}
}

// ErrorOrigin returns the node marked as the error origin under n (nil:
// none).
func (n *TreeNode) ErrorOrigin() *TreeNode {
	if n.Origin {
		return n
	}
	for _, c := range n.Children {
		if c.Path {
			return c.ErrorOrigin()
		}
	}
	return nil
}

// args is the event to format a call's arguments from.
func (n *TreeNode) args() *bpfobj.TraceEvent {
	if n.Entry != nil {
		return n.Entry
	}
	return &n.Exit
}

// appendText writes a header line for the entry call (time, CPU, comm,
// TGID/TID), then a line per call, indented two spaces per level:
//
//	! do_sys_openat2(dfd=-100, ...) = -ENOENT  41.200µs
//	!   path_openat(...) = ERR_PTR(-ENOENT)  30.100µs
//	      path_init(...) = 0xffff...  2.000µs
//	!     link_path_walk(...) = -ENOENT  20.000µs  <- error origin
func (t *Tree) appendText(b []byte, root *TreeNode) []byte {
	e := &root.Exit
	b = append(b, "--- "...)
	b = AppendSeconds(b, root.Start()-min(root.Start(), t.Base))
	b = append(b, " cpu "...)
	b = strconv.AppendUint(b, uint64(e.Cpu), 10)
	b = append(b, ' ')
	b = append(b, commBytes(e)...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.Tgid), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(e.Tid), 10)
	b = append(b, " ---\n"...)
	return t.appendTextNode(b, root, 0)
}

func (t *Tree) appendTextNode(b []byte, n *TreeNode, level int) []byte {
	f := t.Table.Lookup(n.Exit.FuncId)
	if n.Path {
		b = append(b, "! "...)
	} else {
		b = append(b, "  "...)
	}
	for i := 0; i < level && i < 32; i++ {
		b = append(b, "  "...)
	}
	b = append(b, t.Table.FuncName(n.Exit.FuncId)...)
	b = AppendArgs(b, f, n.args())
	switch {
	case n.entryOnly:
		b = append(b, ";  /* entry only: "...)
		b = append(b, f.EntryOnly...)
		b = append(b, " */"...)
	default:
		b = append(b, " = "...)
		b = AppendRet(b, f, n.Exit.Ret)
		b = append(b, "  "...)
		if n.Exit.Flags&FlagNoEntry != 0 {
			b = append(b, "(no entry)"...)
		} else {
			b = AppendDuration(b, n.Exit.DurationNs)
		}
	}
	if n.Origin {
		b = append(b, "  <- error origin"...)
	}
	b = append(b, '\n')
	for _, c := range n.Children {
		b = t.appendTextNode(b, c, level+1)
	}
	return b
}

// appendJSON writes one line:
//
//	{"type":"call_tree","ts_ns":..,"cpu":..,"tgid":..,"tid":..,"comm":..,
//	 "func":"do_sys_openat2","ret_str":"-ENOENT","error":true,
//	 "error_origin":"link_path_walk","call_tree":NODE}
//
// NODE: {"func","module"?,"depth","ts_ns" (entry),"args" | "regs"?,
// "truncated"?,"string_errors"?,"values"?,"value_errors"?,"ret","ret_str",
// "duration_ns" | "no_entry":true,
// "entry_only"?,"error"?,"error_path"?,"error_origin"?,"children":[NODE...]};
// its args, regs, ret and values are as in an entry or exit line (Line).
func (t *Tree) appendJSON(b []byte, root *TreeNode) []byte {
	e := &root.Exit
	b = append(b, `{"type":"call_tree","ts_ns":`...)
	b = strconv.AppendUint(b, root.Start(), 10)
	b = appendJSONWhere(b, e)
	b = append(b, `,"func":`...)
	b = appendQuoted(b, t.Table.FuncName(e.FuncId))
	b = append(b, `,"ret_str":"`...)
	b = AppendRet(b, t.Table.Lookup(e.FuncId), e.Ret)
	b = append(b, `","error":`...)
	b = strconv.AppendBool(b, root.Err)
	if o := root.ErrorOrigin(); o != nil {
		b = append(b, `,"error_origin":`...)
		b = appendQuoted(b, t.Table.FuncName(o.Exit.FuncId))
	}
	b = append(b, `,"call_tree":`...)
	b = t.appendJSONNode(b, root)
	return append(b, "}\n"...)
}

func (t *Tree) appendJSONNode(b []byte, n *TreeNode) []byte {
	f := t.Table.Lookup(n.Exit.FuncId)
	a := n.args()
	b = append(b, `{"func":`...)
	if f != nil {
		b = appendQuoted(b, f.Name)
		if f.Module != "" {
			b = append(b, `,"module":`...)
			b = appendQuoted(b, f.Module)
		}
	} else {
		b = appendQuoted(b, t.Table.FuncName(n.Exit.FuncId))
	}
	b = append(b, `,"depth":`...)
	b = strconv.AppendUint(b, uint64(n.Exit.Depth), 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendUint(b, n.Start(), 10)
	b = appendJSONArgs(b, f, a, a.Kind == KindEntry || a.Flags&FlagHasArgs != 0)
	if n.entryOnly {
		b = append(b, `,"entry_only":`...)
		b = strconv.AppendQuote(b, f.EntryOnly)
	} else {
		b = append(b, `,"ret":`...)
		b = appendRetJSON(b, f, n.Exit.Ret)
		b = append(b, `,"ret_str":"`...)
		b = AppendRet(b, f, n.Exit.Ret)
		b = append(b, '"')
		if n.Exit.Flags&FlagNoEntry != 0 {
			b = append(b, `,"no_entry":true`...)
		} else {
			b = append(b, `,"duration_ns":`...)
			b = strconv.AppendUint(b, n.Exit.DurationNs, 10)
		}
	}
	if n.Err {
		b = append(b, `,"error":true`...)
	}
	if n.Path {
		b = append(b, `,"error_path":true`...)
	}
	if n.Origin {
		b = append(b, `,"error_origin":true`...)
	}
	b = append(b, `,"children":[`...)
	for i, c := range n.Children {
		if i > 0 {
			b = append(b, ',')
		}
		b = t.appendJSONNode(b, c)
	}
	return append(b, "]}"...)
}
