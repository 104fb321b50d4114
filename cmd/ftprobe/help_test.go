package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// measured are the shapes of a measured figure, and the words of a
// history, that no --help may hold: help describes what a command does;
// the docs carry what was measured and when.
var measured = []*regexp.Regexp{
	regexp.MustCompile(`\b\d+(\.\d+)?x\b`),                                       // a ratio: 1.38x
	regexp.MustCompile(`\b\d+(\.\d+)?\s+(x|times)\s`),                            // 1.16 x empty, 3 times the
	regexp.MustCompile(`\b\d+(\.\d+)?\s*%`),                                      // a percentage
	regexp.MustCompile(`\b\d+(\.\d+)?\s+(ns|us|µs|ms|s|sec|seconds|minutes?)\b`), // a time: 26 s
	regexp.MustCompile(`\b\d+(\.\d+)?\s*(min|mins|hours?)\b`),                    // 26 min, 3min
	regexp.MustCompile(`(?i)\b(TCG|icount|KVM)\b[^.\n]{0,12}:\s*\d`),             // TCG: 1.41
	regexp.MustCompile(`(?i)\b(session|stop|round)\s+\d+\b`),                     // session 20
	regexp.MustCompile(`(?i)\b(review|reviewer|reviewed|previously|formerly|no longer|used to|anymore)\b`),
	regexp.MustCompile(`(?i)\bissue\s*#?\d+`),
	regexp.MustCompile(`\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`), // a hex word (commit hash), checked for length below
}

// measuredIn returns the first measured figure or history word in s.
func measuredIn(s string) string {
	for _, re := range measured {
		for _, m := range re.FindAllString(s, -1) {
			if strings.HasPrefix(re.String(), `\b[0-9a-f]`) && len(m) < 7 {
				continue // short hex-looking words: "2f", "b3"
			}
			return m
		}
	}
	return ""
}

// TestMeasuredPatterns: the patterns catch what help texts once held and
// pass what they hold by design.
func TestMeasuredPatterns(t *testing.T) {
	for _, bad := range []string{
		"7.3 under TCG: 0.66-1.40x the empty program on amd64, 1.38x on arm64",
		"fentry+fexit 1.16 x empty", "within 6.25% of the exact value", "make test took 26 min",
		"attaching takes 4 s under emulation", "icount: 1.41", "measured in session 20", "after the review",
		"(ftprobe 95ce983, docs/window-amd64-7.3.txt)", "it no longer counts",
	} {
		assert.NotEmpty(t, measuredIn(bad), bad)
	}
	for _, good := range []string{
		"--duration 5s", "(default 10m0s)", "ringbuf size in bytes (default 4194304)", "first 2 per call, 127 bytes each",
		"kprobe.session", "fsession.multi", "within 1/16 of the exact value", "name@ADDRESS, e.g. foo@0xffff0000",
		"icount: TCG whose guest clock counts executed instructions, one nanosecond each", "Linux 5.18+", "x empty (its ns over the empty program's)",
		"log2 histogram", "p50/p90/p99", "ext4:ext4_*", "do_sys_openat2",
	} {
		assert.Empty(t, measuredIn(good), good)
	}
}

// allCommands returns every command of the tree under c, hidden ones
// included, as the argument paths that reach them.
func allCommands(c *cobra.Command, path []string) [][]string {
	out := [][]string{path}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub, append(slices.Clone(path), sub.Name()))...)
	}
	return out
}

// TestHelpHasNoMeasurement renders the --help of every command and
// subcommand and fails on a measured figure or a history word in it.
func TestHelpHasNoMeasurement(t *testing.T) {
	paths := allCommands(newRootCmd(), nil)
	require.Greater(t, len(paths), 10, "the whole tree")
	for _, p := range paths {
		name := strings.Join(append([]string{"ftprobe"}, p...), " ")
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append(slices.Clone(p), "--help"), &stdout, &stderr)
			require.Equal(t, 0, code, "stderr: %s", stderr.String())
			help := stdout.String()
			require.Contains(t, help, "Usage:")
			assert.Empty(t, measuredIn(help), "%s --help holds a measured figure or a history word:\n%s", name, help)
		})
	}
}

// statFlagSamples are a value stat must accept for each of its flags
// ("" for a boolean). A flag stat registers without a sample fails
// TestStatFlagsUsable.
func statFlagSamples(t *testing.T) map[string][]string {
	runtime.LockOSThread() // gettid stays this thread's
	t.Cleanup(runtime.UnlockOSThread)
	return map[string][]string{
		"interval": {"1s"}, "mode": append([]string{"auto"}, trace.Modes...), "exclude": {"vfs_readv"},
		"output": outputNames(true), "out": {filepath.Join(t.TempDir(), "stat.txt")},
		"pid": {strconv.Itoa(os.Getpid())}, "tid": {strconv.Itoa(unix.Gettid())}, "comm": {"ftprobe"},
		"min-duration": {"1ms"}, "errors": {""}, "duration": {"10ms"}, "stats-every": {"1s"}, "max-functions": {"10"},
		"hist": {""}, "filter": {"count > 1"}, "dry-run": {""}, "strict": {""}, "verbose": {""}, "trace-self": {""},
	}
}

