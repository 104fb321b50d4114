package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trace"
	"github.com/ftprobe/ftprobe/internal/workload"
)

// entryPatterns are the path walk functions TestEntryOpenFail records
// inside do_sys_openat2. In the per-function trampoline modes (each
// fentry attach costs 1-2 s on arm64 under TCG; on amd64 7.3 the globs'
// 55 trampolines take 46-51 s to attach in fentry and in fsession mode)
// a few exact ones instead of globs matching some 60
// functions: the trees keep the path walk under do_sys_openat2 and
// link_path_walk as the error origin. The globs stay in the one-link
// modes (kprobe.session, the multi pairs, fsession.multi) and in
// kprobe+kretprobe mode, where 55 functions attach in 2-11 s.
func entryPatterns(e *env, mode string) []string {
	if mode == attach.ModeFentryFexit || mode == attach.ModeFSession {
		return []string{"path_openat", "link_path_walk*", "may_open"}
	}
	return []string{"path_*", "link_path_walk*", "lookup_*", "may_open"}
}

// entryModes are the modes of the --entry tests: all on amd64; on arm64,
// where attaching is slow under TCG, kprobe.session (pt_regs, one link)
// and fentry+fexit (trampolines, frames pushed by fexit).
func entryModes(e *env) []string {
	if e.kin.Arch != "arm64" {
		return modes
	}
	return []string{attach.ModeKprobeSession, attach.ModeFentryFexit}
}

// treeNode is a node of a "call_tree" record.
type treeNode struct {
	Func  string `json:"func"`
	Depth int    `json:"depth"`
	TsNs  uint64 `json:"ts_ns"`
	// Args holds the arguments by name, typed from BTF (a string for a
	// `char *` read with --strings).
	Args map[string]any `json:"args"`
	// Ret is typed by the return type: a number for an int or long, a
	// hex string for a pointer (ERR_PTR(-ENOENT) too: RetStr names it).
	Ret      any        `json:"ret"`
	RetStr   string     `json:"ret_str"`
	Duration uint64     `json:"duration_ns"`
	NoEntry  bool       `json:"no_entry"`
	Error    bool       `json:"error"`
	Path     bool       `json:"error_path"`
	Origin   bool       `json:"error_origin"`
	Children []treeNode `json:"children"`
	// Values holds the --arg values by expression.
	Values map[string]any `json:"values"`
}

type treeRecord struct {
	Type        string   `json:"type"`
	Tgid        int      `json:"tgid"`
	Tid         int      `json:"tid"`
	Comm        string   `json:"comm"`
	Func        string   `json:"func"`
	RetStr      string   `json:"ret_str"`
	Error       bool     `json:"error"`
	ErrorOrigin string   `json:"error_origin"`
	Tree        treeNode `json:"call_tree"`
}

// enoent reports whether n returned -ENOENT (an int or long) or
// ERR_PTR(-ENOENT) (a pointer).
func (n *treeNode) enoent() bool {
	return n.RetStr == "-ENOENT" || n.RetStr == "ERR_PTR(-ENOENT)"
}

// walk calls fn for n and every node under it, with its parent (nil for
// the root).
func (n *treeNode) walk(parent *treeNode, fn func(n, parent *treeNode)) {
	fn(n, parent)
	for i := range n.Children {
		n.Children[i].walk(n, fn)
	}
}

var workloadLine = regexp.MustCompile(`workload openfail: pid (\d+) tid (\d+): (\d+) ops`)

