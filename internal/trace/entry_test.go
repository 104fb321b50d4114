package trace

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TestPlanEntry: --entry functions are resolved and attached with the
// patterns, and only they carry the entry flag (attach.Options.Entries),
// in a mode asked for, in auto mode and in auto mode's mixed fallback.
func TestPlanEntry(t *testing.T) {
	for _, mode := range []string{"", attach.ModeFentryFexit, attach.ModeKprobeMulti} {
		fk := &fakeKernel{}
		o := Options{Patterns: []string{"vfs_*"}, Entries: []string{"do_sys_openat2"}, Mode: mode}
		_, res, _, err := testPlan(t, "amd64-7.3", o, fk)
		require.NoError(t, err, mode)
		require.Len(t, fk.calls, 1)
		c := fk.calls[0]
		all := append(append([]*symbols.Func{}, c.Funcs...), c.MultiFuncs...)
		var entries []string
		for _, f := range all {
			if c.Entries[f.ID] {
				entries = append(entries, f.Name)
			}
		}
		assert.Equal(t, []string{"do_sys_openat2"}, entries, mode)
		assert.Contains(t, names(res.Funcs), "vfs_read", mode)
		assert.Contains(t, names(res.Funcs), "do_sys_openat2", mode)
	}
}

// TestPlanEntryErrors: an --entry pattern that matches nothing, only
// excluded functions, a function that never returns or one the mode
// cannot trace is bad input naming it, and nothing is opened.
func TestPlanEntryErrors(t *testing.T) {
	for _, c := range []struct {
		o    Options
		is   error
		want string
	}{
		{Options{Patterns: []string{"vfs_*"}, Entries: []string{"nosuch"}}, symbols.ErrNoMatch, `trace --entry nosuch: no such function "nosuch": not in kallsyms`},
		{Options{Patterns: []string{"vfs_*"}, Entries: []string{"nosuch"}, Mode: attach.ModeFentryFexit}, symbols.ErrNoMatch, `trace --entry nosuch: no such function "nosuch"`},
		{Options{Patterns: []string{"vfs_*"}, Entries: []string{"do_sys_openat2"}, Excludes: []string{"do_sys_*"}}, symbols.ErrNoMatch, `trace --entry do_sys_openat2: no such function "do_sys_openat2": it matches 1 kallsyms entries, but --exclude do_sys_* removed every one`},
		{Options{Patterns: []string{"vfs_*"}, Entries: []string{"do_exit"}}, nil, "trace --entry do_exit: do_exit never returns (noreturn): its calls would open a window that never closes"},
		{Options{Patterns: []string{"vfs_*"}, Entries: []string{"_printk"}, Mode: attach.ModeFentryFexit}, symbols.ErrUntraceable, "trace --entry _printk: function cannot be traced: _printk in fentry+fexit mode: varargs prototype"},
	} {
		fk := &fakeKernel{}
		_, _, _, err := testPlan(t, "amd64-7.3", c.o, fk)
		require.Error(t, err, "%+v", c.o)
		assert.Equal(t, ClassBadInput, classOf(err), err)
		if c.is != nil {
			assert.ErrorIs(t, err, c.is)
		}
		assert.Contains(t, err.Error(), c.want)
		assert.NotContains(t, err.Error(), "\n")
		assert.Empty(t, fk.calls, "nothing opened")
	}
}

// TestCheckEntries: what --entry does not combine with, and --errors
// moved from the kernel (every call) to the trees (entry calls).
func TestCheckEntries(t *testing.T) {
	o := Options{Entries: []string{"do_sys_openat2"}, Filters: attach.Filters{ErrorsOnly: true}}
	require.NoError(t, o.CheckEntries())
	assert.False(t, o.Filters.ErrorsOnly, "not decided per call in the kernel")
	assert.True(t, o.entryErrors)
	require.NoError(t, (&Options{Entries: []string{"do_sys_openat2"}, Output: "perfetto"}).CheckEntries(), "the trees as nested slices")
	for _, bad := range []Options{
		{Quiet: true}, {Summary: true}, {Hist: true},
		{Filters: attach.Filters{MinDuration: 1}}, {Graph: true}, {Entries: []string{"["}},
	} {
		if bad.Entries == nil {
			bad.Entries = []string{"do_sys_openat2"}
		}
		assert.Error(t, bad.CheckEntries(), "%+v", bad)
	}
}