// statNoOp are the trace flags stat leaves out because they would change
// nothing in the tables: what they set is the per-call records' (their
// content, delivery or ringbuf) or what stat always does.
var statNoOp = map[string]string{
	"quiet":        "stat is trace --quiet",
	"summary":      "stat always prints the tables",
	"live-entries": "no entry record to send early",
	"buffer-size":  "no record goes through the ringbuf",
	"arg":          "the values go in records, none streamed",
}

// flagArgs is the command-line form of flag name with value ("" for a
// boolean).
func flagArgs(name, value string) []string {
	if value == "" {
		return []string{"--" + name}
	}
	return []string{"--" + name + "=" + value}
}

// TestStatFlagsUsable runs stat with every flag its help lists, with
// every value the help offers where it lists them: none may be refused as
// bad input (exit 2). The input checks run before the kernel is touched;
// on a host without tracefs the run then stops at the kernel (exit 3 or
// 1), or, without privilege, at the capability check (exit 2 naming it).
func TestStatFlagsUsable(t *testing.T) {
	samples := statFlagSamples(t)
	stat, _, err := newRootCmd().Find([]string{"stat"})
	require.NoError(t, err)
	help := stat.Flags().Lookup("output").Usage
	for _, o := range traceOutputs {
		if o.perCall {
			assert.NotContains(t, help, o.name, "stat's --output help lists only what stat writes")
		} else {
			assert.Contains(t, help, o.name)
		}
	}
	n := 0
	stat.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		_, noop := statNoOp[f.Name]
		assert.False(t, noop, "--%s is on stat but changes nothing there", f.Name)
		vals, ok := samples[f.Name]
		if !assert.True(t, ok, "--%s: no sample value in statFlagSamples", f.Name) {
			return
		}
		for _, v := range vals {
			n++
			args := append([]string{"stat", "--duration=10ms"}, append(flagArgs(f.Name, v), "vfs_read")...)
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code == 2 {
				assert.Contains(t, stderr.String(), "needs CAP_BPF and CAP_PERFMON", "%v: refused as bad input", args)
			}
		}
	})
	assert.GreaterOrEqual(t, n, len(samples))
}

// TestTraceOnlyFlags: every trace flag stat leaves out is either refused
// with trace --quiet (it needs per-call records, exit 2) or changes
// nothing there (statNoOp, with the reason).
func TestTraceOnlyFlags(t *testing.T) {
	root := newRootCmd()
	tr, _, err := root.Find([]string{"trace"})
	require.NoError(t, err)
	st, _, err := root.Find([]string{"stat"})
	require.NoError(t, err)
	refused := map[string]string{"count": "5", "graph": "", "strings": "", "stack": "", "entry": "do_sys_openat2"}
	tr.Flags().VisitAll(func(f *pflag.Flag) {
		if st.Flags().Lookup(f.Name) != nil {
			return
		}
		if _, ok := statNoOp[f.Name]; ok {
			return
		}
		v, ok := refused[f.Name]
		if !assert.True(t, ok, "--%s is trace's only: add it to statNoOp (with why) or to the refused flags", f.Name) {
			return
		}
		args := append([]string{"trace", "--quiet"}, append(flagArgs(f.Name, v), "vfs_read")...)
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), "%v", args)
		assert.Regexp(t, `needs per-call events|with --quiet \(stat\)`, stderr.String(), "%v", args)
	})
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"stat", "--output=perfetto", "vfs_read"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "--output perfetto needs per-call events")
}

// TestCompareHelpFromRegistries: compare's help names every scenario,
// body, trigger and hit mode of the bench registries, each mode once in
// --mode's list.
func TestCompareHelpFromRegistries(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"compare", "--help"}, &stdout, &stderr))
	help := stdout.String()
	for _, cs := range [][]bench.Choice{bench.Scenarios, bench.Bodies, bench.Triggers, bench.CrowdBys} {
		for _, c := range cs {
			assert.Contains(t, help, c.Name)
		}
	}
	cmd, _, err := newRootCmd().Find([]string{"compare"})
	require.NoError(t, err)
	usage := cmd.Flags().Lookup("mode").Usage
	_, list, _ := strings.Cut(usage, ": ")
	modes := strings.Split(list, ", ")
	for _, m := range bench.HitModes[1:] {
		assert.Equal(t, 1, strings.Count(","+strings.Join(modes, ",")+",", ","+m+","), "--mode lists %s once: %s", m, usage)
	}
	assert.Len(t, modes, len(bench.HitModeNames()))
}

// TestImageLabel: the container image describes ftprobe as the root
// command's help does.
func TestImageLabel(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	assert.Contains(t, string(b), `org.opencontainers.image.description="`+newRootCmd().Short+`"`)
}

// TestMakeHelpListsEveryTarget: `make help` names every .PHONY target of
// the Makefile.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this host")
	}
	b, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	var phony []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
		}
	}
	require.Greater(t, len(phony), 10, "the .PHONY targets")
	out, err := exec.Command("make", "-s", "-C", "../..", "help").Output()
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "make" {
			listed[f[1]] = true
		}
	}
	for _, p := range phony {
		assert.True(t, listed[p], "make help does not list %s:\n%s", p, out)
	}
}
