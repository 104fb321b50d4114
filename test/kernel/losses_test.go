package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// assertNoLosses fails on any loss but the kernel-skipped program runs of
// other tasks. A test calls it after asserting its own workload's calls
// exactly: the programs also run for every other task's call of the traced
// function (the filters are in them), and the kernel may skip such a run
// when a program is preempted on its CPU (recursion protection, fprobe's
// missed count). Those are counted and logged; a missed run of the
// workload's own call fails the test's exact assertions instead.
func assertNoLosses(t *testing.T, l attach.Losses) {
	t.Helper()
	if l.RecursionMiss+l.KprobeMissed > 0 {
		t.Logf("%d recursion misses, %d fprobe missed runs of other tasks' calls", l.RecursionMiss, l.KprobeMissed)
	}
	other := l
	other.RecursionMiss, other.KprobeMissed = 0, 0
	assert.False(t, other.Any(), "losses: %+v", l)
}