// TestEntryOpenFail: ftprobe trace --entry do_sys_openat2 with the path
// walk functions, around `ftprobe workload openfail --count 3`: exactly
// one tree per failed open (--errors keeps only those), rooted at
// do_sys_openat2 returning -ENOENT, with the workload's pid and tid; every
// child one level below its parent and inside its time span; the error
// origin is the call that first returned -ENOENT (its ancestors on the
// marked path all returned it, none of its children did), link_path_walk
// where the mode traces it; the summary counts the entry calls and the
// trees written.
func TestEntryOpenFail(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	for _, mode := range entryModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			start := time.Now()
			pats := entryPatterns(e, mode)
			res, err := e.k.Resolve(pats, []string{"*elem_raw"}, mode, 0)
			require.NoError(t, err, "the path walk functions on %s", e.kin)
			t.Logf("%d functions in %s mode: %v", len(res.Funcs), mode, funcNames(res))
			out := filepath.Join(t.TempDir(), "trees.jsonl")
			// BPF's own hash map lookups (lookup_elem_raw,
			// lookup_nulls_elem_raw) would trace ftprobe's programs.
			args := append([]string{"trace", "--mode", mode, "--output", "json", "-o", out, "--errors", "--strings", "--exclude", "*elem_raw", "--entry", "do_sys_openat2"}, pats...)
			args = append(args, "--", bin, "workload", "openfail", "--path", "/nonexistent/ftprobe-entry", "--count", "3")
			cmd := exec.Command(bin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), stderr.String())
			t.Logf("stderr:\n%s", stderr.String())
			// The command's output goes to ftprobe's stderr (stdout
			// carries the trace).
			m := workloadLine.FindStringSubmatch(stdout.String() + stderr.String())
			require.NotNil(t, m, "workload line: %s", stdout.String())
			pid, _ := strconv.Atoi(m[1])
			tid, _ := strconv.Atoi(m[2])
			trees, sum := readTrees(t, out)
			if len(trees) > 0 {
				t.Logf("first tree: %+v", trees[0])
			}
			// The workload's failed opens, by the file name read at entry;
			// any other failed open of the process (its runtime's) is
			// logged.
			var ours []treeRecord
			for _, r := range trees {
				if r.Tree.Args["filename"] == "/nonexistent/ftprobe-entry" {
					assert.EqualValues(t, -100, r.Tree.Args["dfd"], "dfd = AT_FDCWD")
					ours = append(ours, r)
				} else {
					t.Logf("another failed open of the process: %+v", r.Tree.Args)
				}
			}
			require.Len(t, ours, 3, "one tree per failed open (--errors)")
			for i, r := range ours {
				assertOpenFailTree(t, i, r, pid, tid)
			}
			require.NotNil(t, sum)
			entry, _ := sum["entry"].(map[string]any)
			require.NotNil(t, entry, "summary entry account")
			assert.GreaterOrEqual(t, num(entry["entry_calls"]), int64(3), "the failed opens and the command's own")
			assert.EqualValues(t, len(trees), num(entry["trees_written"]))
			t.Logf("entry account: %v", entry)
			assert.Contains(t, stderr.String(), "--entry: ")
			assertNothingAttached(t)
			t.Logf("%s: %s", mode, time.Since(start).Round(time.Millisecond))
		})
	}
}

// assertOpenFailTree asserts tree i of TestEntryOpenFail, r: a call tree of
// the workload's pid and tid rooted at do_sys_openat2 returning -ENOENT,
// each child one level below its parent and inside its time span, and
// its error origin the call that first returned -ENOENT.
func assertOpenFailTree(t *testing.T, i int, r treeRecord, pid, tid int) {
	t.Helper()
	assert.Equal(t, "call_tree", r.Type)
	assert.Equal(t, pid, r.Tgid, "tree %d: the workload's pid", i)
	assert.Equal(t, tid, r.Tid, "tree %d: the workload's tid", i)
	assert.Equal(t, "do_sys_openat2", r.Func)
	assert.True(t, r.Error)
	root := &r.Tree
	assert.Equal(t, "do_sys_openat2", root.Func)
	assert.Equal(t, 0, root.Depth)
	assert.Equal(t, -2.0, root.Ret, "do_sys_openat2 returns a long")
	assert.Equal(t, "-ENOENT", root.RetStr)
	assert.NotEmpty(t, root.Children, "tree %d: the path walk under do_sys_openat2", i)
	var origin *treeNode
	var firstENOENT *treeNode
	var names []string
	root.walk(nil, func(n, p *treeNode) {
		names = append(names, n.Func)
		assert.False(t, n.NoEntry, "%s: every call has its entry", n.Func)
		if p != nil {
			assert.Equal(t, p.Depth+1, n.Depth, "%s under %s", n.Func, p.Func)
			assert.GreaterOrEqual(t, n.TsNs, p.TsNs, "%s starts inside %s", n.Func, p.Func)
			assert.LessOrEqual(t, n.TsNs+n.Duration, p.TsNs+p.Duration, "%s ends inside %s", n.Func, p.Func)
		}
		if n.Origin {
			assert.Nil(t, origin, "one origin")
			origin = n
		}
		if n.Path {
			assert.True(t, n.enoent(), "%s on the error path returns -ENOENT: %v %s", n.Func, n.Ret, n.RetStr)
		}
		if n.enoent() && n.Error && (firstENOENT == nil || n.TsNs+n.Duration < firstENOENT.TsNs+firstENOENT.Duration) {
			firstENOENT = n
		}
	})
	require.NotNil(t, origin, "tree %d: an error origin among %v", i, names)
	assert.Equal(t, r.ErrorOrigin, origin.Func)
	assert.Same(t, firstENOENT, origin, "tree %d: the origin is the first call that returned -ENOENT (%s), not %s", i, firstENOENT.Func, origin.Func)
	for _, c := range origin.Children {
		assert.False(t, c.enoent(), "the origin's child %s: %v %s", c.Func, c.Ret, c.RetStr)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "link_path_walk") {
			assert.True(t, strings.HasPrefix(origin.Func, "link_path_walk"), "tree %d: link_path_walk is traced, origin %s", i, origin.Func)
			break
		}
	}
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(b, []byte("\n"))
	return string(l)
}

