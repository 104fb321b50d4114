package trace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/selfreach"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// fakeLearn is a selfreach.Learn that finds the candidates named in
// reached, twice per traced call, and records what it was asked.
type fakeLearn struct {
	reached map[string]bool
	err     error
	asked   []selfreach.Options
}

func (f *fakeLearn) learn(_ context.Context, o selfreach.Options) (*selfreach.Result, error) {
	f.asked = append(f.asked, o)
	if f.err != nil {
		return nil, f.err
	}
	r := &selfreach.Result{Checked: o.Candidates}
	for _, c := range o.Candidates {
		if f.reached[c.Name] {
			r.Reached = append(r.Reached, selfreach.Hit{Func: c, PerCall: 2})
		}
	}
	return r, nil
}

// planSelf runs leaveOutSelf with fl, then plans o in fentry+fexit mode
// on k (nil: the recorded arm64 7.3 kernel); it returns the log.
func planSelf(t *testing.T, k *symbols.Kernel, o Options, fl *fakeLearn) (*symbols.Resolution, string, error) {
	return planSelfCached(t, k, o, fl, selfreach.Cache{})
}

// planSelfCached is planSelf with the per-boot cache c.
func planSelfCached(t *testing.T, k *symbols.Kernel, o Options, fl *fakeLearn, c selfreach.Cache) (*symbols.Resolution, string, error) {
	var log bytes.Buffer
	o.Log, o.Mode = &log, "fentry+fexit"
	if k == nil {
		k = recorded(t, "arm64-7.3")
	}
	s := &session{k: k, kin: &kfeat.Info{}}
	s.leaveOutSelf(context.Background(), o, fl.learn, c)
	fk := &fakeKernel{}
	p := &planner{o: o, k: s.k, kin: s.kin, has: fk.has, open: fk.open}
	_, res, err := p.plan(context.Background())
	return res, log.String(), err
}

// TestLeaveOutSelf: the matched functions ftprobe's own programs call are
// left out of a glob, counted with the reason; an exact name of one is
// bad input naming it; --trace-self asks nothing and traces them.
func TestLeaveOutSelf(t *testing.T) {
	fl := &fakeLearn{reached: map[string]bool{"vfs_write": true}}
	res, log, err := planSelf(t, nil, Options{Patterns: []string{"vfs_*"}}, fl)
	require.NoError(t, err)
	require.Len(t, fl.asked, 1)
	assert.Equal(t, []string{"vfs_read", "vfs_write"}, names(fl.asked[0].Candidates))
	assert.Equal(t, selfreach.Trigger, fl.asked[0].Trigger.Name)
	assert.Equal(t, []string{"vfs_read"}, names(res.Funcs))
	assert.Equal(t, []string{"vfs_write"}, names(res.Skipped))
	assert.Equal(t, "skipped 1: 1 called by ftprobe's own BPF programs", res.SkipSummary())
	assert.Regexp(t, `ftprobe: left out 1 of 2 matched functions: called by ftprobe's own BPF programs \(checked in [0-9.]+m?s\): vfs_write \(--trace-self traces them\)\n`, log)

	_, _, err = planSelf(t, nil, Options{Patterns: []string{"vfs_write"}}, fl)
	require.Error(t, err)
	c, _ := ClassOf(err)
	assert.Equal(t, ClassBadInput, c)
	assert.Contains(t, err.Error(), "vfs_write in fentry+fexit mode: called by ftprobe's own BPF programs (2.0 times per traced call on this kernel")
	assert.Contains(t, err.Error(), "--trace-self traces it anyway")

	fl = &fakeLearn{reached: map[string]bool{"vfs_write": true}}
	res, log, err = planSelf(t, nil, Options{Patterns: []string{"vfs_write"}, TraceSelf: true}, fl)
	require.NoError(t, err)
	assert.Empty(t, fl.asked)
	assert.Equal(t, []string{"vfs_write"}, names(res.Funcs))
	assert.NotContains(t, log, "ftprobe's own")
}

// TestLeaveOutSelfKept: a later trace on the same kernel with the same
// settings checks only the functions not checked yet; other settings
// check again.
func TestLeaveOutSelfKept(t *testing.T) {
	k := recorded(t, "arm64-7.3")
	fl := &fakeLearn{reached: map[string]bool{"vfs_write": true}}
	_, _, err := planSelf(t, k, Options{Patterns: []string{"vfs_read"}}, fl)
	require.NoError(t, err)
	res, log, err := planSelf(t, k, Options{Patterns: []string{"vfs_*"}}, fl)
	require.NoError(t, err)
	require.Len(t, fl.asked, 2)
	assert.Equal(t, []string{"vfs_write"}, names(fl.asked[1].Candidates), "vfs_read was checked")
	assert.Equal(t, []string{"vfs_read"}, names(res.Funcs))
	assert.Contains(t, log, "left out 1 of 2 matched functions")
	_, _, err = planSelf(t, k, Options{Patterns: []string{"vfs_*"}, DryRun: true}, fl)
	require.NoError(t, err)
	_, _, err = planSelf(t, k, Options{Patterns: []string{"vfs_write"}}, fl)
	require.Error(t, err, "known: refused without a new check")
	assert.Len(t, fl.asked, 2)
	_, _, err = planSelf(t, k, Options{Patterns: []string{"vfs_*"}, Hist: true}, fl)
	require.NoError(t, err)
	require.Len(t, fl.asked, 3, "the tables' programs are checked on their own")
	assert.True(t, fl.asked[2].Trace.Aggregate)
	assert.False(t, fl.asked[0].Trace.Aggregate)
}

