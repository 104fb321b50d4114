// Package workload generates known kernel activity for demos, tests and
// benchmarks: opens, reads and cheap syscalls, counted exactly.
package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/plural"
)

// Spec is one workload run.
type Spec struct {
	Kind     string        // "open", "read", "syscall" or "openfail"
	Path     string        // file for open/read (default /etc/hostname)
	Count    int           // number of operations
	Interval time.Duration // pause between operations
}

// Result counts what a workload did.
type Result struct {
	Ops     int // operations done
	Errors  int // operations that failed (expected for openfail)
	LastFD  int // last fd returned by openat (open, read)
	Bytes   int // bytes read (read)
	Elapsed time.Duration
}

// Run performs the workload in the calling thread. open: openat(AT_FDCWD,
// Path, O_RDONLY)+close per op; read: one open, then Count 1-byte pread(2)s
// at offset 0; syscall: Count getppid(2)s; openfail: openat of a missing
// file, each returning -ENOENT.
func Run(s Spec) (Result, error) {
	if s.Path == "" {
		s.Path = "/etc/hostname"
	}
	if s.Count <= 0 {
		return Result{}, fmt.Errorf("workload %s: --count must be positive", s.Kind)
	}
	var r Result
	start := time.Now()
	pause := func() {
		if s.Interval > 0 {
			time.Sleep(s.Interval)
		}
	}
	switch s.Kind {
	case "open":
		for i := 0; i < s.Count; i++ {
			fd, err := unix.Openat(unix.AT_FDCWD, s.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return r, fmt.Errorf("workload open %s: %w", s.Path, err)
			}
			r.LastFD = fd
			unix.Close(fd)
			r.Ops++
			pause()
		}
	case "openfail":
		for i := 0; i < s.Count; i++ {
			_, err := unix.Openat(unix.AT_FDCWD, s.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil || !errors.Is(err, unix.ENOENT) {
				return r, fmt.Errorf("workload openfail %s: want ENOENT, got %v", s.Path, err)
			}
			r.Errors++
			r.Ops++
			pause()
		}
	case "read":
		fd, err := unix.Openat(unix.AT_FDCWD, s.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return r, fmt.Errorf("workload read %s: %w", s.Path, err)
		}
		defer unix.Close(fd)
		r.LastFD = fd
		buf := make([]byte, 1)
		for i := 0; i < s.Count; i++ {
			n, err := unix.Read(fd, buf)
			if err != nil {
				return r, fmt.Errorf("workload read %s: %w", s.Path, err)
			}
			if n == 0 {
				if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
					return r, err
				}
			}
			r.Bytes += n
			r.Ops++
			pause()
		}
	case "syscall":
		for i := 0; i < s.Count; i++ {
			unix.Getppid()
			r.Ops++
			pause()
		}
	default:
		return r, fmt.Errorf("workload: unknown kind %q (want open, openfail, read or syscall)", s.Kind)
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// Describe is a one-line account of r for humans.
func (r Result) Describe(s Spec) string {
	fd := "no fd"
	if r.Ops > r.Errors {
		fd = fmt.Sprintf("last fd %d", r.LastFD)
	}
	return fmt.Sprintf("workload %s: pid %d tid %d: %s on %s (%s, %d bytes, %s) in %s",
		s.Kind, os.Getpid(), unix.Gettid(), plural.Count(r.Ops, "op"), s.Path, fd, r.Bytes, plural.Count(r.Errors, "error"), r.Elapsed.Round(time.Microsecond))
}
