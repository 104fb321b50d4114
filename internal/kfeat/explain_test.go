package kfeat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

func info(arch, release string, cfg map[string]string) *Info {
	in := &Info{Arch: arch, Release: release, Config: cfg}
	in.Major, in.Minor = ParseRelease(release)
	return in
}

func TestReasons(t *testing.T) {
	arm61 := info("arm64", "6.1.0-50-arm64", map[string]string{"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y"})
	arm612 := info("arm64", "6.12.117+deb13-arm64", map[string]string{"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y"})
	arm73 := info("arm64", "7.3.4+deb13-arm64", map[string]string{"CONFIG_FPROBE": "y", "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y"})
	for _, c := range []struct {
		in    *Info
		mode  string
		err   error
		want  string
		class error
	}{
		{arm61, "fentry", fmt.Errorf("create raw tracepoint: %w", unix.Errno(524)),
			"no ftrace direct calls on this arm64 kernel (arm64 gained them in 6.4; this is 6.1) (ENOTSUPP)", ErrUnsupported},
		{arm612, "kprobe.multi", fmt.Errorf("kprobe_multi: %w", ebpf.ErrNotSupported),
			"CONFIG_FPROBE not set: kprobe.multi and kprobe.session need fprobe; arm64 fprobe came with function-graph-based fprobe, 6.14", ErrUnsupported},
		{arm73, "kprobe.multi", fmt.Errorf("x: %w", unix.EINVAL),
			"the kernel rejected the attach (EINVAL: not an ftrace location, or the prototype is unsupported)", nil},
		{arm73, "fentry", fmt.Errorf("x: %w", unix.EBUSY),
			"another ftrace user owns this function with IPMODIFY or a direct call (livepatch, another trampoline) (EBUSY)", nil},
		{info("amd64", "6.18.44", map[string]string{"CONFIG_KPROBES": "n"}), "kprobe", errors.New("no such file"),
			"CONFIG_KPROBES not set", ErrUnsupported},
		{info("amd64", "6.12.117+deb13-amd64", map[string]string{"CONFIG_FPROBE": "y"}), "kprobe.session", &ebpf.VerifierError{Log: []string{"arg#0 expected pointer to ctx"}},
			"ftprobe's kprobe.session program needs Linux 7.0's session kfuncs on ctx (bpf_session_is_return, bpf_session_cookie); this is 6.12 (kprobe.multi+kretprobe.multi works from 5.18)", ErrUnsupported},
		{arm73, "kprobe.session", fmt.Errorf("x: %w", unix.EINVAL),
			"the kernel rejected the attach (EINVAL: not an ftrace location, or the prototype is unsupported)", nil},
	} {
		got, class := c.in.Reason(c.mode, c.err)
		assert.Equal(t, c.want, got, "%s %s", c.in.Release, c.mode)
		assert.Equal(t, c.class, class, "%s %s", c.in.Release, c.mode)
	}
}

func TestExplainWraps(t *testing.T) {
	in := info("arm64", "6.1.0-50-arm64", nil)
	err := in.Explain("fentry", "vfs_read", fmt.Errorf("create raw tracepoint: %w", unix.Errno(524)))
	assert.EqualError(t, err, "vfs_read in fentry mode: no ftrace direct calls on this arm64 kernel (arm64 gained them in 6.4; this is 6.1) (ENOTSUPP)")
	assert.ErrorIs(t, err, ErrUnsupported)
	assert.ErrorIs(t, err, unix.Errno(524))
}

func TestParseReleaseAndConfig(t *testing.T) {
	a, b := ParseRelease("6.12.117+deb13-arm64")
	assert.Equal(t, [2]int{6, 12}, [2]int{a, b})
	in := info("amd64", "6.5.0", nil)
	n, st, rule := in.DocumentedTrampolineLimits()
	assert.Equal(t, 6, n)
	assert.EqualValues(t, 16, st)
	assert.Equal(t, "the documented rule for amd64 6.5", rule)
	assert.Equal(t, "?", in.ConfigValue("CONFIG_FPROBE"))
	in = info("amd64", "6.6.0", map[string]string{})
	n, _, _ = in.DocumentedTrampolineLimits()
	assert.Equal(t, 12, n)
	n, st, _ = info("arm64", "6.12.117+deb13-arm64", nil).DocumentedTrampolineLimits()
	assert.Equal(t, 8, n, "arm64 before the 12-argument JIT work")
	assert.EqualValues(t, 16, st)
	n, _, _ = info("arm64", "7.3.4+deb13-arm64", nil).DocumentedTrampolineLimits()
	assert.Equal(t, 12, n, "arm64 7.3, measured in the lab")
	assert.Equal(t, "n", in.ConfigValue("CONFIG_FPROBE"))
}
