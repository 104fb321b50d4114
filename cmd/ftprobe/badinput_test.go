package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// TestCLIBadInput runs, on the host and without a kernel to trace, every
// bad input README names that can be told without one:
// flags, values, patterns, filters, argument counts, unknown commands and
// help topics. Each must exit 2 with its message on stderr, before any
// privilege, tracefs or kernel check (this machine has neither tracefs
// mounted nor a tracing kernel: any later check would exit 3 or 1). The
// cases that need a kernel (unknown function names, --max-functions, the
// compare target) are in test/kernel's TestCLIBadInput.
func TestCLIBadInput(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e := newBadInputEnv(t)
	var cases []badInput
	for _, part := range [][]badInput{commandLineBadInput(), traceBadInput(e), statListBadInput(), compareBadInput(e.dir), workloadVMBadInput(e.dir)} {
		cases = append(cases, part...)
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), c.msg)
			assert.True(t, strings.HasPrefix(stderr.String(), "ftprobe: "), "one ftprobe: line: %q", stderr.String())
			if slices.Contains(c.args, "--mode") {
				assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
			}
			assert.NotContains(t, stderr.String(), "errno")
			assert.NotContains(t, stderr.String(), "tracefs", "decided before any kernel check")
		})
	}
}

// TestCLIInputLimits checks that the limits themselves pass the input
// checks: a 15-byte comm, this process and one of its threads, every
// pattern form.
func TestCLIInputLimits(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid := os.Getpid()
	other := otherThread(t, pid)
	o := trace.Options{Patterns: []string{"vfs_*", "do_sys_openat2 [vmlinux]", "ext4:ext4_*", "foo@0xffff0000"}, Excludes: []string{"vfs_statx*"},
		Mode: "auto", Output: "text", RingbufSize: 4 << 20, MaxFunctions: 2000}
	o.Filters.Comm, o.Filters.TGID = strings.Repeat("c", 15), uint32(pid)
	o.Filters.TID, _ = parseU32(other)
	assert.NoError(t, checkTraceInput(&o))
	o.Filters = attach.Filters{}
	o.Command = []string{"/bin/true"}
	assert.NoError(t, checkTraceInput(&o))
	assert.NoError(t, checkVMInput("", "auto", "", 1, 128, 1, []string{"A=", "B=c=d"}))
}

// badInput is a command line and the message it must exit 2 with.
type badInput struct {
	args []string
	msg  string
}

// badInputEnv is what the cases name: this process (pid, self), another
// of its threads, a pid no task can have (missing), a 16-byte comm (one
// byte too many) and a temporary directory.
type badInputEnv struct {
	pid                           int
	self, other, missing, sixteen string
	dir                           string
}

func newBadInputEnv(t *testing.T) badInputEnv {
	pid := os.Getpid()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	require.NoError(t, err)
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return badInputEnv{pid: pid, self: strconv.Itoa(pid), other: otherThread(t, pid), missing: strconv.Itoa(pidMax + 1),
		sixteen: strings.Repeat("c", 16), dir: t.TempDir()}
}

