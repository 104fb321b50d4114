package features

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/kfeat"
)

// TestDevHostVerdicts checks the verdicts on this project's development
// and CI machines (a sandboxed Firecracker 6.18 x86-64 kernel): fentry
// refused by policy, no fprobe, no kprobes,
// tp_btf working. Other kernels are covered by the lab tests.
func TestDevHostVerdicts(t *testing.T) {
	kin := kfeat.Load()
	if !strings.Contains(kin.Release, "-fc-") || kin.Arch != "amd64" {
		t.Skipf("not the development host's kernel (%s): verdicts are asserted in the lab matrix instead", kin)
	}
	if !kfeat.HasTracingCaps() {
		t.Skip("needs CAP_BPF and CAP_PERFMON (run as root)")
	}
	r := Probe(kin)
	for mode, want := range map[string]string{
		"fentry":          "program load refused by kernel policy (EPERM with CAP_BPF and CAP_PERFMON held",
		"fexit":           "program load refused by kernel policy",
		"kprobe.multi":    "CONFIG_FPROBE not set",
		"kretprobe.multi": "CONFIG_FPROBE not set",
		"kprobe.session":  "CONFIG_FPROBE not set",
		"kprobe":          "CONFIG_KPROBES not set",
		"kretprobe":       "CONFIG_KPROBES not set",
		"fsession":        "this kernel (6.18) predates fsession",
		"fentry.multi":    "this kernel (6.18) predates the tracing multi links",
		"fexit.multi":     "this kernel (6.18) predates the tracing multi links",
		"fsession.multi":  "this kernel (6.18) predates the tracing multi links",
	} {
		got := r.Get(mode)
		assert.False(t, got.Works, mode)
		assert.Contains(t, got.Reason, want, mode)
		assert.Equal(t, "unsupported", got.Class, mode)
		assert.NotContains(t, got.Reason, "errno", mode)
	}
	assert.True(t, r.Works("tp_btf"), "tp_btf loads and attaches here")
	assert.True(t, r.VmlinuxBTF)
	assert.Contains(t, r.Hint, "ftprobe vm --kernel debian:7.3 --arch arm64 -- features")
}
