package trace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// command is the traced command (Options.Command) while it runs.
type command struct {
	cmd    *exec.Cmd
	done   chan error // its Wait
	exited bool       // done was received: err is its status
	err    error
}

// adder adds the command's process to the tracer's tree filter
// (attach.Tracer.AddTGIDAtExec).
type adder interface {
	AddTGIDAtExec(tgid uint32) error
}

// startCommand starts o.Command held at the gate (startGated), adds it to
// t's tree filter from its exec on and opens the gate. A launcher that
// never says it runs is a failure, a command that cannot start bad
// input.
func startCommand(o Options, t adder) (*command, error) {
	cmd, gate, err := startGated(o)
	if err != nil {
		var le errLauncher
		if errors.As(err, &le) {
			return nil, failed(err)
		}
		return nil, badInput(err)
	}
	c := watchCommand(cmd)
	if err := t.AddTGIDAtExec(uint32(cmd.Process.Pid)); err != nil {
		gate.Close()
		c.stop()
		return nil, fmt.Errorf("trace: filter command: %w", err)
	}
	gate.Write([]byte{1})
	gate.Close()
	return c, nil
}

// watchCommand waits for the started cmd in the background.
func watchCommand(cmd *exec.Cmd) *command {
	c := &command{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	return c
}

// stop ends a command that is still running: SIGTERM, then SIGKILL after
// 2 s, and collects its status. A nil command has nothing to stop.
func (c *command) stop() {
	if c == nil || c.exited {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case c.err = <-c.done:
	case <-time.After(2 * time.Second):
		c.cmd.Process.Kill()
		c.err = <-c.done
	}
	c.exited = true
}

// startGated starts o.Command through `ftprobe internal-exec`, which waits
// on a pipe until the caller has added the child to the filter, so not one
// call of the command is missed. It returns once the launcher runs (it
// says so on a second pipe): the launcher's own exec of ftprobe is then
// over, and the next exec in that process is the command's, where the
// tree filter starts tracing it (Tracer.AddTGIDAtExec).
func startGated(o Options) (*exec.Cmd, *os.File, error) {
	self := o.Self
	if self == "" {
		self = "/proc/self/exe"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	defer rr.Close()
	cmd := exec.Command(self, append([]string{"internal-exec", "--"}, o.Command...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{r, rw}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		rw.Close()
		return nil, nil, fmt.Errorf("start %s: %w", o.Command[0], err)
	}
	r.Close()
	rw.Close()
	rr.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := rr.Read(make([]byte, 1)); err != nil {
		w.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, fmt.Errorf("start %s: the launcher did not start: %w", o.Command[0], errLauncher{err})
	}
	return cmd, w, nil
}

// errLauncher marks a launcher that started but never said it runs: a
// runtime failure, not bad input.
type errLauncher struct{ error }

func (e errLauncher) Unwrap() error { return e.error }

// ExecGated is the child side of startGated: say it runs on fd 4, wait
// for the gate on fd 3, then exec argv.
func ExecGated(argv []string) error {
	ready := os.NewFile(4, "ready")
	ready.Write([]byte{1})
	ready.Close()
	gate := os.NewFile(3, "gate")
	b := make([]byte, 1)
	if _, err := gate.Read(b); err != nil {
		return fmt.Errorf("trace gate: %w", err)
	}
	gate.Close()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return commandStatus(127, fmt.Errorf("command %s: %w", argv[0], err))
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return commandStatus(126, fmt.Errorf("exec %s: %w", path, err))
	}
	return nil
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}
