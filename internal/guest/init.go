// Package guest is the init of ftprobe's lab VMs: when ftprobe runs as
// pid 1 it mounts the pseudo file systems, runs the command recorded in the
// initramfs, prints its exit status on a marker line and powers off.
package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// SpecPath is where the host puts the guest command.
	SpecPath = "/etc/ftprobe/guest.json"
	// StartMarker starts the console line printed just before the guest
	// command runs; then come the kernel release and the uptime in seconds.
	StartMarker = "FTPROBE-GUEST-START: "
	// ExitMarker starts the console line with the command's exit status.
	ExitMarker = "FTPROBE-GUEST-EXIT: "
)

// Spec is the guest command.
type Spec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// IsInit reports whether this process is a lab guest's init.
func IsInit() bool {
	if os.Getpid() != 1 {
		return false
	}
	_, err := os.Stat(SpecPath)
	return err == nil
}

type mnt struct{ src, dst, fstype string }

var mounts = []mnt{
	{"proc", "/proc", "proc"},
	{"sysfs", "/sys", "sysfs"},
	{"devtmpfs", "/dev", "devtmpfs"},
	{"tracefs", "/sys/kernel/tracing", "tracefs"},
	{"debugfs", "/sys/kernel/debug", "debugfs"},
	{"bpffs", "/sys/fs/bpf", "bpf"},
	{"securityfs", "/sys/kernel/security", "securityfs"}, // lockdown state for features
	{"tmpfs", "/tmp", "tmpfs"},
}

// Init runs the guest and never returns: it powers the machine off.
func Init() {
	for _, m := range mounts {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			fmt.Fprintf(os.Stderr, "ftprobe-init: mount %s on %s: %v\n", m.fstype, m.dst, err)
		}
	}
	if con, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			unix.Dup2(int(con.Fd()), fd)
		}
	}
	unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
	unix.Sethostname([]byte("ftprobe-lab"))
	status := run()
	fmt.Printf("\n%s%d\n", ExitMarker, status)
	// Wait until the UART has sent the marker before powering off.
	unix.IoctlSetInt(1, unix.TCSBRK, 1)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	select {}
}

func run() int {
	b, err := os.ReadFile(SpecPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ftprobe-init: %v\n", err)
		return 125
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil || len(s.Argv) == 0 {
		fmt.Fprintf(os.Stderr, "ftprobe-init: bad %s: %v\n", SpecPath, err)
		return 125
	}
	var u unix.Utsname
	unix.Uname(&u)
	release := strings.TrimRight(string(u.Release[:]), "\x00")
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env = append([]string{"PATH=/bin:/sbin:/usr/bin", "HOME=/tmp", "TMPDIR=/tmp", "TERM=dumb"}, s.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Dir = "/"
	up, _ := os.ReadFile("/proc/uptime")
	fmt.Printf("%s%s %s\n", StartMarker, release, strings.Fields(string(up) + " 0")[0])
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(os.Stderr, "ftprobe-init: %s killed by %v\n", s.Argv[0], ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "ftprobe-init: %v\n", err)
		return 127
	}
}
