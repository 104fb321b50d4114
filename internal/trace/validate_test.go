package trace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TestValidate: every check that needs no kernel is bad input, with its
// message; Run makes them before it looks at the kernel.
func TestValidate(t *testing.T) {
	interval0 := Options{Quiet: true}
	interval0.SetInterval(0)
	intervalNoQuiet := Options{}
	intervalNoQuiet.SetInterval(time.Second)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: "fprobe"}, `--mode "fprobe": want auto, fentry+fexit, fsession, fsession.multi, fentry.multi+fexit.multi, kprobe.session, kprobe.multi+kretprobe.multi, kprobe+kretprobe`},
		{interval0, "--interval 0s: want a positive duration"},
		{intervalNoQuiet, "--interval: only with stat (or trace --quiet), whose tables it prints"},
		{Options{Quiet: true, Graph: true}, "--graph needs per-call events, which stat (trace --quiet) does not stream"},
		{Options{Quiet: true, Output: "perfetto"}, "--output perfetto needs per-call events, which stat (trace --quiet) does not stream"},
		{Options{Quiet: true, Count: 3}, "--count needs per-call events, which stat (trace --quiet) does not stream"},
		{Options{RingbufSize: 1000}, "--buffer-size: buffer of 1000 bytes per CPU: must be a power of two from 65536 (64 KiB) to "},
		{Options{Filters: attach.Filters{Comm: "a-name-longer-than-the-comm"}}, `trace: --comm "a-name-longer-than-the-comm": `},
		{Options{Filters: attach.Filters{MinDuration: -1}}, "trace: --min-duration -1ns: "},
		{Options{Filters: attach.Filters{TGID: 1 << 30}}, fmt.Sprintf("trace: --pid %d: no such process or thread", 1<<30)},
		{Options{Args: []string{"count +"}}, "trace --arg"},
		{Options{Args: []string{"count"}, Strings: true}, "trace: --arg with --strings or --stack is not supported yet (name string fields with --arg instead of --strings)"},
		{Options{Args: []string{"count"}, Predicates: []string{"count == 1"}, Stack: true}, "trace: --arg with --strings or --stack is not supported yet"},
	} {
		err := validate(&c.o)
		require.Error(t, err, "%+v", c.o)
		assert.True(t, strings.HasPrefix(err.Error(), c.want), "%q, want %q", err, c.want)
		assert.Equal(t, ClassBadInput, classOf(err), err)

		sum, err := Run(context.Background(), c.o)
		assert.Nil(t, sum)
		assert.Equal(t, ClassBadInput, classOf(err), err)
	}
}

// TestValidateDefaults: validate fills in what Run assumes.
func TestValidateDefaults(t *testing.T) {
	o := Options{Mode: "auto", DryRun: true, Quiet: true, RingbufSize: 1 << 20, Args: []string{"count"}}
	require.NoError(t, validate(&o))
	assert.Equal(t, io.Discard, o.Log)
	assert.True(t, o.Verbose, "a dry run prints the plan")
	assert.True(t, o.Summary, "stat without a table asks for the summary")
	for _, m := range append([]string{"", "auto"}, Modes...) {
		o := Options{Mode: m, Log: &bytes.Buffer{}}
		require.NoError(t, validate(&o), m)
		assert.IsType(t, &bytes.Buffer{}, o.Log)
		assert.False(t, o.Verbose)
	}
}

// TestPlanExprs: --arg and --filter are compiled against the recorded
// BTF of the functions planned, name the values each function records,
// and a type error is bad input.
func TestPlanExprs(t *testing.T) {
	fk := &fakeKernel{}
	_, res, log, err := testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read", "do_sys_openat2"}, Args: []string{"count"}, Predicates: []string{"count == 1"}, Verbose: true}, fk)
	require.NoError(t, err)
	require.Len(t, fk.calls, 1)
	plans := fk.calls[0].Exprs
	var vfsRead *symbols.Func
	for _, f := range res.Funcs {
		if f.Name == "vfs_read" {
			vfsRead = f
		}
	}
	require.NotNil(t, vfsRead)
	require.NotNil(t, plans[vfsRead.ID])
	require.Len(t, vfsRead.Values, 1)
	assert.Equal(t, "count", vfsRead.Values[0].Name)
	assert.Contains(t, log, "ftprobe: vfs_read: ")

	fk = &fakeKernel{}
	_, _, _, err = testPlan(t, "arm64-7.3", Options{Patterns: []string{"vfs_read"}, Mode: attach.ModeFentryFexit, Args: []string{"file->f_path"}}, fk)
	require.Error(t, err)
	assert.Equal(t, ClassBadInput, classOf(err))
	assert.Contains(t, err.Error(), `struct file has no field "f_path" (its BTF lists no fields)`)
	assert.True(t, strings.HasPrefix(err.Error(), "trace --arg"), err)
	assert.Empty(t, fk.calls)
}

// TestReportAttached: what was attached is said once: functions left
// out, the mode, the plan's skips.
func TestReportAttached(t *testing.T) {
	var log bytes.Buffer
	s := &session{kin: &kfeat.Info{}, k: recorded(t, "amd64-7.3"), t0: time.Now()}
	tr := &attach.Tracer{Mode: attach.ModeFSessionMulti, Attached: []*symbols.Func{openat2},
		Failed: []attach.Failure{{Func: ext4Open, Err: fmt.Errorf("ext4_file_open [ext4]: attach: %w", kfeat.ErrUnsupported)}}}
	res := &symbols.Resolution{Mode: attach.ModeFSessionMulti, Funcs: []*symbols.Func{openat2, ext4Open}}
	s.reportAttached(Options{Log: &log, Verbose: true}, tr, res, 1500*time.Millisecond)
	out := log.String()
	assert.Regexp(t, `^ftprobe: resolved and attached in [0-9.]+(ns|µs|ms|s) \(attaching 1.5s; --duration counts from here\)\n`, out)
	assert.Contains(t, out, "ftprobe: not attached: ext4_file_open [ext4]: attach: unsupported on this kernel\n")
	assert.True(t, strings.HasSuffix(out, "ftprobe: tracing 1 function in fsession.multi mode ("+res.SkipSummary()+")\n"), out)

	log.Reset()
	tr = &attach.Tracer{Mode: attach.ModeFentryFexit, Attached: []*symbols.Func{openat2}}
	s.reportAttached(Options{Log: &log}, tr, res, time.Second)
	assert.Equal(t, "ftprobe: tracing 1 function in fentry+fexit mode ("+res.SkipSummary()+")\n", log.String())
}
