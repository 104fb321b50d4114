package trace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// ErrNoSuchTask is wrapped by CheckTargets when --pid or --tid names no
// live process or thread, or one that is not what the flag asks for: the
// trace would record nothing. Bad input.
var ErrNoSuchTask = errors.New("no such process or thread")

// CheckTargets checks, before anything is attached, that the process
// f.TGID (--pid) and the thread f.TID (--tid) exist now, from
// /proc/N/status (a thread's /proc/N exists too, though /proc does not
// list it): --pid must name a process (a thread group leader, Tgid == N),
// --tid any thread, and with both the thread must belong to the process.
// A task that exits later is no error (Run reports when it exited). Errors
// wrap ErrNoSuchTask; zero fields are not checked.
func CheckTargets(f attach.Filters) error { return checkTargets("/proc", f) }

func checkTargets(proc string, f attach.Filters) error {
	if f.TGID != 0 {
		tg, err := taskTgid(proc, f.TGID)
		if err != nil {
			return fmt.Errorf("--pid %d: %w: %v; nothing would be traced", f.TGID, ErrNoSuchTask, err)
		}
		if tg != f.TGID {
			return fmt.Errorf("--pid %d: %w: %d is a thread of process %d, not a process (use --tid %d, or --pid %d)", f.TGID, ErrNoSuchTask, f.TGID, tg, f.TGID, tg)
		}
	}
	if f.TID != 0 {
		tg, err := taskTgid(proc, f.TID)
		if err != nil {
			return fmt.Errorf("--tid %d: %w: %v; nothing would be traced", f.TID, ErrNoSuchTask, err)
		}
		if f.TGID != 0 && tg != f.TGID {
			return fmt.Errorf("--tid %d: %w: thread %d belongs to process %d, not --pid %d; nothing would be traced", f.TID, ErrNoSuchTask, f.TID, tg, f.TGID)
		}
	}
	return nil
}

// taskTgid returns the thread group of task id from PROC/id/status, or
// why the task is not there ("no process or thread 42 (no /proc/42)", "42
// has exited (zombie)").
func taskTgid(proc string, id uint32) (uint32, error) {
	b, err := os.ReadFile(proc + "/" + strconv.FormatUint(uint64(id), 10) + "/status")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrInvalid) {
		return 0, fmt.Errorf("no process or thread %d (no %s/%d)", id, proc, id)
	}
	if err != nil {
		return 0, fmt.Errorf("read %s/%d/status: %w", proc, id, err)
	}
	var tgid uint64
	state := ""
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Tgid":
			tgid, _ = strconv.ParseUint(v, 10, 32)
		case "State":
			state = v
		}
	}
	if tgid == 0 {
		return 0, fmt.Errorf("%s/%d/status has no Tgid line", proc, id)
	}
	if strings.HasPrefix(state, "Z") || strings.HasPrefix(state, "X") {
		return 0, fmt.Errorf("%d has exited (%s)", id, state)
	}
	return uint32(tgid), nil
}

// taskAlive reports whether task id still runs (PROC/id/stat exists and
// its state is not zombie or dead).
func taskAlive(proc string, id uint32) bool {
	b, err := os.ReadFile(proc + "/" + strconv.FormatUint(uint64(id), 10) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}
