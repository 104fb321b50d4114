package kernel

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/trace"
	"github.com/ftprobe/ftprobe/internal/workload"
)

// TestArgFilter: --arg values and --filter predicates decided in the
// kernel, in every mode. Three filters, each on the function it names: a
// one-byte vfs_read (at entry), a do_sys_openat2 failing with ENOENT (on
// ret: every entry deferred to its exit), a vfs_write that never happens.
// Exactly the workload's one-byte reads and failed opens come out, with
// the file name through three pointers and the path from user memory;
// every other call of the thread is counted as rejected.
func TestArgFilter(t *testing.T) {
	e := lab(t)
	for _, mode := range exprModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			o := trace.Options{Patterns: []string{"vfs_read", "do_sys_openat2", "vfs_write"}, Mode: mode,
				Args:       []string{"vfs_read:file->f_path.dentry->d_name.name", "vfs_read:count", "do_sys_openat2:filename"},
				Predicates: []string{"vfs_read:count == 1", "do_sys_openat2:ret == -ENOENT", "vfs_write:count == 12345"}}
			evs, sum := traceInThreadWith(t, o, func() {
				_, err := workload.Run(workload.Spec{Kind: "read", Path: "/etc/hostname", Count: 3}) // 1 open, 3 one-byte reads
				require.NoError(t, err)
				fd, err := unix.Open("/etc/hostname", unix.O_RDONLY, 0) // open: rejected at exit
				require.NoError(t, err)
				unix.Read(fd, make([]byte, 4)) // 4 bytes: rejected at entry
				unix.Close(fd)
				_, err = workload.Run(workload.Spec{Kind: "openfail", Path: "/nonexistent/ftprobe-expr", Count: 2})
				require.NoError(t, err)
				fd, err = unix.Open("/dev/null", unix.O_WRONLY, 0) // rejected at exit
				require.NoError(t, err)
				unix.Write(fd, []byte("abc")) // rejected at entry
				unix.Close(fd)
			})
			reads := filterEvents(evs, "exit", "vfs_read")
			opens := filterEvents(evs, "exit", "do_sys_openat2")
			require.Len(t, reads, 3, "the one-byte reads: %v", evs)
			require.Len(t, opens, 2, "the failed opens: %v", evs)
			assert.Len(t, evs, 5, "deferred exits only, no vfs_write")
			for _, ev := range reads {
				assert.EqualValues(t, 1, ev["ret"])
				assert.EqualValues(t, 1, argNum(t, ev, "count"), "count argument")
				assert.Equal(t, map[string]any{"file->f_path.dentry->d_name.name": "hostname", "count": int64OrNum(1)}, numValues(ev["values"]))
			}
			for _, ev := range opens {
				assert.Equal(t, "-ENOENT", ev["ret_str"])
				assert.Equal(t, map[string]any{"filename": "/nonexistent/ftprobe-expr"}, ev["values"])
			}
			// Rejected: 2 successful opens at exit, the workload's own open
			// at exit, the 4-byte read and the write at entry (and, in most
			// modes, one more call of the thread the test does not make).
			assert.GreaterOrEqual(t, sum.Losses.FilterRejects, uint64(5), "rejected calls")
			assert.Zero(t, sum.Losses.ExprFaults)
			assert.Zero(t, sum.Losses.NoEntry, "exits without entry: a call rejected at entry is not one")
			assertNoLosses(t, sum.Losses)
			assertNothingAttached(t)
		})
	}
}

