package trace

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// TestCheckTargets runs against this machine's /proc: this process and
// this thread exist, a pid above pid_max cannot, a non-leader thread is
// not a process, and a thread of another process is not one of --pid's.
func TestCheckTargets(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := uint32(os.Getpid()), uint32(unix.Gettid())
	require.NoError(t, CheckTargets(attach.Filters{TGID: pid}))
	require.NoError(t, CheckTargets(attach.Filters{TGID: pid, TID: pid}))
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	require.NoError(t, err)
	pidMax, err := strconv.ParseUint(string(b[:len(b)-1]), 10, 32)
	require.NoError(t, err)
	missing := uint32(pidMax + 1)

	err = CheckTargets(attach.Filters{TGID: missing})
	require.ErrorIs(t, err, ErrNoSuchTask)
	assert.EqualError(t, err, fmt.Sprintf("--pid %d: no such process or thread: no process or thread %d (no /proc/%d); nothing would be traced", missing, missing, missing))
	err = CheckTargets(attach.Filters{TID: missing})
	require.ErrorIs(t, err, ErrNoSuchTask)
	assert.Contains(t, err.Error(), fmt.Sprintf("--tid %d: ", missing))

	// A thread other than the leader: a Go test runs several.
	var other uint32
	ents, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, e := range ents {
		if n, _ := strconv.ParseUint(e.Name(), 10, 32); n != 0 && uint32(n) != pid {
			other = uint32(n)
			break
		}
	}
	require.NotZero(t, other, "no second thread in %v", ents)
	require.NoError(t, CheckTargets(attach.Filters{TID: other}))
	require.NoError(t, CheckTargets(attach.Filters{TGID: pid, TID: other}))
	err = CheckTargets(attach.Filters{TGID: other})
	require.ErrorIs(t, err, ErrNoSuchTask)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d is a thread of process %d, not a process (use --tid %d, or --pid %d)", other, pid, other, pid))

	// A thread of another process (pid 1 exists everywhere).
	require.NotEqual(t, uint32(1), pid, "the test is not init")
	err = CheckTargets(attach.Filters{TGID: 1, TID: tid})
	require.ErrorIs(t, err, ErrNoSuchTask)
	assert.Contains(t, err.Error(), fmt.Sprintf("thread %d belongs to process %d, not --pid 1", tid, pid))
	assert.True(t, taskAlive("/proc", tid))
	assert.False(t, taskAlive("/proc", missing))

	// A child that exited and is not reaped yet: a zombie is no target.
	c := exec.Command("/bin/true")
	require.NoError(t, c.Start())
	cp := uint32(c.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for taskAlive("/proc", cp) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	err = CheckTargets(attach.Filters{TGID: cp})
	require.NoError(t, c.Wait())
	require.ErrorIs(t, err, ErrNoSuchTask)
	assert.Contains(t, err.Error(), fmt.Sprintf("--pid %d: no such process or thread: %d has exited (Z (zombie))", cp, cp))
}
