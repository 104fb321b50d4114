package kernel

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	leftOutLine  = regexp.MustCompile(`ftprobe: left out (\d+) of (\d+) matched functions: called by ftprobe's own BPF programs \((checked [^)]*|cached for this boot)\): (.*) \(--trace-self traces them\)`)
	openWorkLine = regexp.MustCompile(`workload open: pid (\d+) tid (\d+): (\d+) ops`)
)

// TestTraceSelfLeftOut: `trace --entry do_sys_openat2 'lookup_*elem*' 'path_*at'`
// in auto mode around `ftprobe workload open /etc/hostname` leaves out the
// functions ftprobe's own programs call (the BPF hash lookups among
// lookup_*elem*), says so with their count and reason, and writes one tree per
// open of the workload, with its pid and tid and the file name, none of
// them holding a left-out function and no recursion miss. The same trace
// again takes the verdicts from the per-boot cache, the same ones. An
// exact name of one is refused (exit 2, the reason); with --trace-self it
// attaches.
func TestTraceSelfLeftOut(t *testing.T) {
	lab(t)
	bin := ftprobeBinary(t)
	out := filepath.Join(t.TempDir(), "trees.jsonl")
	cmd := exec.Command(bin, "trace", "-v", "--output", "json", "-o", out, "--strings", "--entry", "do_sys_openat2", "lookup_*elem*", "path_*at",
		"--", bin, "workload", "open", "--path", "/etc/hostname", "--count", "2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	t.Logf("stderr:\n%s", stderr.String())

	m := leftOutLine.FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "the plan names the functions left out")
	left := strings.Split(m[4], ", ")
	n, _ := strconv.Atoi(m[1])
	require.Len(t, left, n)
	lookups := 0
	for _, f := range left {
		if strings.HasPrefix(f, "lookup_") {
			lookups++
		}
		assert.Regexp(t, `^(lookup_|path_|do_sys_openat2)`, f, "a matched function")
		assert.Regexp(t, `\n  skip  `+regexp.QuoteMeta(f)+`\s+called by ftprobe's own BPF programs \([\d.]+ times per traced call`, stderr.String(), "-v gives %s's reason", f)
	}
	assert.Positive(t, lookups, "a BPF hash lookup among lookup_*elem*: %v", left)
	assert.Regexp(t, `ftprobe: tracing \d+ functions in \S+ mode \(skipped \d+: .*\b`+m[1]+` called by ftprobe's own BPF programs`, stderr.String())

	w := openWorkLine.FindStringSubmatch(stdout.String() + stderr.String())
	require.NotNil(t, w, "workload line")
	pid, _ := strconv.Atoi(w[1])
	tid, _ := strconv.Atoi(w[2])
	trees, sum := readTrees(t, out)
	var ours []treeRecord
	for _, r := range trees {
		if r.Tree.Args["filename"] == "/etc/hostname" && r.Tid == tid {
			ours = append(ours, r)
		}
	}
	require.Len(t, ours, 2, "one tree per open of the workload")
	for i, r := range ours {
		assert.Equal(t, pid, r.Tgid, "tree %d: the workload's pid", i)
		assert.Equal(t, "do_sys_openat2", r.Tree.Func)
		assert.GreaterOrEqual(t, r.Tree.Ret, 0.0, "tree %d: an fd", i)
		assert.NotEmpty(t, r.Tree.Children, "tree %d: the path walk under do_sys_openat2", i)
		r.Tree.walk(nil, func(n, _ *treeNode) {
			assert.NotContains(t, left, n.Func, "tree %d holds a left-out function", i)
		})
	}
	require.NotNil(t, sum)
	losses, _ := sum["losses"].(map[string]any)
	assert.EqualValues(t, 0, num(losses["recursion_misses"]), "losses: %v", losses)
	assertNothingAttached(t)

	// The same trace again, as a dry run (it attaches nothing: under
	// arm64 TCG the trace above takes minutes to attach and detach): the
	// verdicts come from this boot's cache (/run/ftprobe), the same
	// functions left out.
	again := exec.Command(bin, "trace", "--dry-run", "--output", "json", "-o", filepath.Join(t.TempDir(), "again.jsonl"), "--strings", "--entry", "do_sys_openat2", "lookup_*elem*", "path_*at",
		"--", bin, "workload", "open", "--path", "/etc/hostname", "--count", "2")
	var againErr bytes.Buffer
	again.Stderr = &againErr
	require.NoError(t, again.Run(), againErr.String())
	m2 := leftOutLine.FindStringSubmatch(againErr.String())
	require.NotNil(t, m2, againErr.String())
	assert.Equal(t, "cached for this boot", m2[3])
	assert.Equal(t, m[1:3], m2[1:3], "left out N of M")
	assert.Equal(t, left, strings.Split(m2[4], ", "))
	assertNothingAttached(t)

	// An exact name of one: refused with the reason, nothing attached.
	name := left[0]
	for _, f := range left {
		if strings.HasPrefix(f, "lookup_") {
			name = f
			break
		}
	}
	ex := exec.Command(bin, "trace", name, "--", bin, "workload", "open", "--path", "/etc/hostname")
	var exErr bytes.Buffer
	ex.Stderr = &exErr
	err := ex.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, exErr.String())
	assert.Equal(t, 2, ee.ExitCode(), exErr.String())
	assert.Contains(t, exErr.String(), name+" in ")
	assert.Contains(t, exErr.String(), "called by ftprobe's own BPF programs")
	assert.Contains(t, exErr.String(), "--trace-self traces it anyway")
	assertNothingAttached(t)

	// --trace-self: it attaches.
	in := exec.Command(bin, "trace", "--trace-self", name, "--", bin, "workload", "open", "--path", "/etc/hostname")
	var inErr bytes.Buffer
	in.Stderr = &inErr
	require.NoError(t, in.Run(), inErr.String())
	t.Logf("--trace-self:\n%s", inErr.String())
	assert.Contains(t, inErr.String(), "ftprobe: tracing 1 function in ")
	assert.NotContains(t, inErr.String(), "left out")
	assertNothingAttached(t)
}
