package trace

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary be its own launcher, as ftprobe is
// (`ftprobe internal-exec -- COMMAND`): startGated runs Options.Self so.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "internal-exec" && os.Args[2] == "--" {
		err := ExecGated(os.Args[3:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		_, status := ClassOf(err)
		os.Exit(status)
	}
	os.Exit(m.Run())
}

// tgidAdder records the process added to the tree filter.
type tgidAdder struct {
	tgid uint32
	err  error
}

func (a *tgidAdder) AddTGIDAtExec(tgid uint32) error {
	a.tgid = tgid
	return a.err
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// TestCommandStatus: a command runs once added to the filter; its exit
// ends the trace, and its status is the trace's; one that cannot be
// found exits 127 as a shell's would.
func TestCommandStatus(t *testing.T) {
	for _, c := range []struct {
		argv   []string
		status int
	}{
		{[]string{"sh", "-c", "exit 5"}, 5},
		{[]string{"true"}, 0},
		{[]string{"ftprobe-no-such-command"}, 127},
	} {
		add := &tgidAdder{}
		cmd, err := startCommand(Options{Command: c.argv, Self: self(t)}, add)
		require.NoError(t, err, c.argv)
		assert.Equal(t, uint32(cmd.cmd.Process.Pid), add.tgid)
		r := newTestRun(Options{Command: c.argv}, openCall()...)
		r.cmd = cmd
		sum, err := r.run(false)
		assert.Equal(t, c.status, sum.ExitStatus, c.argv)
		if c.status == 0 {
			assert.NoError(t, err)
			continue
		}
		cl, status := ClassOf(err)
		assert.Equal(t, ClassCommand, cl)
		assert.Equal(t, c.status, status)
		assert.EqualError(t, err, fmt.Sprintf("command exited with status %d", c.status))
	}
}

// TestCommandStartErrors: a launcher that cannot start is bad input, one
// that starts but never says it runs a failure, and a command the filter
// cannot take is stopped.
func TestCommandStartErrors(t *testing.T) {
	_, err := startCommand(Options{Command: []string{"true"}, Self: "/nonexistent/ftprobe"}, &tgidAdder{})
	assert.EqualError(t, err, "start true: fork/exec /nonexistent/ftprobe: no such file or directory")
	assert.Equal(t, ClassBadInput, classOf(err))

	_, err = startCommand(Options{Command: []string{"true"}, Self: "/bin/true"}, &tgidAdder{})
	assert.EqualError(t, err, "start true: the launcher did not start: EOF")
	assert.Equal(t, ClassFailure, classOf(err))
	var le errLauncher
	assert.True(t, errors.As(err, &le))

	add := &tgidAdder{err: errors.New("map full")}
	t0 := time.Now()
	_, err = startCommand(Options{Command: []string{"sleep", "60"}, Self: self(t)}, add)
	assert.EqualError(t, err, "trace: filter command: map full")
	assert.Equal(t, ClassFailure, classOf(err))
	assert.Less(t, time.Since(t0), 10*time.Second, "the held command was ended, not waited for")
	assert.False(t, taskAlive("/proc", add.tgid))
}

func TestExitStatus(t *testing.T) {
	assert.Equal(t, 0, exitStatus(nil))
	assert.Equal(t, 1, exitStatus(errors.New("wait: no child")))
}