// commandLineBadInput are the bad inputs of the command line itself:
// commands, flags and help topics.
func commandLineBadInput() []badInput {
	return []badInput{
		// The command line itself.
		{[]string{"bogus"}, `unknown command "bogus" for "ftprobe"`},
		{[]string{"trac"}, "Did you mean this?\n\ttrace"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"help", "bogus"}, "help bogus: unknown help topic"},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "ftprobe completion"`},
		{[]string{"version", "extra"}, `unknown command "extra" for "ftprobe version"`},
		{[]string{"features", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"features", "extra"}, `unknown command "extra" for "ftprobe features"`},
		{[]string{"demo", "--count", "x"}, `invalid argument "x" for "--count"`},
	}
}

// traceBadInput are the bad inputs of trace: arguments, patterns, flag
// values, filters, expressions, output and --entry.
func traceBadInput(e badInputEnv) []badInput {
	return []badInput{
		// trace: arguments and patterns.
		{[]string{"trace"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"trace", "vfs_read", "--"}, "trace: nothing after --"},
		{[]string{"trace", "--", "/bin/true"}, "trace: no function pattern"},
		{[]string{"trace", ""}, "empty function pattern"},
		{[]string{"trace", "vfs_["}, `pattern "vfs_[": syntax error in pattern`},
		{[]string{"trace", "vfs_read@xyz"}, `pattern "vfs_read@xyz": bad address after @`},
		{[]string{"trace", "--exclude", "[", "vfs_*"}, `trace --exclude: pattern "[": syntax error in pattern`},
		// trace: flag values.
		{[]string{"trace", "--mode", "bogus", "vfs_read"}, `--mode "bogus": want auto, fentry+fexit, fsession, fsession.multi, fentry.multi+fexit.multi, kprobe.session, kprobe.multi+kretprobe.multi, kprobe+kretprobe`},
		// A name another command takes: what it is, and what this one takes instead.
		{[]string{"trace", "--mode", "fentry", "vfs_read"}, "--mode fentry: fentry is one attach path, measured by compare --mode; trace and stat take fentry+fexit or fsession (modes: auto, fentry+fexit, fsession, fsession.multi, fentry.multi+fexit.multi, kprobe.session, kprobe.multi+kretprobe.multi, kprobe+kretprobe)"},
		{[]string{"stat", "--mode", "kprobe.multi", "vfs_read"}, "--mode kprobe.multi: kprobe.multi is one attach path, measured by compare --mode; trace and stat take kprobe.session or kprobe.multi+kretprobe.multi (modes: "},
		{[]string{"trace", "--mode", "fexit.multi", "vfs_read"}, "trace and stat take fsession.multi or fentry.multi+fexit.multi (modes: "},
		{[]string{"trace", "--mode", "raw_tp", "vfs_read"}, "--mode raw_tp: raw_tp is one attach path, measured by compare --mode; trace and stat attach no mode through it (modes: "},
		{[]string{"trace", "--mode", "tp_btf", "vfs_read"}, "--mode tp_btf: tp_btf is one attach path, reported by features; trace and stat attach no mode through it (modes: "},
		{[]string{"trace", "--output", "xml", "vfs_read"}, `--output "xml": want text, json or perfetto`},
		{[]string{"trace", "--graph", "--output", "json", "vfs_read"}, "--graph with --output json: the call graph is a text view"},
		{[]string{"trace", "--count", "-1", "vfs_read"}, "--count -1: want 0 (no limit) or more"},
		{[]string{"trace", "--count", "many", "vfs_read"}, `invalid argument "many" for "--count"`},
		{[]string{"trace", "--buffer-size", "1000", "vfs_read"}, "--buffer-size: buffer of 1000 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{[]string{"trace", "--buffer-size", "-1", "vfs_read"}, `invalid argument "-1" for "--buffer-size"`},
		{[]string{"trace", "--buffer-size", "64mb", "vfs_read"}, `invalid argument "64mb" for "--buffer-size" flag: want bytes, or a number of KiB, MiB or GiB`},
		{[]string{"trace", "--mode", "fsession", "--buffer-size", "3MiB", "vfs_read"}, "--buffer-size: buffer of 3145728 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{[]string{"trace", "--mode", "fsession", "--buffer-size", "4GiB", "vfs_read"}, "--buffer-size: buffer of 4294967296 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{[]string{"trace", "--buffer-size", "0", "vfs_read"}, "--buffer-size: buffer of 0 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{[]string{"trace", "--duration", "-1s", "vfs_read"}, "--duration -1s: want 0 (off) or more"},
		{[]string{"trace", "--duration", "5", "vfs_read"}, `invalid argument "5" for "--duration"`},
		{[]string{"trace", "--stats-every", "-1m", "vfs_read"}, "--stats-every -1m0s: want 0 (off) or more"},
		{[]string{"trace", "--max-functions", "-1", "vfs_read"}, "--max-functions -1: want 0 (no limit) or more"},
		// trace: filters.
		{[]string{"trace", "--comm", e.sixteen, "vfs_read"}, fmt.Sprintf(`--comm %q: bad filter: 16 bytes, longer than the kernel's 15-byte comm`, e.sixteen)},
		{[]string{"trace", "--min-duration", "-1ms", "vfs_read"}, "--min-duration -1ms: bad filter: want 0 (off) or more"},
		// trace: --arg/--filter expressions (syntax; types need BTF: test/kernel).
		{[]string{"trace", "--filter", "count ==", "vfs_read"}, `trace --filter "count ==": syntax error at column 9: want a name, a number, a string or '(', found the end`},
		{[]string{"trace", "--filter", "count = 1", "vfs_read"}, `trace --filter "count = 1": syntax error at column 7: unexpected character '='`},
		{[]string{"trace", "--arg", "file->", "vfs_read"}, `trace --arg "file->": syntax error at column 7: want a field name after "->", found the end`},
		{[]string{"trace", "--arg", "file->f_path.dentry->d_name.name[", "vfs_read"}, `syntax error at column 34`},
		{[]string{"trace", "--filter", `name == "abc`, "vfs_read"}, `trace --filter "name == \"abc": syntax error at column 9: unterminated literal`},
		{[]string{"trace", "--arg", "a", "--arg", "b", "--arg", "c", "--arg", "d", "--arg", "e", "vfs_read"}, "--arg: 5 expressions, at most 4 per trace"},
		{[]string{"trace", "--strings", "--arg", "count", "vfs_read"}, "trace: --arg with --strings or --stack is not supported yet"},
		{[]string{"trace", "--pid", e.missing, "vfs_read"}, fmt.Sprintf("trace: --pid %s: no such process or thread: no process or thread %s (no /proc/%s); nothing would be traced", e.missing, e.missing, e.missing)},
		{[]string{"trace", "--tid", e.missing, "vfs_read"}, fmt.Sprintf("trace: --tid %s: no such process or thread: no process or thread %s (no /proc/%s)", e.missing, e.missing, e.missing)},
		{[]string{"trace", "--pid", e.other, "vfs_read"}, fmt.Sprintf("--pid %s: no such process or thread: %s is a thread of process %d, not a process (use --tid %s, or --pid %d)", e.other, e.other, e.pid, e.other, e.pid)},
		{[]string{"trace", "--pid", "1", "--tid", e.other, "vfs_read"}, fmt.Sprintf("--tid %s: no such process or thread: thread %s belongs to process %d, not --pid 1", e.other, e.other, e.pid)},
		{[]string{"trace", "--pid", "abc", "vfs_read"}, `invalid argument "abc" for "--pid"`},
		// trace: output.
		{[]string{"trace", "-o", e.dir, "vfs_read"}, "-o " + e.dir + ": is a directory"},
		{[]string{"trace", "-o", e.dir + "/no/such/dir/t.jsonl", "vfs_read"}, "-o " + e.dir + "/no/such/dir/t.jsonl: stat " + e.dir + "/no/such/dir: no such file or directory"},
		{[]string{"trace", "--pid", e.self, "vfs_read", "--", "/bin/true"}, "trace: --pid/--tid with -- COMMAND"},

		// trace --entry: what the call trees do not combine with.
		{[]string{"trace", "--entry", "do_sys_openat2", "--quiet", "path_*"}, "trace --entry do_sys_openat2 with --quiet (stat): the call trees are per-call output"},
		{[]string{"stat", "--entry", "do_sys_openat2", "path_*"}, "unknown flag: --entry"},
		{[]string{"trace", "--entry", "do_sys_openat2", "--summary", "path_*"}, "trace --entry do_sys_openat2 with --summary/--hist"},
		{[]string{"trace", "--entry", "do_sys_openat2", "--hist", "path_*"}, "trace --entry do_sys_openat2 with --summary/--hist"},
		{[]string{"trace", "--entry", "do_sys_openat2", "--min-duration", "1ms", "path_*"}, "trace --entry do_sys_openat2 with --min-duration: it would cut calls out of the trees"},
		{[]string{"trace", "--entry", "do_sys_openat2", "--graph", "path_*"}, "trace --entry do_sys_openat2 with --graph: --entry prints its own call tree"},
		{[]string{"trace", "--entry", "do_sys_[", "path_*"}, `trace --entry: pattern "do_sys_[": syntax error in pattern`},
		{[]string{"trace", "--entry", "", "path_*"}, "trace --entry: empty function pattern"},
	}
}

