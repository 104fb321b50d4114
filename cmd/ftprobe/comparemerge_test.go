package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	arm64Report = "../../internal/bench/testdata/compare-arm64-7.3.json"
	amd64Report = "../../internal/bench/testdata/compare-amd64-7.3.json"
)

// raised writes a copy of the arm64 lab report into dir with the trace
// body of kprobe.session costing factor times as much in every run (its
// ratios left as measured) and returns its path.
func raised(t *testing.T, dir string, factor float64) string {
	b, err := os.ReadFile(arm64Report)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	for _, r := range doc["hit_cost"].([]any) {
		row := r.(map[string]any)
		if row["body"] == "trace" && row["mode"] == "kprobe.session" {
			st := row["ns_over_baseline"].(map[string]any)
			for _, k := range []string{"median", "min", "max"} {
				st[k] = st[k].(float64) * factor
			}
		}
	}
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	p := filepath.Join(dir, "new.json")
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return p
}

// TestCompareAcrossKernels runs compare on the lab reports: merged, with
// a baseline they match (exit 0), with a planted regression (exit 1, one
// line naming it), and every bad input (exit 2, one line, nothing written).
func TestCompareAcrossKernels(t *testing.T) {
	dir := t.TempDir()
	js, md, svg := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.md"), filepath.Join(dir, "m.svg")
	var stdout, stderr bytes.Buffer
	code := run([]string{"compare", "--from", arm64Report, "--from", amd64Report, "--baseline", arm64Report, "--json", js, "--markdown", md, "--plot", svg}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "columns grouped by clock: icount (2)")
	assert.Contains(t, stdout.String(), "7.3.4+deb13-amd64 amd64 icount: not compared: no baseline column of arch amd64\n")
	assert.Contains(t, stdout.String(), "verdict: 0 regression(s), 0 improvement(s)\n")
	for _, f := range []string{js, md, svg} {
		assert.FileExists(t, f)
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"schema": "ftprobe-compare-merge/v1"`)

	// The merged document is a baseline too.
	stdout.Reset()
	code = run([]string{"compare", "--from", raised(t, dir, 1.25), "--baseline", js}, &stdout, &stderr)
	assert.Equal(t, 1, code, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "REGRESSION: 7.3.4+deb13-arm64 arm64 icount, kernel trigger, trace body, kprobe.session: ns over baseline 1997 [1990..2040] -> 2497 [2487..2550] (+25%)\n")
	assert.Equal(t, 1, strings.Count(stdout.String(), "REGRESSION"), "the ratios were not recomputed in the copy")
	assert.Contains(t, stderr.String(), "compare: 1 regression(s) against "+js)
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"compare", "--from", raised(t, dir, 1.25), "--baseline", js, "--threshold", "30"}, &stdout, &stderr)
	assert.Equal(t, 0, code, "stderr: %s", stderr.String())

	stdout.Reset()
	require.Equal(t, 0, run([]string{"compare", "--schema", "merge"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), `"title": "ftprobe-compare-merge/v1"`)
}

// TestCompareAcrossKernelsBadInput: each bad input exits 2 with one line
// naming the file and the reason, and writes nothing.
func TestCompareAcrossKernelsBadInput(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(arm64Report)
	require.NoError(t, err)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	notJSON := write("notes.txt", "no report here\n")
	other := write("summary.json", `{"schema":"ftprobe-summary/v1"}`)
	v2 := write("v2.json", strings.Replace(string(good), "ftprobe-compare/v1", "ftprobe-compare/v2", 1))
	cut := write("cut.json", string(good[:len(good)/3]))
	runs5 := write("runs5.json", strings.Replace(string(good), `"runs": 3`, `"runs": 5`, 1))
	out := filepath.Join(dir, "out.json")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--from", arm64Report, "--from", notJSON}, "notes.txt: no JSON document"},
		{[]string{"--from", arm64Report, "--from", other}, `summary.json: schema "ftprobe-summary/v1", want "ftprobe-compare/v1"`},
		{[]string{"--from", v2, "--from", arm64Report}, `v2.json: schema "ftprobe-compare/v2", want "ftprobe-compare/v1"`},
		{[]string{"--from", arm64Report, "--from", cut}, "cut.json: unexpected EOF"},
		{[]string{"--from", arm64Report, "--baseline", cut}, "read baseline " + cut + ": unexpected EOF"},
		{[]string{"--from", arm64Report, "--from", runs5}, "merge: " + arm64Report + " and " + runs5 + " measure kernel 7.3.4+deb13-arm64 arm64 on one machine with different settings"},
		{[]string{"--baseline", arm64Report}, "--baseline " + arm64Report + ": needs the reports to compare (--from)"},
		{[]string{"--from", arm64Report, "--baseline", arm64Report, "--threshold", "-1"}, "--threshold -1: want 0 or more"},
		{[]string{"--schema=bogus"}, `--schema "bogus": want report or merge`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"compare", "--json", out}, c.args...)
			assert.Equal(t, 2, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), c.msg)
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
			assert.Empty(t, stdout.String())
			assert.NoFileExists(t, out)
		})
	}
}
