package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/features"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// modes_test.go: every command's mode names against the registries
// (attach.Paths, attach.TraceModes), so that a mode has one name
// everywhere.

// registryModes are the trace modes' names, in registry order.
func registryModes() []string {
	var out []string
	for _, m := range attach.TraceModes {
		out = append(out, m.Name)
	}
	return out
}

// TestTraceModeNames: trace and stat --mode take auto and exactly the
// registry's modes, each named by its paths joined by '+', the same list
// symbols checks functions for; trace's help lists them.
func TestTraceModeNames(t *testing.T) {
	reg := registryModes()
	assert.Equal(t, symbols.Modes, reg, "symbols.Modes and attach.TraceModes list the same modes in the same order")
	assert.Equal(t, append([]string{"auto"}, reg...), traceModeNames())
	for _, m := range attach.TraceModes {
		var paths []string
		for _, p := range m.Paths {
			_, ok := attach.PathByName(string(p))
			assert.True(t, ok, "%s: path %s is not an attach path", m.Name, p)
			paths = append(paths, string(p))
		}
		assert.Equal(t, strings.Join(paths, "+"), m.Name, "a mode is named by its attach paths")
		assert.NoError(t, checkTraceMode(m.Name))
	}
	assert.NoError(t, checkTraceMode("auto"))
	// Every other name any command or registry knows is refused.
	others := append(append([]string{"baseline"}, bench.HitModeNames()...), features.Paths...)
	for _, p := range attach.Paths {
		others = append(others, string(p.Path))
	}
	for _, n := range others {
		if n == "auto" || slices.Contains(reg, n) {
			continue
		}
		assert.Error(t, checkTraceMode(n), n)
	}
	for _, c := range []string{"trace", "stat"} {
		var out bytes.Buffer
		require.Equal(t, 0, run([]string{c, "--help"}, &out, &out))
		assert.Contains(t, out.String(), strings.Join(traceModeNames()[:len(reg)], ", ")+" or "+reg[len(reg)-1], c)
	}
}

// TestEventModeNames: every name an event can carry (events.ModeName of
// each code the BPF side writes) is the name of the mode whose programs
// write that code, which trace --mode takes.
func TestEventModeNames(t *testing.T) {
	seen := map[uint8]bool{}
	for _, m := range attach.TraceModes {
		assert.False(t, seen[m.Event], "%s: event code %d used twice", m.Name, m.Event)
		seen[m.Event] = true
		assert.Equal(t, m.Name, events.ModeName(m.Event))
	}
	for c := 0; c < 256; c++ {
		name := events.ModeName(uint8(c))
		if strings.HasPrefix(name, "mode") {
			assert.False(t, seen[uint8(c)], "code %d", c)
			continue
		}
		assert.True(t, seen[uint8(c)], "code %d (%s) belongs to no registry mode", c, name)
		assert.NoError(t, checkTraceMode(name), "code %d", c)
	}
}

// TestCompareModeNames: compare's modes are attach paths or '+' joins of
// registry paths; its trace bodies measure trace modes; features reports
// attach paths, each one compare measures but tp_btf (trace's --tree and
// --entry tracepoints, which no compare row measures). A trace mode
// compare does not take, and auto, say what compare takes instead.
func TestCompareModeNames(t *testing.T) {
	valid := bench.HitModeNames()
	assert.NoError(t, bench.ValidModes(valid))
	assert.Len(t, valid, len(slices.Compact(slices.Sorted(slices.Values(valid)))), "no mode listed twice: %v", valid)
	for _, m := range bench.HitModes[1:] {
		for _, p := range strings.Split(m, "+") {
			_, ok := attach.PathByName(p)
			assert.True(t, ok, "compare mode %s: %s is not an attach path", m, p)
		}
		if strings.Contains(m, "+") {
			_, ok := attach.TraceModeByName(m)
			assert.True(t, ok, "compare pair %s is not a trace mode", m)
		}
	}
	for _, m := range bench.TraceModes {
		_, ok := attach.TraceModeByName(m)
		assert.True(t, ok, "compare trace body %s is not a trace mode", m)
		assert.Contains(t, valid, m)
	}
	for _, m := range features.Paths {
		_, ok := attach.PathByName(m)
		assert.True(t, ok, "features row %s is not an attach path", m)
		if m == string(attach.PathTPBTF) {
			assert.ErrorContains(t, bench.ValidModes([]string{m}), "tp_btf is one attach path, reported by features; compare does not measure it")
			continue
		}
		assert.Contains(t, valid, m, "features row %s", m)
	}
	for _, m := range append([]string{"auto"}, registryModes()...) {
		if !slices.Contains(valid, m) {
			assert.ErrorContains(t, bench.ValidModes([]string{m}), "--mode "+m+": "+m+" is a trace and stat mode", m)
		}
	}
	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"compare", "--help"}, &out, &out))
	assert.Contains(t, out.String(), strings.Join(valid, ", "))
}

// oldSpellings are mode names from before the registry: a mode spelled
// two ways. None may be written anywhere but here.
var oldSpellings = []string{"kprobe-multi", "fentry-multi", "fsession-multi", "kprobe-session"}

// modeLike matches a string shaped like an attach path or a mode: paths
// ("kprobe", "kprobe.multi", "kprobe_session", ...) joined by '+'.
var modeLike = regexp.MustCompile(`^(fentry|fexit|fsession|kprobe|kretprobe)([._-](multi|session))?(\+(fentry|fexit|fsession|kprobe|kretprobe)([._-](multi|session))?)*$`)

// TestOneSpellingPerMode fails when a mode is spelled two ways: an old
// spelling in a Go or BPF source or in any command's help, or a Go string
// literal shaped like a mode name ("fentry...", "kprobe...") that no
// registry knows (trace modes, attach paths, compare modes).
func TestOneSpellingPerMode(t *testing.T) {
	known := map[string]bool{"auto": true}
	for _, n := range append(append(registryModes(), bench.HitModeNames()...), features.Paths...) {
		known[n] = true
	}
	for _, p := range attach.Paths {
		known[string(p.Path)] = true
	}
	// A mixed trace (auto's per-function fallback) names its two modes.
	for _, tr := range registryModes() {
		if symbols.IsTrampolineMode(tr) {
			known[tr+"+"+attach.ModeKprobeSession], known[tr+"+"+attach.ModeKprobeMulti] = true, true
		}
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	self, err := filepath.Abs("modes_test.go")
	require.NoError(t, err)
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "docs", "dist", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if path == self || (ext != ".go" && ext != ".c" && ext != ".h" && ext != ".json") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, old := range oldSpellings {
			assert.NotContains(t, strings.ToLower(string(b)), old, "%s spells a mode the old way (in any case)", rel)
		}
		if ext == ".go" {
			for _, s := range stringLiterals(t, path, b) {
				if modeLike.MatchString(s) {
					assert.True(t, known[s], "%s: %q looks like a mode name but no registry has it", rel, s)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 100, "the sources were walked")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var out bytes.Buffer
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		run(args, &out, &out)
		for _, old := range oldSpellings {
			assert.NotContains(t, strings.ToLower(out.String()), old, "%s --help", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// stringLiterals returns the string literals of the Go file path.
func stringLiterals(t *testing.T, path string, src []byte) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
	require.NoError(t, err, path)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, err := strconv.Unquote(l.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}