// statListBadInput are the bad inputs of stat and list.
func statListBadInput() []badInput {
	return []badInput{
		// stat (trace --quiet): tables only.
		{[]string{"stat", "--interval", "0", "vfs_read"}, "--interval 0s: want a positive duration"},
		{[]string{"stat", "--interval", "-1s", "vfs_read"}, "--interval -1s: want a positive duration"},
		{[]string{"stat", "--graph", "vfs_read"}, "unknown flag: --graph"},
		{[]string{"stat", "--count", "5", "vfs_read"}, "unknown flag: --count"},
		{[]string{"stat", "--output", "perfetto", "vfs_read"}, "--output perfetto needs per-call events"},
		{[]string{"trace", "--quiet", "--graph", "vfs_read"}, "--graph needs per-call events"},
		{[]string{"trace", "--quiet", "--count", "5", "vfs_read"}, "--count needs per-call events"},
		{[]string{"trace", "--quiet", "--output", "perfetto", "vfs_read"}, "--output perfetto needs per-call events"},
		{[]string{"trace", "--quiet", "--strings", "vfs_read"}, "--strings needs per-call events"},
		{[]string{"trace", "--interval", "1s", "vfs_read"}, "--interval: only with stat"},
		{[]string{"stat"}, "requires at least 1 arg(s), only received 0"},

		// list.
		{[]string{"list"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"list", "vfs_["}, `list: pattern "vfs_[": syntax error in pattern`},
		{[]string{"list", "--exclude", "[", "vfs_*"}, `list: pattern "[": syntax error in pattern`},
	}
}