// openFail is one failed open as the kernel sends it with --entry
// do_sys_openat2: ext4_file_open (depth 1) fails with -EACCES, then a
// second ext4_file_open fails with -ENOENT, and do_sys_openat2 returns
// -ENOENT: the second child is the error origin.
func openFail(ts uint64) [][]byte {
	return [][]byte{
		entryRec(0, 0, ts, 0xffffffffffffff9c, 0xffffe2a627bc, 0),
		entryRec(1, 1, ts+1000, 0x1, 0x2),
		exitRec(1, 1, ts+2000, 1000, -13),
		entryRec(1, 1, ts+3000, 0x3, 0x4),
		exitRec(1, 1, ts+4500, 1500, -2),
		exitRec(0, 0, ts+6000, 6000, -2),
	}
}

// TestPipelineEntryTree: with --entry each entry call is one tree, the
// path to the error origin marked; --errors keeps only the failed entry
// calls; the summary accounts for the entry calls and the window.
func TestPipelineEntryTree(t *testing.T) {
	recs := append([][]byte{commRec("workload")}, openFail(0)...)
	recs = append(recs, openCall()[1:]...) // a successful open: do_sys_openat2 = 4
	r := newTestRun(Options{Entries: []string{"do_sys_openat2"}}, recs...)
	r.tr.losses.WindowRejected, r.tr.losses.WindowExits = 7, 1
	sum, err := r.run(true)
	require.NoError(t, err)
	out := r.out.String()
	assert.Equal(t,
		"--- 0.000000 cpu 1 workload 105/106 ---\n"+
			"! do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) = -ENOENT  6.000µs\n"+
			"    ext4_file_open [ext4](inode=0x1, filp=0x2) = -EACCES  1.000µs\n"+
			"!   ext4_file_open [ext4](inode=0x3, filp=0x4) = -ENOENT  1.500µs  <- error origin\n"+
			"--- 0.000000 cpu 1 workload 105/106 ---\n"+
			"  do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) = 4  3.066ms\n"+
			"    ext4_file_open [ext4](inode=0xffff000012340000, filp=0xffff000056780000) = -ENOENT  1.500µs\n", out)
	require.NotNil(t, sum.Entry)
	assert.Equal(t, EntrySummary{Calls: 2, Shown: 2, WindowRejected: 7, ThreadExits: 1}, *sum.Entry)
	assert.Contains(t, r.log.String(), "--entry: 2 entry calls (2 trees written, 0 unfinished), 7 calls outside them not recorded, 1 thread exited inside one")

	// --errors: the successful open's tree is left out; JSON.
	r = newTestRun(Options{Entries: []string{"do_sys_openat2"}, Output: "json", Filters: attach.Filters{ErrorsOnly: true}}, recs...)
	require.NoError(t, r.o.CheckEntries())
	sum, err = r.run(true)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(r.out.String(), "\n"), "\n")
	require.Len(t, lines, 2, r.out.String())
	var tree struct {
		Type, Func, RetStr string
		Tgid, Tid          uint32
		Error              bool
		ErrorOrigin        string `json:"error_origin"`
		CallTree           struct {
			Func     string
			Depth    int
			Ret      int64
			Error    bool
			Path     bool `json:"error_path"`
			Children []struct {
				Func     string
				Depth    int
				Ret      int64
				Path     bool   `json:"error_path"`
				Origin   bool   `json:"error_origin"`
				Duration uint64 `json:"duration_ns"`
				Args     map[string]any
			}
		} `json:"call_tree"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &tree), lines[0])
	assert.Equal(t, "call_tree", tree.Type)
	assert.Equal(t, "do_sys_openat2", tree.Func)
	assert.Equal(t, "ext4_file_open [ext4]", tree.ErrorOrigin)
	assert.True(t, tree.Error)
	assert.Equal(t, uint32(testTid), tree.Tid)
	ct := tree.CallTree
	assert.Equal(t, int64(-2), ct.Ret)
	assert.True(t, ct.Path)
	require.Len(t, ct.Children, 2)
	assert.Equal(t, 1, ct.Children[0].Depth)
	assert.False(t, ct.Children[0].Path)
	assert.True(t, ct.Children[1].Origin)
	assert.Equal(t, uint64(1500), ct.Children[1].Duration)
	assert.Equal(t, map[string]any{"inode": "0x3", "filp": "0x4"}, ct.Children[1].Args)
	assert.Contains(t, lines[1], `"type":"summary"`)
	assert.Contains(t, lines[1], `"entry":{"entry_calls":2,"trees_written":1,`)
	assert.Equal(t, uint64(1), sum.Entry.Shown)
}

// perfettoSlice is one event of a Perfetto (Chrome JSON) trace.
type perfettoSlice struct {
	Name, Ph string
	Ts, Dur  float64 // µs
	Pid, Tid uint32
	Args     map[string]any
}

// ns converts a Perfetto time (µs, 3 decimals) back to ns.
func ns(us float64) int64 { return int64(math.Round(us * 1e3)) }

// checkNesting asserts that each slice at depth d > 0 lies inside the
// last slice of depth d-1 of its thread that started before it, and
// returns the slices' names by depth, in start order.
func checkNesting(t *testing.T, evs []perfettoSlice) []string {
	t.Helper()
	open := map[uint32][]perfettoSlice{} // by tid: the last slice at each depth
	var got []string
	for _, e := range evs {
		if e.Ph != "X" {
			continue
		}
		d := int(e.Args["depth"].(float64))
		st := open[e.Tid]
		if d > 0 {
			require.Greater(t, len(st), d-1, "%s: no parent at depth %d", e.Name, d-1)
			p := st[d-1]
			assert.GreaterOrEqual(t, ns(e.Ts), ns(p.Ts), "%s starts inside %s", e.Name, p.Name)
			assert.LessOrEqual(t, ns(e.Ts)+ns(e.Dur), ns(p.Ts)+ns(p.Dur), "%s ends inside %s", e.Name, p.Name)
		}
		open[e.Tid] = append(st[:d], e)
		got = append(got, strings.Repeat(" ", d)+e.Name)
	}
	return got
}

// TestPipelineEntryPerfetto: with --output perfetto the trees are nested
// slices on their thread's track, the path to the error origin marked;
// --errors keeps only the failed entry call's slices.
func TestPipelineEntryPerfetto(t *testing.T) {
	recs := append([][]byte{commRec("workload")}, openFail(0)...)
	recs = append(recs, // a successful open after it: do_sys_openat2 = 4
		entryRec(0, 0, 10000, 0xffffffffffffff9c, 0xffffe2a627bc, 0),
		entryRec(1, 1, 11000, 0x5, 0x6),
		exitRec(1, 1, 12500, 1500, -2),
		exitRec(0, 0, 20000, 10000, 4))
	for _, errorsOnly := range []bool{false, true} {
		r := newTestRun(Options{Entries: []string{"do_sys_openat2"}, Output: "perfetto", Filters: attach.Filters{ErrorsOnly: errorsOnly}}, recs...)
		require.NoError(t, r.o.CheckEntries())
		sum, err := r.run(true)
		require.NoError(t, err)
		var doc struct{ TraceEvents []perfettoSlice }
		require.NoError(t, json.Unmarshal(r.out.Bytes(), &doc), r.out.String())
		evs := doc.TraceEvents
		require.NotEmpty(t, evs)
		assert.Equal(t, "M", evs[0].Ph)
		assert.Equal(t, "workload 106", evs[0].Args["name"], "one track per thread, named")
		want := []string{"do_sys_openat2", " ext4_file_open [ext4]", " ext4_file_open [ext4]"}
		if !errorsOnly {
			want = append(want, "do_sys_openat2", " ext4_file_open [ext4]")
		}
		assert.Equal(t, want, checkNesting(t, evs[1:]), "errors only: %v", errorsOnly)
		root, acc, origin := evs[1], evs[2], evs[3]
		assert.Equal(t, uint32(testTid), root.Tid)
		assert.Equal(t, uint32(105), root.Pid)
		assert.Equal(t, int64(6000), ns(root.Dur))
		assert.Equal(t, map[string]any{"dfd": -100.0, "filename": "0xffffe2a627bc", "how": nil}, root.Args["args"])
		assert.Equal(t, -2.0, root.Args["ret"])
		assert.Equal(t, "-ENOENT", root.Args["ret_str"])
		assert.Equal(t, "ENOENT", root.Args["errno"])
		assert.Equal(t, true, root.Args["entry_call"])
		assert.Equal(t, true, root.Args["error_path"])
		assert.Equal(t, "ext4_file_open [ext4]", root.Args["error_origin_func"])
		assert.Nil(t, root.Args["error_origin"])
		assert.Equal(t, "-EACCES", acc.Args["ret_str"])
		assert.Equal(t, "EACCES", acc.Args["errno"])
		assert.Nil(t, acc.Args["error_path"], "another error: not on the path")
		assert.Equal(t, int64(3000), ns(origin.Ts)-ns(root.Ts))
		assert.Equal(t, int64(1500), ns(origin.Dur))
		assert.Equal(t, map[string]any{"inode": "0x3", "filp": "0x4"}, origin.Args["args"])
		assert.Equal(t, true, origin.Args["error_origin"])
		assert.Equal(t, true, origin.Args["error_path"])
		assert.Nil(t, origin.Args["entry_call"])
		if !errorsOnly {
			ok := evs[4]
			assert.Equal(t, int64(10000), ns(ok.Ts)-ns(root.Ts))
			assert.Equal(t, int64(10000), ns(ok.Dur))
			assert.Equal(t, 4.0, ok.Args["ret"])
			assert.Nil(t, ok.Args["errno"])
			assert.Nil(t, ok.Args["error_path"])
			assert.Equal(t, "-ENOENT", evs[5].Args["ret_str"])
			assert.Nil(t, evs[5].Args["error_origin"], "the successful call has no error path")
		}
		require.NotNil(t, sum.Entry)
		assert.Equal(t, uint64(2), sum.Entry.Calls)
		assert.Equal(t, uint64(map[bool]int{false: 2, true: 1}[errorsOnly]), sum.Entry.Shown)
	}
}

// TestPipelineEntryUnfinished: an entry call still open at the end has
// no tree and is said so; calls outside a window that reach user space
// anyway (an exit at depth 0 of a non-entry function) make no tree.
func TestPipelineEntryUnfinished(t *testing.T) {
	r := newTestRun(Options{Entries: []string{"do_sys_openat2"}}, commRec("workload"),
		exitRecFlags(1, 0, 10, 0, -2, 1), // ext4_file_open: exit without entry, not an entry function
		entryRec(0, 0, 100, 1, 2, 3))
	sum, err := r.run(true)
	require.NoError(t, err)
	assert.Empty(t, r.out.String())
	assert.Equal(t, EntrySummary{Unfinished: 1}, *sum.Entry)
	assert.Contains(t, r.log.String(), "ftprobe: --entry: 1 entry calls had not returned when the trace stopped (no tree written)")
}

// TestEntriesAttached: a trace whose entry functions all failed to attach
// is bad input naming them and the reason.
func TestEntriesAttached(t *testing.T) {
	o := Options{Entries: []string{"do_sys_openat2"}}
	f := &symbols.Func{ID: 0, Name: "do_sys_openat2"}
	tr := &attach.Tracer{Mode: attach.ModeKprobeMulti, Attached: []*symbols.Func{{ID: 1, Name: "vfs_read"}}, Failed: []attach.Failure{{Func: f, Err: errors.New("no such address")}}}
	err := o.checkEntriesAttached(tr)
	require.Error(t, err)
	assert.Equal(t, ClassBadInput, classOf(err))
	assert.EqualError(t, err, "trace --entry do_sys_openat2 in kprobe.multi+kretprobe.multi mode: no entry function attached (do_sys_openat2: no such address)")
	tr.Attached = append(tr.Attached, f)
	assert.NoError(t, o.checkEntriesAttached(tr))
	assert.NoError(t, (&Options{}).checkEntriesAttached(&attach.Tracer{}))
}