func funcNames(res *symbols.Resolution) []string {
	var out []string
	for _, f := range res.Funcs {
		out = append(out, f.Display())
	}
	return out
}

// TestEntryNoWindow: the same patterns with an entry function the
// workload never calls (vfs_fsync) while it walks paths: nothing is
// recorded, no tree, and the rejected calls are counted; nothing counted
// as lost or in flight (the exits of rejected calls are dropped silently).
func TestEntryNoWindow(t *testing.T) {
	e := lab(t)
	for _, mode := range entryModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			start := time.Now()
			o := trace.Options{Patterns: entryPatterns(e, mode), Entries: []string{"vfs_fsync"}, Mode: mode}
			evs, sum := traceInThreadWith(t, o, func() {
				_, err := workload.Run(workload.Spec{Kind: "openfail", Path: "/nonexistent/ftprobe-nowindow", Count: 3})
				require.NoError(t, err)
			})
			assert.Empty(t, evs, "nothing outside a window")
			require.NotNil(t, sum.Entry)
			assert.Zero(t, sum.Entry.Calls)
			assert.Greater(t, sum.Entry.WindowRejected, uint64(0), "the path walk calls were rejected")
			assert.Zero(t, sum.Events)
			assert.Zero(t, sum.Losses.NoEntry, "rejected calls' exits are not exits without entry")
			assert.Zero(t, sum.Losses.InFlight())
			assertNoLosses(t, sum.Losses)
			assertNothingAttached(t)
			t.Logf("%s: %s", mode, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestEntryThreadExit: a process killed by SIGKILL dies inside get_signal
// (get_signal -> do_group_exit -> do_exit): with --entry get_signal, each
// of its threads that dies there is counted as exiting inside a window,
// and its get_signal call, which never returns, left unfinished (no tree).
func TestEntryThreadExit(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	mode := attach.ModeKprobeSession
	if e.kin.Arch != "arm64" {
		mode = attach.ModeFentryFexit
	}
	needMode(t, e, mode)
	start := time.Now()
	child := exec.Command(bin, "workload", "syscall", "--count", "100000000", "--interval", "1ms", "--quiet")
	// No signal but the SIGKILL: the Go runtime's preemption signal
	// (SIGURG, sent when a goroutine seems to run 10 ms, as when a loaded
	// host stalls the vCPU) would be a get_signal call that returns: an
	// entry call and a tree.
	godebug := "asyncpreemptoff=1"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	child.Env = append(os.Environ(), "GODEBUG="+godebug)
	require.NoError(t, child.Start())
	defer child.Process.Kill()
	var log bytes.Buffer
	evs, sum := traceAround(t, trace.Options{Patterns: []string{"do_group_exit"}, Entries: []string{"get_signal"}, Mode: mode,
		Filters: attach.Filters{TGID: uint32(child.Process.Pid)}, Log: &log}, func() {
		require.NoError(t, child.Process.Signal(syscall.SIGKILL))
		child.Wait() // reaped: every thread went through do_exit; trace.Run drains after detach
	})
	t.Logf("log:\n%s", log.String())
	require.NotNil(t, sum.Entry)
	assert.GreaterOrEqual(t, sum.Entry.ThreadExits, uint64(1), "the killed process's threads died inside get_signal")
	assert.Contains(t, log.String(), plural.Count(sum.Entry.ThreadExits, "thread")+" exited inside one")
	// Their get_signal calls never return: no tree is written, and user
	// space says how many were left open.
	assert.Empty(t, evs, "no tree of a call that never returned")
	assert.GreaterOrEqual(t, sum.Entry.Unfinished, 1)
	assert.Zero(t, sum.Entry.Calls)
	assertNothingAttached(t)
	t.Logf("%s: %s", mode, time.Since(start).Round(time.Millisecond))
}

// TestEntryBadInput: --entry patterns the running kernel refuses are bad
// input (exit 2), one line naming the function, nothing attached.
func TestEntryBadInput(t *testing.T) {
	e := lab(t)
	for _, c := range []struct {
		o   trace.Options
		msg string
	}{
		{trace.Options{Entries: []string{"no_such_function_xyz"}}, "trace --entry no_such_function_xyz: no such function"},
		{trace.Options{Entries: []string{"do_sys_openat2"}, Excludes: []string{"do_sys_*"}}, "--exclude do_sys_* removed every one"},
		{trace.Options{Entries: []string{"do_exit"}}, "trace --entry do_exit: do_exit never returns (noreturn)"},
		{trace.Options{Entries: []string{"_printk"}, Mode: attach.ModeFentryFexit}, "trace --entry _printk: function cannot be traced: _printk in fentry+fexit mode: varargs"},
	} {
		o := c.o
		o.Patterns, o.Symbols, o.Log, o.Out = []string{"vfs_read"}, e.k, testLog{t}, io.Discard
		if o.Mode == "" {
			o.Mode = attach.ModeKprobeMulti
		}
		_, err := trace.Run(context.Background(), o)
		require.Error(t, err, "%v", c.o.Entries)
		class, _ := trace.ClassOf(err)
		assert.Equal(t, trace.ClassBadInput, class, "%v", err)
		assert.Contains(t, err.Error(), c.msg)
		assert.NotContains(t, err.Error(), "\n")
	}
	assertNothingAttached(t)
}

// runEntryCLI runs `ftprobe ARGS -- ftprobe workload openfail --path
// path --count 3` and returns ftprobe's stderr and the workload's pid and
// tid (from its report line).
func runEntryCLI(t *testing.T, bin string, args []string, path string) (stderr string, pid, tid int) {
	t.Helper()
	args = append(args, "--", bin, "workload", "openfail", "--path", path, "--count", "3")
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%v: %s", args, errb.String())
	t.Logf("stderr:\n%s", errb.String())
	m := workloadLine.FindStringSubmatch(out.String() + errb.String())
	require.NotNil(t, m, "workload line: %s", out.String())
	pid, _ = strconv.Atoi(m[1])
	tid, _ = strconv.Atoi(m[2])
	return errb.String(), pid, tid
}

// perfettoEvent is one event of a Perfetto (Chrome JSON) trace.
type perfettoEvent struct {
	Name, Ph string
	Ts, Dur  float64 // µs, to the ns
	Pid, Tid int
	Args     map[string]any
}

// usNs converts a Perfetto time (µs with 3 decimals) back to ns.
func usNs(us float64) int64 { return int64(math.Round(us * 1e3)) }

// TestEntryPerfetto: trace --entry do_sys_openat2 --errors --output
// perfetto around `ftprobe workload openfail --count 3`: the workload's
// thread has one named track; exactly one root slice per failed open of
// its path (do_sys_openat2, -ENOENT, entry_call, on the error path), the
// path walk nested inside it (each slice inside the last one a level up,
// in ns), exactly one error origin per root, named by the root, returning
// -ENOENT, link_path_walk where the mode traces it.
func TestEntryPerfetto(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	mode := attach.ModeKprobeSession
	needMode(t, e, mode)
	start := time.Now()
	pats := entryPatterns(e, mode)
	path := "/nonexistent/ftprobe-perfetto"
	out := filepath.Join(t.TempDir(), "trees.json")
	args := append([]string{"trace", "--mode", mode, "--output", "perfetto", "-o", out, "--errors", "--strings", "--exclude", "*elem_raw", "--entry", "do_sys_openat2"}, pats...)
	stderr, pid, tid := runEntryCLI(t, bin, args, path)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []perfettoEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &doc), firstLine(b))
	var track []string
	type root struct {
		s      perfettoEvent
		kids   int
		origin []perfettoEvent
	}
	var ours []*root
	var cur *root
	var open []perfettoEvent // the last slice at each depth on the workload's thread
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "M" && ev.Tid == tid {
			track = append(track, fmt.Sprint(ev.Args["name"]))
		}
		if ev.Ph != "X" || ev.Tid != tid {
			continue
		}
		assert.Equal(t, pid, ev.Pid, "%s: the workload's pid", ev.Name)
		d := int(ev.Args["depth"].(float64))
		if d == 0 {
			cur = nil
			if a, _ := ev.Args["args"].(map[string]any); ev.Name == "do_sys_openat2" && a["filename"] == path {
				cur = &root{s: ev}
				ours = append(ours, cur)
			} else {
				t.Logf("another failed open of the process: %s%v", ev.Name, ev.Args["args"])
			}
		} else {
			require.Greater(t, len(open), d-1, "%s at depth %d: no slice a level up", ev.Name, d)
			p := open[d-1]
			assert.GreaterOrEqual(t, usNs(ev.Ts), usNs(p.Ts), "%s starts inside %s", ev.Name, p.Name)
			assert.LessOrEqual(t, usNs(ev.Ts)+usNs(ev.Dur), usNs(p.Ts)+usNs(p.Dur), "%s ends inside %s", ev.Name, p.Name)
			if cur != nil {
				cur.kids++
				if ev.Args["error_origin"] == true {
					cur.origin = append(cur.origin, ev)
				}
			}
		}
		open = append(open[:min(d, len(open))], ev)
	}
	assert.Equal(t, []string{fmt.Sprintf("ftprobe %d", tid)}, track, "one track for the workload's thread, named by comm and tid")
	require.Len(t, ours, 3, "one root slice per failed open of %s (--errors)", path)
	linkTraced := strings.Contains(string(b), `"name":"link_path_walk`)
	for i, r := range ours {
		a := r.s.Args
		assert.Equal(t, "-ENOENT", a["ret_str"], "root %d", i)
		assert.EqualValues(t, -2, a["ret"], "root %d", i)
		assert.EqualValues(t, -100, a["args"].(map[string]any)["dfd"], "root %d: dfd = AT_FDCWD", i)
		assert.Equal(t, "ENOENT", a["errno"])
		assert.Equal(t, true, a["entry_call"])
		assert.Equal(t, true, a["error_path"])
		assert.Equal(t, mode, a["mode"])
		assert.Greater(t, r.kids, 0, "root %d: the path walk nested under do_sys_openat2", i)
		require.Len(t, r.origin, 1, "root %d: one error origin", i)
		o := r.origin[0]
		assert.Equal(t, a["error_origin_func"], o.Name)
		assert.Equal(t, true, o.Args["error_path"])
		assert.Contains(t, []any{"-ENOENT", "ERR_PTR(-ENOENT)"}, o.Args["ret_str"], "the origin %s returned the root's error", o.Name)
		if linkTraced {
			assert.True(t, strings.HasPrefix(o.Name, "link_path_walk"), "root %d: link_path_walk is traced, origin %s", i, o.Name)
		}
		t.Logf("root %d: %s%v = %s, %d slices under it, origin %s", i, r.s.Name, a["args"], a["ret_str"], r.kids, o.Name)
	}
	assert.Contains(t, stderr, "--entry: ")
	assertNothingAttached(t)
	t.Logf("%s: %s", mode, time.Since(start).Round(time.Millisecond))
}