// TestArgAtEntry: without a predicate on ret, values ride in the entry
// record (not deferred); a string comparison through three pointers and a
// field of an anonymous struct in a union (qstr.len) as a value.
func TestArgAtEntry(t *testing.T) {
	e := lab(t)
	mode := modes[0]
	for _, m := range modes {
		if e.works[m] {
			mode = m
			break
		}
	}
	needMode(t, e, mode)
	o := trace.Options{Patterns: []string{"vfs_read"}, Mode: mode,
		Args:       []string{"file->f_path.dentry->d_name.name", "file->f_path.dentry->d_name.len", "*pos"},
		Predicates: []string{`count == 1 && file->f_path.dentry->d_name.name == "hostname"`}}
	evs, sum := traceInThreadWith(t, o, func() {
		_, err := workload.Run(workload.Spec{Kind: "read", Path: "/etc/hostname", Count: 2})
		require.NoError(t, err)
		fd, err := unix.Open("/proc/self/comm", unix.O_RDONLY, 0)
		require.NoError(t, err)
		unix.Read(fd, make([]byte, 1)) // one byte, but not "hostname": rejected
		unix.Close(fd)
	})
	entries := filterEvents(evs, "entry", "vfs_read")
	require.Len(t, entries, 2, "%v", evs)
	assert.Len(t, filterEvents(evs, "exit", "vfs_read"), 2)
	for i, ev := range entries {
		assert.Equal(t, map[string]any{"file->f_path.dentry->d_name.name": "hostname", "file->f_path.dentry->d_name.len": int64OrNum(8), "*pos": int64OrNum(int64(i))}, numValues(ev["values"]), "entry %d", i)
	}
	assert.EqualValues(t, 1, sum.Losses.FilterRejects)
	assert.Zero(t, sum.Losses.ExprFaults)
}

// TestArgStruct: whole structs as values (--arg '*file'), read in one
// probe read at entry and formatted from the kernel's BTF: the workload's
// open flags and file position inside struct file, the same struct path
// through '*file' and 'file->f_path', and the file name's length and hash
// in struct qstr (hash_len is hash | len << 32). A struct at a NULL
// pointer (the file's private_data) is a counted fault.
func TestArgStruct(t *testing.T) {
	e := lab(t)
	mode := modes[0]
	for _, m := range modes {
		if e.works[m] {
			mode = m
			break
		}
	}
	needMode(t, e, mode)
	o := trace.Options{Patterns: []string{"vfs_read"}, Mode: mode,
		Args:       []string{"*file", "file->f_path", "file->f_path.dentry->d_name", "*(struct qstr *)file->private_data"},
		Predicates: []string{`count == 1 && file->f_path.dentry->d_name.name == "hostname"`}}
	evs, sum := traceInThreadWith(t, o, func() {
		_, err := workload.Run(workload.Spec{Kind: "read", Path: "/etc/hostname", Count: 3})
		require.NoError(t, err)
	})
	entries := filterEvents(evs, "entry", "vfs_read")
	require.Len(t, entries, 3, "%v", evs)
	// open(O_RDONLY) on a 64-bit kernel: O_LARGEFILE is forced (its value
	// differs by arch); O_CLOEXEC is not kept in f_flags.
	largefile := map[string]int64{"amd64": 0x8000, "arm64": 0x20000}[e.kin.Arch]
	for i, ev := range entries {
		vals, _ := ev["values"].(map[string]any)
		require.NotNil(t, vals, "%v", ev)
		file, _ := vals["*file"].(map[string]any)
		require.NotNil(t, file, "*file: %v", vals)
		assert.Equal(t, largefile, num(file["f_flags"]), "f_flags, entry %d: %v", i, file)
		assert.Equal(t, int64(i), num(file["f_pos"]), "f_pos, entry %d", i)
		assert.Equal(t, int64(1), num(file["f_mode"])&3, "f_mode: FMODE_READ without FMODE_WRITE")
		assert.Equal(t, vals["file->f_path"], file["f_path"], "struct path twice")
		path, _ := file["f_path"].(map[string]any)
		require.NotNil(t, path)
		assert.NotEqual(t, json.Number("0"), path["dentry"])
		q, _ := vals["file->f_path.dentry->d_name"].(map[string]any)
		require.NotNil(t, q, "d_name: %v", vals)
		assert.Equal(t, int64(len("hostname")), num(q["len"]), "%v", q)
		assert.Equal(t, num(q["hash"])|num(q["len"])<<32, num(q["hash_len"]), "%v", q)
		assert.Contains(t, vals, "*(struct qstr *)file->private_data")
		assert.Nil(t, vals["*(struct qstr *)file->private_data"], "NULL private_data")
		assert.Equal(t, map[string]any{"*(struct qstr *)file->private_data": "-EFAULT"}, ev["value_errors"])
	}
	assert.Equal(t, uint64(3), sum.Losses.ExprFaults, "one faulted struct read per call")
	l := sum.Losses
	l.ExprFaults = 0
	assert.False(t, l.Any(), "losses: %+v", sum.Losses)
}