// compareBadInput are the bad inputs of compare.
func compareBadInput(dir string) []badInput {
	return []badInput{
		// compare.
		{[]string{"compare", "extra"}, `unknown command "extra" for "ftprobe compare"`},
		{[]string{"compare", "--scenario", "bogus"}, `--scenario "bogus": want hit, attach, crowd, stream`},
		{[]string{"compare", "--trigger", "bogus"}, `--trigger "bogus": want kernel, syscall`},
		{[]string{"compare", "--body", "bogus"}, `--body "bogus": want empty, trace, exit-only, agg, filtered`},
		{[]string{"compare", "--crowd-by", "bogus"}, `--crowd-by "bogus": want fentry, kprobe.multi`},
		{[]string{"compare", "--mode", "bogus"}, `--mode "bogus": want fentry, fexit, fentry+fexit, fsession, fentry.multi, fexit.multi, fsession.multi, kprobe.multi, kretprobe.multi, kprobe.multi+kretprobe.multi, kprobe.session, kprobe, kretprobe, kprobe+kretprobe, raw_tp`},
		{[]string{"compare", "--mode", "fentry,auto"}, "--mode auto: auto is a trace and stat mode (the kernel's best attach path); compare measures each attach path or pair by name (modes: fentry, fexit, fentry+fexit, fsession, fentry.multi, fexit.multi, fsession.multi, kprobe.multi, kretprobe.multi, kprobe.multi+kretprobe.multi, kprobe.session, kprobe, kretprobe, kprobe+kretprobe, raw_tp)"},
		{[]string{"compare", "--mode", "fentry.multi+fexit.multi"}, "--mode fentry.multi+fexit.multi: fentry.multi+fexit.multi is a trace and stat mode; compare measures its attach paths one by one: fentry.multi, fexit.multi (modes: "},
		{[]string{"compare", "--mode", "tp_btf"}, "--mode tp_btf: tp_btf is one attach path, reported by features; compare does not measure it (modes: "},
		{[]string{"compare", "--threads", "0"}, `--threads "0": want comma-separated thread counts from 1 to ` + strconv.Itoa(runtime.NumCPU()) + " (the CPUs this process may run on) or all"},
		{[]string{"compare", "--threads", "1,all," + strconv.Itoa(runtime.NumCPU()+1)}, `--threads "1,all,` + strconv.Itoa(runtime.NumCPU()+1) + `": want comma-separated thread counts from 1 to`},
		{[]string{"compare", "--threads", "2,four"}, `--threads "2,four": want`},
		{[]string{"compare", "--attach-n", "1,x"}, `--attach-n "1,x": want comma-separated non-negative integers`},
		{[]string{"compare", "--crowd-k", "-1"}, `--crowd-k "-1": want comma-separated non-negative integers`},
		{[]string{"compare", "--buffer-size", "1000"}, "--buffer-size: buffer of 1000 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{[]string{"compare", "--runs", "0"}, "--runs, --calls and --batch must be positive"},
		{[]string{"compare", "--stream-calls", "0"}, "--stream-calls 0: want 1 or more"},
		{[]string{"compare", "--syscall-calls", "-5"}, "--syscall-calls -5: want 1 or more"},
		{[]string{"compare", "--plot", "out.pdf"}, "--plot out.pdf: want FILE.svg or FILE.png"},
		{[]string{"compare", "--from", dir + "/missing.json"}, "no such file or directory"},
		{[]string{"compare", "--json", dir + "/no/such/dir/r.json"}, "--json " + dir + "/no/such/dir/r.json: stat " + dir + "/no/such/dir: no such file or directory"},
		{[]string{"compare", "--plot", dir}, "--plot " + dir + ": want FILE.svg or FILE.png"},
		{[]string{"compare", "--plot", dir + "/x/p.svg"}, "--plot " + dir + "/x/p.svg: stat " + dir + "/x: no such file or directory"},
	}
}

// workloadVMBadInput are the bad inputs of workload and vm.
func workloadVMBadInput(dir string) []badInput {
	return []badInput{
		// workload.
		{[]string{"workload"}, "accepts 1 arg(s), received 0"},
		{[]string{"workload", "bogus"}, `workload: unknown kind "bogus" (want open, openfail, read or syscall)`},
		{[]string{"workload", "open", "--count", "0"}, "workload open: --count must be positive"},
		{[]string{"workload", "open", "--interval", "-1s"}, "workload --interval -1s: want 0 or more"},

		// vm: every value is checked before a kernel is resolved or booted.
		{[]string{"vm", "--arch", "sparc", "--", "version"}, `vm --arch "sparc": want arm64 or amd64`},
		{[]string{"vm", "--accel", "hvf", "--", "version"}, `vm --accel "hvf": want auto, kvm, tcg or icount`},
		{[]string{"vm", "--cpus", "0", "--", "version"}, "vm --cpus 0: want 1 or more"},
		{[]string{"vm", "--memory", "64", "--", "version"}, "vm --memory 64: want at least 128"},
		{[]string{"vm", "--timeout", "0s", "--", "version"}, "vm --timeout 0s: want more than 0"},
		{[]string{"vm", "--env", "NOVALUE", "--", "version"}, `vm --env "NOVALUE": want KEY=VALUE`},
		{[]string{"vm", "--guest-binary", dir + "/none", "--", "version"}, "vm --guest-binary: stat " + dir + "/none: no such file or directory"},
		{[]string{"vm", "--kernel", dir + "/none", "--", "version"}, "vm --kernel " + dir + "/none: kernel image: open " + dir + "/none: no such file or directory"},
		{[]string{"vm", "--add", "nocolon", "--", "version"}, "nocolon"},
	}
}

func parseU32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

// otherThread returns a thread of process pid other than its leader and
// the calling thread (a Go test runs several).
func otherThread(t *testing.T, pid int) string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, e := range ents {
		if n, _ := strconv.Atoi(e.Name()); n != 0 && n != pid && n != unix.Gettid() {
			return e.Name()
		}
	}
	t.Fatalf("no second thread in /proc/self/task: %v", ents)
	return ""
}

