package trial

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// fakeKernel is a recorded lab kernel whose trampolines take up to maxArgs
// argument slots and structs up to maxStruct bytes; attach answers like
// the kernel (ENOTSUPP from the arch trampoline code) and counts calls.
type fakeKernel struct {
	k           *symbols.Kernel
	maxArgs     int
	maxStruct   uint32
	baselineErr error
	// notSupported refuses as cilium/ebpf reports ENOTSUPP: ErrNotSupported, no errno.
	notSupported bool
	calls        []string
}

func (f *fakeKernel) attach(fn string) error {
	f.calls = append(f.calls, fn)
	if fn == Baseline {
		return f.baselineErr
	}
	b, err := f.k.BTF(fn, "")
	if err != nil {
		return err
	}
	p, err := symbols.ProtoFromBTF(b)
	if err != nil {
		return err
	}
	if p.RetStruct {
		return fmt.Errorf("trial on %s: load fentry and fexit: %w", fn, unix.EINVAL)
	}
	slots, size := symbols.ArgSlots(p)
	if (slots > f.maxArgs || size > f.maxStruct) && f.notSupported {
		return fmt.Errorf("trial on %s: attach count_fentry: create raw tracepoint: %w", fn, ebpf.ErrNotSupported)
	}
	if slots > f.maxArgs || size > f.maxStruct {
		return fmt.Errorf("trial on %s: attach count_fentry: %w", fn, unix.Errno(524))
	}
	return nil
}

func (f *fakeKernel) funcs() ([]*btf.Func, error) {
	var out []*btf.Func
	seen := map[string]bool{}
	for _, s := range f.k.Syms {
		if s.Module != "" || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		if b, err := f.k.BTF(s.Name, ""); err == nil && b.Name == s.Name {
			out = append(out, b)
		}
	}
	return out, nil
}

func newFake(t *testing.T, fixture, release string, maxArgs int, maxStruct uint32) (*fakeKernel, *Limits) {
	t.Helper()
	k, _, err := symbols.LoadRecorded("../symbols/testdata/" + fixture)
	require.NoError(t, err)
	f := &fakeKernel{k: k, maxArgs: maxArgs, maxStruct: maxStruct}
	kin := &kfeat.Info{Arch: strings.SplitN(fixture, "-", 2)[0], Release: release}
	kin.Major, kin.Minor = kfeat.ParseRelease(release)
	l := New(kin, k, &Options{Attach: f.attach, Funcs: f.funcs})
	k.Limits = l
	return f, l
}

// TestTrialVerdicts: the verdicts follow what the (fake) kernel accepts, not
// the documented rule, in both directions, name the trial and the errno,
// and each rule costs few trials, cached for the run.
func TestTrialVerdicts(t *testing.T) {
	// arm64 7.3 as measured: 12 argument slots, structs up to 16 bytes.
	f, l := newFake(t, "arm64-7.3", "7.3.4+deb13-arm64", 12, 16)
	assert.True(t, l.Args(4).OK, "6 slots need no trial")
	assert.Empty(t, f.calls)
	v := l.Args(9)
	require.True(t, v.OK, v.Source)
	assert.Regexp(t, `^the kernel accepted a trial trampoline with (9|1[0-2]) arguments \(\w+\)$`, v.Source)
	v = l.Args(13)
	require.False(t, v.OK, v.Source)
	assert.Regexp(t, `^the kernel refused a trial trampoline with 1[3-9] arguments \(\w+\): ENOTSUPP at attach$`, v.Source)
	n := len(f.calls)
	assert.LessOrEqual(t, n, 4, "baseline plus one or two trials per rule: %v", f.calls)
	assert.True(t, l.Args(10).OK)
	assert.False(t, l.Args(14).OK)
	assert.Len(t, f.calls, n, "cached: no new trial")
	assert.Equal(t, "baseline", l.Trials()[0].Rule)

	// Resolution follows: a 9..12-argument function takes fentry and
	// fsession, a 13-argument one is refused with the trial's words.
	r, err := f.k.Resolve([]string{"bpf_diag_call_type"}, nil, symbols.ModeFSession, 0)
	require.NoError(t, err)
	assert.Greater(t, len(r.Funcs[0].Proto.Params), 8)
	fs, err := f.k.Match([]string{"ZSTD_buildCTable"}, nil)
	require.NoError(t, err)
	assert.Contains(t, fs[0].Skip[symbols.ModeFentryFexit], "too many arguments for a trampoline (16 arguments; the kernel refused a trial trampoline with 13 arguments (__clk_hw_register_divider): ENOTSUPP at attach)")

	// An older arm64 (6.12 in the lab): 8 slots. The same questions get
	// the other answers, from trials.
	f, l = newFake(t, "arm64-6.12", "6.12.117+deb13-arm64", 8, 16)
	f.notSupported = true
	v = l.Args(9)
	require.False(t, v.OK, v.Source)
	assert.Regexp(t, `^the kernel refused a trial trampoline with 9 arguments \(\w+\): ENOTSUPP at attach$`, v.Source, "cilium/ebpf's ErrNotSupported named as the kernel's errno")
	v = l.Args(7)
	require.True(t, v.OK, v.Source)
	assert.Contains(t, v.Source, "the kernel accepted a trial trampoline with")
	v = l.StructArg(16)
	require.True(t, v.OK, v.Source)
	assert.Contains(t, v.Source, "the kernel accepted a trial trampoline with a 16-byte struct by value")

	// No recorded function returns a struct: the documented rule decides
	// and says there was nothing to try.
	v = l.StructReturn(4)
	require.False(t, v.OK)
	assert.Equal(t, "the documented rule for arm64 6.12: no struct return; no trial: this kernel has no traceable function with a 4-byte struct returned by value to try", v.Source)

	// A kernel whose fentry fails everywhere: the documented rule, saying so.
	f, l = newFake(t, "arm64-7.3", "7.3.4+deb13-arm64", 12, 16)
	f.baselineErr = fmt.Errorf("load: %w", unix.EPERM)
	v = l.Args(13)
	require.False(t, v.OK)
	assert.Equal(t, "the documented rule for arm64 7.3: at most 12 arguments; no trial: fentry and fexit on do_sys_openat2 fail here (EPERM)", v.Source)
	assert.True(t, l.Args(9).OK)
	assert.Len(t, f.calls, 1, "one baseline attempt per run")
}