// exprModes are the modes TestArgFilter runs in: all of them on amd64;
// on arm64, where each attach costs about 20 s under TCG and these tests
// must stay within a minute, the two that hand the programs their
// arguments differently: kprobe.session (pt_regs) and fsession (the
// trampoline's ctx, session semantics). TestArgAtEntry covers fentry's
// rejected frames there.
func exprModes(e *env) []string {
	if e.kin.Arch != "arm64" {
		return modes
	}
	return []string{attach.ModeKprobeSession}
}

// TestExprBadInput: expressions that do not type-check against the
// running kernel's BTF are bad input (exit 2), one line naming function
// and expression, before anything is loaded or attached.
func TestExprBadInput(t *testing.T) {
	e := lab(t)
	for _, c := range []struct {
		args, preds []string
		msg         string
	}{
		{nil, []string{"cont == 1"}, `--filter vfs_read: "cont == 1": type error: vfs_read has no parameter "cont" (did you mean count?)`},
		{[]string{"file->f_pth"}, nil, `--arg vfs_read: "file->f_pth": type error: struct file has no field "f_pth" (did you mean f_path`},
		{nil, []string{`count == "x"`}, `string comparison on count, a size_t, not a char array or char pointer`},
		{[]string{"count->x"}, nil, `count->x: count is a size_t, not a pointer`},
		{[]string{"*count"}, nil, `--arg vfs_read: "*count": type error: dereference of count, a size_t, not a pointer`},
		{nil, []string{"file->f_path.dentry->d_parent->d_parent->d_parent->d_parent->d_flags == 1"}, "too deep for the verifier"},
	} {
		_, err := trace.Run(context.Background(), trace.Options{NoSpecialize: noSpecialize(), Patterns: []string{"vfs_read"}, Mode: attach.ModeKprobeSession,
			Args: c.args, Predicates: c.preds, Symbols: e.k, Log: testLog{t}, Out: io.Discard})
		require.Error(t, err, "%v %v", c.args, c.preds)
		class, _ := trace.ClassOf(err)
		assert.Equal(t, trace.ClassBadInput, class, "%v", err)
		assert.Contains(t, err.Error(), c.msg)
		assert.NotContains(t, err.Error(), "\n")
	}
	assertNothingAttached(t)
}

// TestDryRun: --dry-run compiles the expressions, loads and verifies the
// programs of the mode (the interpreter included) and attaches nothing.
func TestDryRun(t *testing.T) {
	e := lab(t)
	needMode(t, e, attach.ModeKprobeMulti)
	var log strings.Builder
	sum, err := trace.Run(context.Background(), trace.Options{NoSpecialize: noSpecialize(), Patterns: []string{"vfs_read", "do_sys_openat2"}, Mode: attach.ModeKprobeMulti, DryRun: true,
		Args: []string{"vfs_read:file->f_path.dentry->d_name.name"}, Predicates: []string{"vfs_read:count == 1", "do_sys_openat2:ret == -ENOENT"},
		Symbols: e.k, Log: &log, Out: io.Discard})
	require.NoError(t, err)
	assert.Nil(t, sum)
	t.Log(log.String())
	assert.Contains(t, log.String(), "vfs_read: --arg file->f_path.dentry->d_name.name: const unsigned char *, arg0 → read 8 bytes at +")
	assert.Contains(t, log.String(), "do_sys_openat2:   term 0: ret == -2")
	assert.Regexp(t, `dry run: 2 functions in kprobe\.multi\+kretprobe\.multi mode, 2 programs loaded and verified in .*, nothing attached`, log.String())
	assertNothingAttached(t)
}