// TestEntryFilterWindow: a --filter scoped to the entry function gates
// the window: with `do_sys_openat2:filename == PATH` only the workload's
// 3 failed opens of PATH open one (3 entry calls, 3 trees, each the
// workload's thread opening PATH), the process's other opens are
// rejected by the filter (filter_rejected) and their path walk by the
// window (window_rejected); with a PATH nobody opens no window opens (0
// entry calls, no tree), the filter rejects exactly 3 calls more and the
// window exactly the calls the 3 trees held. In
// kprobe.session mode (a rejected entry skips its return)
// and fentry+fexit (a memory-reading predicate: a rejected call inside another
// traced call pushes a frame marked rejected, popped by fexit; on an
// idle thread, as do_sys_openat2's are, nothing is pushed and the fexit,
// finding no frame, drops the exit).
func TestEntryFilterWindow(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	path := "/nonexistent/ftprobe-window"
	ms := []string{attach.ModeKprobeSession, attach.ModeFentryFexit}
	if e.kin.Arch == "arm64" {
		// fentry+fexit there costs minutes of the arm64 7.3 full tier
		// (four trampoline programs, loaded and attached twice under
		// TCG): kprobe.session covers the gate on arm64, both modes on
		// amd64.
		ms = ms[:1]
	}
	for _, mode := range ms {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			start := time.Now()
			pats := entryPatterns(e, mode)
			if mode == attach.ModeFentryFexit {
				// With --filter each of some 55 trampoline programs took
				// about 10 s to load and attach under TCG (amd64 7.3,
				// 9m40s): a few exact functions.
				pats = []string{"path_openat", "link_path_walk*", "may_open"}
			}
			// Warm the dentry cache (a negative dentry for path): every
			// open of both runs then walks the same calls.
			_, err := os.Open(path)
			require.ErrorIs(t, err, os.ErrNotExist)
			rejected, winRejected := map[bool]int64{}, map[bool]int64{}
			inside := int64(0) // calls under the roots of the matching trees
			for _, match := range []bool{true, false} {
				want := path
				if !match {
					want = "/nonexistent/ftprobe-nobody"
				}
				out := filepath.Join(t.TempDir(), "trees.jsonl")
				// (--arg: --strings does not combine with --filter.)
				args := append([]string{"trace", "--mode", mode, "--output", "json", "-o", out, "--arg", "do_sys_openat2:filename", "--exclude", "*elem_raw",
					"--entry", "do_sys_openat2", "--filter", `do_sys_openat2:filename == "` + want + `"`}, pats...)
				_, pid, tid := runEntryCLI(t, bin, args, path)
				trees, sum := readTrees(t, out)
				require.NotNil(t, sum, "summary line")
				entry, _ := sum["entry"].(map[string]any)
				require.NotNil(t, entry, "summary entry account")
				t.Logf("match %v: %d trees, entry %v, filter_rejected %v", match, len(trees), entry, sum["filter_rejected"])
				rejected[match] = num(sum["filter_rejected"])
				winRejected[match] = num(entry["window_rejected"])
				assert.Greater(t, num(entry["window_rejected"]), int64(0), "the path walk outside a window (match %v)", match)
				if !match {
					assert.Empty(t, trees, "no window opened")
					assert.EqualValues(t, 0, num(entry["entry_calls"]))
					assert.EqualValues(t, 0, num(entry["trees_written"]))
					continue
				}
				require.Len(t, trees, 3, "one tree per open of %s", path)
				assert.EqualValues(t, 3, num(entry["entry_calls"]), "only the matching calls open a window")
				assert.EqualValues(t, 3, num(entry["trees_written"]))
				for i, r := range trees {
					assert.Equal(t, pid, r.Tgid, "tree %d", i)
					assert.Equal(t, tid, r.Tid, "tree %d", i)
					assert.Equal(t, "do_sys_openat2", r.Func)
					assert.Equal(t, "-ENOENT", r.RetStr)
					require.Len(t, r.Tree.Values, 1, "tree %d: the filename (--arg)", i)
					for _, v := range r.Tree.Values {
						assert.Equal(t, path, v, "tree %d: the filename the filter kept", i)
					}
					assert.NotEmpty(t, r.Tree.Children, "tree %d: the path walk inside the window", i)
					r.Tree.walk(nil, func(n, p *treeNode) {
						if p != nil {
							inside++
						}
					})
				}
			}
			assert.Equal(t, rejected[true]+3, rejected[false], "the 3 opens of %s rejected when the filter names another path", path)
			assert.Equal(t, winRejected[true]+inside, winRejected[false], "the %d calls inside the 3 opens rejected by the window when the filter names another path", inside)
			assertNothingAttached(t)
			t.Logf("%s: %s", mode, time.Since(start).Round(time.Millisecond))
		})
	}
}

// readTrees reads a --entry --output json file: its call_tree records and
// its summary line (nil when absent).
func readTrees(t *testing.T, file string) ([]treeRecord, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var trees []treeRecord
	var sum map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, `"type":"summary"`) {
			sum = decodeLine(t, l)
			continue
		}
		var r treeRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		trees = append(trees, r)
	}
	return trees, sum
}
