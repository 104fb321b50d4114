package attach

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// The counting program of every path is in the bench object, with the
// program type and attach type the path needs: what features and compare
// load is what the registry says.
func TestCountingProgramsMatchPaths(t *testing.T) {
	spec, err := bpfobj.LoadBench()
	require.NoError(t, err)
	want := map[Path]ebpf.ProgramType{
		PathFentry: ebpf.Tracing, PathFexit: ebpf.Tracing, PathFSession: ebpf.Tracing, PathFentryMulti: ebpf.Tracing,
		PathFexitMulti: ebpf.Tracing, PathFSessionMulti: ebpf.Tracing, PathTPBTF: ebpf.Tracing,
		PathKprobeMulti: ebpf.Kprobe, PathKretprobeMulti: ebpf.Kprobe, PathKprobeSession: ebpf.Kprobe,
		PathKprobe: ebpf.Kprobe, PathKretprobe: ebpf.Kprobe, PathRawTP: ebpf.RawTracepoint,
	}
	require.Len(t, Paths, len(want))
	for _, p := range Paths {
		name, ok := CountingProgram[p.Path]
		require.True(t, ok, "%s has no counting program", p.Path)
		ps, ok := spec.Programs[name]
		require.True(t, ok, "%s: %s not in the bench object", p.Path, name)
		assert.Equal(t, want[p.Path], ps.Type, "%s: %s", p.Path, name)
		// The 7.x types are loaded by LoadTrampoline with the path's
		// attach type, whatever the section says.
		if p.AttachType != 0 && !strings.Contains(string(p.Path), ".multi") && p.Path != PathFSession {
			assert.Equal(t, p.AttachType, ps.AttachType, "%s: %s", p.Path, name)
		}
		got, ok := PathByName(string(p.Path))
		assert.True(t, ok)
		assert.Equal(t, p, got)
	}
	// The timed programs (compare's timed body) have their path's
	// program and attach types too, and cover every path of the modes
	// a trace body measures.
	for _, p := range []Path{PathFentry, PathFexit, PathFSession, PathFSessionMulti, PathKprobeMulti, PathKretprobeMulti,
		PathKprobeSession, PathKprobe, PathKretprobe} {
		name, ok := TimedProgram[p]
		require.True(t, ok, "%s has no timed program", p)
		ps, ok := spec.Programs[name]
		require.True(t, ok, "%s: %s not in the bench object", p, name)
		counting := spec.Programs[CountingProgram[p]]
		assert.Equal(t, counting.Type, ps.Type, "%s: %s", p, name)
		assert.Equal(t, counting.AttachType, ps.AttachType, "%s: %s", p, name)
	}
	assert.Len(t, TimedProgram, 9)
	_, ok := PathByName(ModeKprobeMulti) // a trace mode: two kernel paths
	assert.False(t, ok)
	_, err = OpenPath(context.Background(), ModeKprobeMulti, PathOptions{Spec: spec})
	assert.ErrorContains(t, err, `attach path "kprobe.multi+kretprobe.multi": unknown`)
}

// A program loaded alone creates only the maps it references and the
// variables' data sections: the counting programs do not create the
// timed body's task storage (every `features` verdict and compare attach
// load would otherwise).
func TestProgramMaps(t *testing.T) {
	spec, err := bpfobj.LoadBench()
	require.NoError(t, err)
	names := func(prog string) []string {
		var out []string
		for k := range programMaps(spec, spec.Programs[prog]) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	assert.Equal(t, []string{".rodata", "hits"}, names(bpfobj.BenchProgCountFentry))
	assert.Equal(t, []string{".rodata", "hits", "tstart"}, names(bpfobj.BenchProgTimedFentry))
	assert.Equal(t, []string{".rodata", "hits", "nsum", "tstart"}, names(bpfobj.BenchProgTimedFexit))
	assert.Equal(t, []string{".rodata", "hits", "nsum"}, names(bpfobj.BenchProgTimedFsession))
}

// Programs are loaded and links created in internal/attach only: trace,
// compare and features cannot drift apart in how they attach.
func TestOneAttachLayer(t *testing.T) {
	linkCalls := map[string]bool{"AttachTracing": true, "KprobeMulti": true, "KretprobeMulti": true, "Kprobe": true,
		"Kretprobe": true, "AttachRawTracepoint": true, "Tracepoint": true, "AttachRawLink": true, "AttachLSM": true}
	loadCalls := map[string]bool{"NewCollection": true, "NewCollectionWithOptions": true, "NewProgram": true,
		"NewProgramWithOptions": true, "LoadAndAssign": true}
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bpfobj" || d.Name() == "test" || d.Name() == "bpf") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "link" && linkCalls[sel.Sel.Name] {
				found = append(found, path+": link."+sel.Sel.Name)
			}
			if loadCalls[sel.Sel.Name] {
				found = append(found, path+": "+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, found, "the walk found no attach code at all")
	for _, f := range found {
		assert.True(t, strings.HasPrefix(f, filepath.Join(root, "internal", "attach")+"/"), "attach code outside internal/attach: %s", f)
	}
	// and links are created in path.go alone.
	for _, f := range found {
		if strings.Contains(f, ": link.") {
			assert.Contains(t, f, "path.go", "link created outside path.go: %s", f)
		}
	}
}