func int64OrNum(v int64) any { return v }

// numValues turns the JSON numbers of a values object into int64.
func numValues(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for k, x := range m {
		if _, s := x.(string); s || x == nil {
			out[k] = x
			continue
		}
		out[k] = num(x)
	}
	return out
}

// TestFilterOnly: a --filter with no --arg and nothing on ret, so the
// programs are loaded with the entry filter alone (x_entry set, x_exit
// and x_vals not), with an integer and a string comparison: no other
// test loads that combination. (The string buffer's slack keeps the
// length clamp in front of 7.3's verifier in this combination; the test
// covers the combination, not one register allocation.) Exactly the
// workload's three one-byte reads of /etc/hostname come out, count 1 in
// each; the thread's own four-byte read is counted as rejected.
func TestFilterOnly(t *testing.T) {
	e := lab(t)
	for _, mode := range filterModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			o := trace.Options{Patterns: []string{"vfs_read"}, Mode: mode,
				Predicates: []string{`count == 1 && file->f_path.dentry->d_name.name == "hostname"`}}
			evs, sum := traceInThreadWith(t, o, readHostname(t)) // the four-byte read: rejected at entry
			entries := filterEvents(evs, "entry", "vfs_read")
			require.Len(t, entries, 3, "%v", evs)
			assert.Len(t, filterEvents(evs, "exit", "vfs_read"), 3)
			for i, ev := range entries {
				assert.EqualValues(t, 1, argNum(t, ev, "count"), "entry %d: count", i)
			}
			assert.EqualValues(t, 1, sum.Losses.FilterRejects)
			assert.Zero(t, sum.Losses.ExprFaults)
			// The rejected read on a thread with no open frames pushed no
			// frame (fentry and kprobe modes): its exit is dropped, not
			// counted as an exit without entry (in flight).
			assert.Zero(t, sum.Losses.NoEntry, "exits without entry")
		})
	}
}

// TestFilterTwoValuesStrings: a comparison of two values decided in the
// kernel, and --filter combined with --strings and --stack.
//   - `count > file->f_pos` on the workload's three one-byte reads of
//     /etc/hostname (f_pos 0, 1, 2 at entry) and a four-byte read on a
//     fresh descriptor (f_pos 0): the first and the last pass, 2 rejected.
//   - `ret == -ENOENT` with --strings --stack on two failed opens and one
//     that succeeds: exactly the two failed ones, each exit standing for
//     its entry with the file name and a kernel stack; 1 rejected.
func TestFilterTwoValuesStrings(t *testing.T) {
	e := lab(t)
	for _, mode := range filterModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			o := trace.Options{Patterns: []string{"vfs_read"}, Mode: mode,
				Predicates: []string{`count > file->f_pos && file->f_path.dentry->d_name.name == "hostname"`}}
			evs, sum := traceInThreadWith(t, o, readHostname(t))
			entries := filterEvents(evs, "entry", "vfs_read")
			require.Len(t, entries, 2, "%v", evs)
			assert.Len(t, filterEvents(evs, "exit", "vfs_read"), 2)
			assert.EqualValues(t, 1, argNum(t, entries[0], "count"), "the first one-byte read")
			assert.EqualValues(t, 4, argNum(t, entries[1], "count"), "the four-byte read")
			assert.EqualValues(t, 2, sum.Losses.FilterRejects, "the reads at f_pos 1 and 2")
			assert.Zero(t, sum.Losses.ExprFaults)

			o = trace.Options{Patterns: []string{"do_sys_openat2"}, Mode: mode, Strings: true, Stack: true,
				Predicates: []string{`ret == -ENOENT`}}
			evs, sum = traceInThreadWith(t, o, func() {
				_, err := workload.Run(workload.Spec{Kind: "openfail", Path: "/no/such/file", Count: 2})
				require.NoError(t, err)
				_, err = workload.Run(workload.Spec{Kind: "open", Path: "/etc/hostname", Count: 1})
				require.NoError(t, err)
			})
			require.Len(t, evs, 2, "%v", evs)
			for i, ev := range evs {
				assert.Equal(t, "exit", ev["type"], "event %d: the exit stands for its entry", i)
				assert.Equal(t, "-ENOENT", ev["ret_str"], "event %d", i)
				assert.Equal(t, "/no/such/file", ev["args"].(map[string]any)["filename"], "event %d", i)
				assert.NotEmpty(t, ev["stack"], "event %d: a kernel stack", i)
			}
			assert.EqualValues(t, 1, sum.Losses.FilterRejects, "the open that succeeded")
			assert.Zero(t, sum.Losses.StackFailures)
			assertNothingAttached(t)
		})
	}
}