// TestLeaveOutSelfNotChecked: where the kernel cannot tell, and with
// --dry-run, nothing is left out and the log says it was not checked.
func TestLeaveOutSelfNotChecked(t *testing.T) {
	fl := &fakeLearn{reached: map[string]bool{"vfs_write": true}, err: errors.New("counting kprobe.multi program on 3 functions: not supported")}
	res, log, err := planSelf(t, nil, Options{Patterns: []string{"vfs_*"}}, fl)
	require.NoError(t, err)
	assert.Equal(t, []string{"vfs_read", "vfs_write"}, names(res.Funcs))
	assert.Contains(t, log, "ftprobe: note: not checked which matched functions ftprobe's own BPF programs call: counting kprobe.multi program on 3 functions: not supported\n")

	fl.err = nil
	res, log, err = planSelf(t, nil, Options{Patterns: []string{"vfs_*"}, DryRun: true}, fl)
	require.NoError(t, err)
	assert.Empty(t, fl.asked[1:])
	assert.Equal(t, []string{"vfs_read", "vfs_write"}, names(res.Funcs))
	assert.Contains(t, log, "(--dry-run attaches nothing; the trace leaves them out)")
}

// TestLeaveOutSelfCache: another process of the same boot and build, with
// the same settings, takes the verdicts from the cache: none to check
// loads nothing, some check only the rest; another boot, another build,
// other settings or a corrupt file check again.
func TestLeaveOutSelfCache(t *testing.T) {
	dir := t.TempDir()
	c := selfreach.Cache{Dir: dir, Boot: "boot-1", Objects: "objects-1"}
	fl := &fakeLearn{reached: map[string]bool{"vfs_write": true}}
	_, log, err := planSelfCached(t, nil, Options{Patterns: []string{"vfs_read"}}, fl, c)
	require.NoError(t, err)
	require.Len(t, fl.asked, 1)
	assert.NotContains(t, log, "left out")
	files, err := filepath.Glob(filepath.Join(dir, "selfreach", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	st, err := os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(filepath.Dir(files[0]))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	// Partly cached: only vfs_write is checked.
	res, log, err := planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}}, fl, c)
	require.NoError(t, err)
	require.Len(t, fl.asked, 2)
	assert.Equal(t, []string{"vfs_write"}, names(fl.asked[1].Candidates))
	assert.Equal(t, []string{"vfs_read"}, names(res.Funcs))
	assert.Regexp(t, `left out 1 of 2 matched functions: called by ftprobe's own BPF programs \(checked 1 in \S+, 1 cached for this boot\): vfs_write`, log)

	// All cached: nothing checked, the per-call count kept.
	res, log, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}}, fl, c)
	require.NoError(t, err)
	assert.Len(t, fl.asked, 2, "nothing loaded")
	assert.Equal(t, []string{"vfs_write"}, names(res.Skipped))
	assert.Contains(t, log, "left out 1 of 2 matched functions: called by ftprobe's own BPF programs (cached for this boot): vfs_write")
	_, _, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_write"}}, fl, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(2.0 times per traced call on this kernel")
	assert.Len(t, fl.asked, 2)

	// Other settings, another boot, another build: checked again.
	for i, o := range []struct {
		c    selfreach.Cache
		hist bool
	}{{c, true}, {selfreach.Cache{Dir: dir, Boot: "boot-2", Objects: "objects-1"}, false}, {selfreach.Cache{Dir: dir, Boot: "boot-1", Objects: "objects-2"}, false}} {
		_, _, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}, Hist: o.hist}, fl, o.c)
		require.NoError(t, err)
		require.Len(t, fl.asked, 3+i, "case %d", i)
		assert.Equal(t, []string{"vfs_read", "vfs_write"}, names(fl.asked[2+i].Candidates), "case %d", i)
	}

	// A corrupt file: ignored, then rewritten.
	require.NoError(t, os.WriteFile(files[0], []byte(`{"boot_id":`), 0o600))
	_, _, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}}, fl, c)
	require.NoError(t, err)
	require.Len(t, fl.asked, 6)
	assert.Len(t, fl.asked[5].Candidates, 2)
	_, log, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}}, fl, c)
	require.NoError(t, err)
	assert.Len(t, fl.asked, 6, "rewritten")
	assert.Contains(t, log, "(cached for this boot)")

	// A check that fails keeps nothing.
	bad := &fakeLearn{err: errors.New("not supported")}
	_, _, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}, Stack: true}, bad, c)
	require.NoError(t, err)
	_, _, err = planSelfCached(t, nil, Options{Patterns: []string{"vfs_*"}, Stack: true}, bad, c)
	require.NoError(t, err)
	assert.Len(t, bad.asked, 2)
}