// TestNoSpecialize: FTPROBE_SPECIALIZE=off turns the specializer off,
// unset or on leaves it on, any other value is bad input (exit 2).
func TestNoSpecialize(t *testing.T) {
	for v, want := range map[string]bool{"": false, "on": false, "off": true} {
		t.Setenv(specializeEnv, v)
		off, err := noSpecialize()
		require.NoError(t, err, v)
		assert.Equal(t, want, off, v)
	}
	t.Setenv(specializeEnv, "no")
	_, err := noSpecialize()
	require.EqualError(t, err, `FTPROBE_SPECIALIZE="no": want on or off`)
	code, _ := exitcode.Of(err)
	assert.Equal(t, exitcode.BadInput, code)
}

// TestByteSize: --buffer-size takes bytes or a whole number of KiB, MiB
// or GiB.
func TestByteSize(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "64MiB": 64 << 20, "64M": 64 << 20, "8KiB": 8 << 10, "2GiB": 2 << 30, "1K": 1 << 10} {
		var s byteSize
		require.NoError(t, s.Set(in), in)
		assert.Equal(t, want, uint64(s), in)
	}
	for _, in := range []string{"", "MiB", "1iB", "1TiB", "1.5MiB", "18446744073709551615K"} {
		var s byteSize
		assert.Error(t, s.Set(in), in)
	}
}

// TestGeneralObject: FTPROBE_OBJECT=general makes compare load the general
// trace object, unset or variant the selected variant, any other value is
// bad input (exit 2).
func TestGeneralObject(t *testing.T) {
	for v, want := range map[string]bool{"": false, "variant": false, "general": true} {
		t.Setenv(objectEnv, v)
		general, err := generalObject()
		require.NoError(t, err, v)
		assert.Equal(t, want, general, v)
	}
	t.Setenv(objectEnv, "lean")
	_, err := generalObject()
	require.EqualError(t, err, `FTPROBE_OBJECT="lean": want variant or general`)
	code, _ := exitcode.Of(err)
	assert.Equal(t, exitcode.BadInput, code)
}