// readHostname is the workload's three one-byte reads of /etc/hostname
// (f_pos 0, 1, 2), then a four-byte read on a fresh descriptor (f_pos 0),
// all on the calling thread.
func readHostname(t *testing.T) func() {
	return func() {
		_, err := workload.Run(workload.Spec{Kind: "read", Path: "/etc/hostname", Count: 3})
		require.NoError(t, err)
		fd, err := unix.Open("/etc/hostname", unix.O_RDONLY, 0)
		require.NoError(t, err)
		unix.Read(fd, make([]byte, 4))
		unix.Close(fd)
	}
}

// filterModes are the modes of the filter-only tests: every mode on
// amd64; kprobe.session and fentry+fexit on arm64 (the CI budget), the
// two families of attach paths.
func filterModes(e *env) []string {
	if e.kin.Arch == "arm64" {
		return []string{attach.ModeKprobeSession, attach.ModeFentryFexit}
	}
	return exprModes(e)
}

// TestStatFilter: stat (tables only) with an entry --filter counts only
// the calls the predicate lets in, and counts the others as rejected, in
// the session modes' own aggregation path too (fsession, kprobe.session:
// the predicate's number from the cookie when it reads argument
// registers only, from xprogs when it reads memory). The thread makes 200
// one-byte reads and 30 four-byte reads of /dev/zero.
func TestStatFilter(t *testing.T) {
	e := lab(t)
	modes := exprModes(e)
	if e.kin.Arch == "arm64" {
		// The CI budget: the two session paths.
		modes = []string{attach.ModeKprobeSession, attach.ModeFSession}
	}
	const ones, fours = 200, 30
	for kind, pred := range map[string]string{
		"registers": `count == 1`,
		"memory":    `count == 1 && file->f_path.dentry->d_name.name == "zero"`,
	} {
		for _, mode := range modes {
			t.Run(mode+"/"+kind, func(t *testing.T) {
				needMode(t, e, mode)
				o := trace.Options{Patterns: []string{"vfs_read"}, Mode: mode, Quiet: true, Hist: true, Predicates: []string{pred}}
				evs, sum := traceInThreadWith(t, o, func() {
					_, err := workload.Run(workload.Spec{Kind: "read", Path: "/dev/zero", Count: ones})
					require.NoError(t, err)
					fd, err := unix.Open("/dev/zero", unix.O_RDONLY, 0)
					require.NoError(t, err)
					defer unix.Close(fd)
					for i := 0; i < fours; i++ {
						n, err := unix.Read(fd, make([]byte, 4))
						require.NoError(t, err)
						require.Equal(t, 4, n)
					}
				})
				byName := statTables(t, evs)
				require.Len(t, byName, 1, "%v", byName)
				rd := byName["vfs_read"]
				require.NotNil(t, rd, "%v", byName)
				assert.EqualValues(t, ones, num(rd["calls"]), "the one-byte reads only")
				assert.EqualValues(t, ones, num(rd["timed"]), "each with a duration")
				assert.EqualValues(t, 0, num(rd["errors"]))
				assert.EqualValues(t, fours, sum.Losses.FilterRejects, "the four-byte reads")
				assert.Zero(t, sum.Losses.ExprFaults)
				assertNoLosses(t, sum.Losses)
			})
		}
	}
}
