// Package lab boots real kernels under QEMU with an initramfs holding a
// static ftprobe (or a test binary) and a Go init, so tracing code can be
// exercised on kernels the host cannot provide.
package lab

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/ftprobe/ftprobe/internal/guest"
)

// Config describes one lab run.
type Config struct {
	Kernel   *Kernel
	Binary   string   // ftprobe built for the guest architecture (static)
	Exec     string   // guest path to run instead of ftprobe (e.g. a test binary); "" runs ftprobe
	Args     []string // arguments of the guest command
	Env      []string // extra guest environment, KEY=VALUE
	Add      []string // HOST:GUEST files to carry
	CPUs     int
	MemoryMB int
	Timeout  time.Duration
	Accel    string   // auto, kvm, tcg or icount (TCG counting instructions as time, see qemuArgs)
	Append   string   // extra kernel parameters
	QemuArgs []string // extra QEMU arguments, after ftprobe's (e.g. -plugin for scripts/insnprof)
	Keep     bool     // keep the initramfs and print its path
	Stdout   io.Writer
	Stderr   io.Writer // harness messages
}

// Result is the outcome of a lab run.
type Result struct {
	ExitStatus int           // the guest command's exit status
	Accel      string        // accelerator actually used
	Boot       time.Duration // from QEMU start to the guest command start
	KernelUp   time.Duration // guest uptime when the command started (kernel boot + init)
	Total      time.Duration // from Run start to QEMU exit
	Prepare    time.Duration // building the initramfs
	Initramfs  string        // kept initramfs path (Keep only)
	Release    string        // guest uname -r
}

// ErrTimeout reports a guest that did not finish within Config.Timeout.
var ErrTimeout = errors.New("guest did not finish in time")

// QemuBinary returns the QEMU system emulator for arch and the Debian
// package that holds it.
func QemuBinary(arch string) (bin, pkg string) {
	if arch == "arm64" {
		return "qemu-system-aarch64", "qemu-system-arm"
	}
	return "qemu-system-x86_64", "qemu-system-x86"
}

// Run boots the kernel, runs the guest command and returns its exit status.
// Errors: QEMU missing (naming the package), a kernel that panics or hangs
// (ErrTimeout, with the last 30 console lines), an initramfs that cannot be
// built.
func Run(ctx context.Context, c Config) (*Result, error) {
	start := time.Now()
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	bin, pkg := QemuBinary(c.Kernel.Arch)
	qemu, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found: install it with `apt-get install %s`", bin, pkg)
	}
	initrd, err := os.CreateTemp("", "ftprobe-initramfs-*.cpio")
	if err != nil {
		return nil, err
	}
	initrd.Close()
	if !c.Keep {
		defer os.Remove(initrd.Name())
	}
	if err := c.buildInitramfs(initrd.Name()); err != nil {
		return nil, err
	}
	res := &Result{Prepare: time.Since(start)}
	if c.Keep {
		res.Initramfs = initrd.Name()
	}
	accel := c.Accel
	if accel == "" || accel == "auto" {
		accel = "tcg"
		if kvmUsable(c.Kernel.Arch) {
			accel = "kvm"
		}
	}
	res.Accel = accel
	err = c.boot(ctx, qemu, initrd.Name(), accel, res, start)
	if errors.Is(err, errKVMBroken) && c.Accel != "kvm" {
		fmt.Fprintf(c.Stderr, "ftprobe vm: KVM cannot boot this kernel (nested hypervisor); falling back to TCG\n")
		res.Accel = "tcg"
		err = c.boot(ctx, qemu, initrd.Name(), "tcg", res, start)
	}
	res.Total = time.Since(start)
	return res, err
}

func kvmUsable(arch string) bool {
	host := runtime.GOARCH
	if host != arch {
		return false
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

var errKVMBroken = errors.New("kvm cannot run this guest")

func (c *Config) qemuArgs(initrd, accel string) []string {
	cpus := c.CPUs
	if cpus <= 0 {
		cpus = 2
	}
	mem := c.MemoryMB
	if mem <= 0 {
		mem = 1024
	}
	var args []string
	console := "ttyS0"
	if accel == "icount" {
		// Instruction counting (QEMU -icount shift=0): the guest clock
		// advances 1 ns per executed guest instruction while a vCPU runs
		// (and in real time while all are idle, sleep=on), so a CPU-bound
		// timing is an instruction count, the same whatever else the host
		// runs. icount needs single-threaded TCG. The cost of emulator
		// work between instructions (interrupt checks at an irq enable,
		// helper calls) is not in it; nor are caches or memory latency.
		args = append(args, "-cpu", "max", "-accel", "tcg,thread=single", "-icount", "shift=0,sleep=on")
		if c.Kernel.Arch == "arm64" {
			console = "ttyAMA0"
			args = append([]string{"-M", "virt"}, args...)
		}
	} else if c.Kernel.Arch == "arm64" {
		console = "ttyAMA0"
		args = append(args, "-M", "virt")
		if accel == "kvm" {
			args = append(args, "-cpu", "host", "-accel", "kvm")
		} else {
			args = append(args, "-cpu", "max", "-accel", "tcg")
		}
	} else {
		if accel == "kvm" {
			args = append(args, "-cpu", "host", "-accel", "kvm")
		} else {
			// Single-threaded TCG: with one host thread per vCPU, x86
			// live text patching (text_poke_bp, e.g. the sched_switch
			// tracepoint key that fprobe's fgraph enables) raced with
			// the other vCPU's translated code and oopsed on int3 in
			// __schedule (amd64 7.3.4).
			args = append(args, "-cpu", "max", "-accel", "tcg,thread=single")
		}
	}
	app := "console=" + console + " quiet panic=-1 oops=panic"
	if accel == "icount" {
		app += " ftprobe.clock=icount" // kfeat.IcountParam: compare says how it measured
	}
	if c.Append != "" {
		app += " " + c.Append
	}
	args = append(args, "-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
		"-kernel", c.Kernel.Image, "-initrd", initrd, "-append", app)
	return append(args, c.QemuArgs...)
}

// boot runs QEMU once, streaming the console to c.Stdout (without the exit
// marker) and returning the guest's exit status in res.
func (c *Config) boot(ctx context.Context, qemu, initrd, accel string, res *Result, start time.Time) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	qstart := time.Now()
	cmd := exec.Command(qemu, c.qemuArgs(initrd, accel)...)
	cmd.Stdin = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", qemu, err)
	}
	con := &qemuConsole{
		c: c, res: res, qstart: qstart, status: -1, sawOutput: make(chan struct{}, 1),
		kill: func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) },
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		con.readStderr(stderr)
	}()
	go func() {
		defer wg.Done()
		con.readStdout(stdout)
	}()
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- cmd.Wait()
	}()
	timedOut, interrupted, werr := con.wait(ctx, done, accel == "kvm")
	con.mu.Lock()
	defer con.mu.Unlock()
	tail := strings.Join(con.tail, "\n")
	if con.kvmBroken {
		return errKVMBroken
	}
	if interrupted {
		return fmt.Errorf("interrupted; last console lines:\n%s", tail)
	}
	if timedOut {
		return fmt.Errorf("%w (--timeout %s, kernel %s); last console lines:\n%s", ErrTimeout, timeout, c.Kernel, tail)
	}
	if con.status < 0 {
		return fmt.Errorf("guest powered off without an exit status (kernel panic or crash; qemu: %v); last console lines:\n%s", werr, tail)
	}
	res.ExitStatus = con.status
	return nil
}

// qemuConsole follows one QEMU run's output: it streams the guest console
// to c.Stdout, keeps its last 30 lines, reads the start and exit markers,
// and tells a broken KVM apart.
type qemuConsole struct {
	c         *Config
	res       *Result   // Boot, Release and KernelUp, from the start marker
	qstart    time.Time // when QEMU started
	kill      func()    // kills QEMU's process group
	sawOutput chan struct{}

	mu        sync.Mutex
	tail      []string // the last 30 console lines
	status    int      // the guest's exit status; -1 before the exit marker
	kvmBroken bool
}

// readStderr copies QEMU's messages to c.Stderr, killing QEMU when KVM
// fails under it.
func (con *qemuConsole) readStderr(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		l := sc.Text()
		// A nested hypervisor may also refuse an MSR the guest CPU
		// model sets: QEMU aborts ("failed to set MSR 0x10a").
		if strings.Contains(l, "KVM internal error") || strings.Contains(l, "kvm run failed") || strings.Contains(l, "failed to set MSR") {
			con.mu.Lock()
			con.kvmBroken = true
			con.mu.Unlock()
			con.kill()
		}
		fmt.Fprintln(con.c.Stderr, "qemu: "+l)
	}
	io.Copy(io.Discard, stderr) // keep QEMU from blocking on an overlong line
}

// readStdout reads the guest console line by line until QEMU closes it.
func (con *qemuConsole) readStdout(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	first := true
	for {
		raw, rerr := br.ReadString('\n')
		if raw == "" && rerr != nil {
			return
		}
		l := strings.TrimRight(raw, "\r\n")
		if first {
			first = false
			con.sawOutput <- struct{}{}
		}
		con.mu.Lock()
		con.tail = append(con.tail, l)
		if len(con.tail) > 30 {
			con.tail = con.tail[1:]
		}
		con.mu.Unlock()
		con.line(l)
	}
}

// line handles one console line: the start marker sets the boot figures,
// the exit marker the status; the text before a marker and every other
// line but the power-down message go to c.Stdout.
func (con *qemuConsole) line(l string) {
	if i := strings.Index(l, guest.StartMarker); i >= 0 {
		con.res.Boot = time.Since(con.qstart)
		f := strings.Fields(l[i+len(guest.StartMarker):])
		if len(f) > 0 {
			con.res.Release = f[0]
		}
		if len(f) > 1 {
			if up, err := strconv.ParseFloat(f[1], 64); err == nil {
				con.res.KernelUp = time.Duration(up * float64(time.Second))
			}
		}
		if pre := l[:i]; pre != "" {
			fmt.Fprintln(con.c.Stdout, pre)
		}
		return
	}
	if strings.HasSuffix(l, "reboot: Power down") {
		return
	}
	if i := strings.Index(l, guest.ExitMarker); i >= 0 {
		if n, err := strconv.Atoi(strings.TrimSpace(l[i+len(guest.ExitMarker):])); err == nil {
			con.mu.Lock()
			con.status = n
			con.mu.Unlock()
		}
		if pre := l[:i]; pre != "" {
			fmt.Fprintln(con.c.Stdout, pre)
		}
		return
	}
	fmt.Fprintln(con.c.Stdout, l)
}

// wait waits for QEMU's exit (done), killing it when ctx ends (timedOut
// on its deadline, interrupted otherwise) or, under KVM, when the guest
// prints nothing in 30 s (a broken KVM).
func (con *qemuConsole) wait(ctx context.Context, done <-chan error, kvm bool) (timedOut, interrupted bool, werr error) {
	var noOutput <-chan time.Time
	if kvm {
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		noOutput = t.C
	}
	ctxDone := ctx.Done()
	for {
		select {
		case werr = <-done:
			return timedOut, interrupted, werr
		case <-con.sawOutput:
			noOutput = nil
		case <-noOutput:
			con.mu.Lock()
			con.kvmBroken = true
			con.mu.Unlock()
			con.kill()
		case <-ctxDone:
			ctxDone = nil
			timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
			interrupted = !timedOut
			con.kill()
		}
	}
}

// buildInitramfs writes a newc cpio: /init (ftprobe, which acts as init when
// it runs as pid 1), /bin/ftprobe, the guest command in /etc/ftprobe/guest.json,
// a known file for workloads, and the --add files.
func (c *Config) buildInitramfs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	a := &cpioTree{w: cpio.NewWriter(f), dirs: map[string]bool{}}
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/run", "/etc"} {
		if err := a.mkdir(d); err != nil {
			return err
		}
	}
	if err := a.addFile("/bin/ftprobe", c.Binary); err != nil {
		return fmt.Errorf("guest binary: %w", err)
	}
	if err := a.symlink("/init", "/bin/ftprobe"); err != nil {
		return err
	}
	if err := c.addGuestFiles(a); err != nil {
		return err
	}
	for _, add := range c.Add {
		host, g, err := splitAdd(add)
		if err != nil {
			return err
		}
		if err := a.addFile(g, host); err != nil {
			return err
		}
	}
	if err := a.w.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return f.Close()
}

// addGuestFiles adds the guest command's spec, /etc/hostname and the
// kernel's config as /boot/config-RELEASE when known.
func (c *Config) addGuestFiles(a *cpioTree) error {
	argv := append([]string{"/bin/ftprobe"}, c.Args...)
	if c.Exec != "" {
		argv = append([]string{c.Exec}, c.Args...)
	}
	spec, _ := json.Marshal(guest.Spec{Argv: argv, Env: append([]string{"FTPROBE_LAB=1", "FTPROBE_LAB_KERNEL=" + c.Kernel.String()}, c.Env...)})
	if err := a.addBytes(guest.SpecPath, spec, 0o644); err != nil {
		return err
	}
	if err := a.addBytes("/etc/hostname", []byte("ftprobe-lab\n"), 0o644); err != nil {
		return err
	}
	if c.Kernel.Config != "" && c.Kernel.Release != "" {
		if b, err := os.ReadFile(c.Kernel.Config); err == nil {
			if err := a.addBytes("/boot/config-"+c.Kernel.Release, b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpioTree writes files into a cpio archive, each directory once before
// the first file in it.
type cpioTree struct {
	w    *cpio.Writer
	dirs map[string]bool // directories written
}

// mkdir writes d and its parents not written yet.
func (a *cpioTree) mkdir(d string) error {
	var parts []string
	for d != "/" && d != "." && d != "" {
		parts = append([]string{d}, parts...)
		d = filepath.Dir(d)
	}
	for _, p := range parts {
		if a.dirs[p] {
			continue
		}
		a.dirs[p] = true
		if err := a.w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(p, "/"), Mode: cpio.TypeDir | 0o755}); err != nil {
			return err
		}
	}
	return nil
}

// addBytes writes b as the file name.
func (a *cpioTree) addBytes(name string, b []byte, mode cpio.FileMode) error {
	if err := a.mkdir(filepath.Dir(name)); err != nil {
		return err
	}
	if err := a.w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(name, "/"), Mode: cpio.TypeReg | mode, Size: int64(len(b))}); err != nil {
		return err
	}
	_, err := a.w.Write(b)
	return err
}

// addFile copies the host file src as name, with its permissions.
func (a *cpioTree) addFile(name, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("--add %s: %w", src, err)
	}
	if err := a.mkdir(filepath.Dir(name)); err != nil {
		return err
	}
	if err := a.w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(name, "/"), Mode: cpio.TypeReg | cpio.FileMode(fi.Mode().Perm()), Size: fi.Size()}); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(a.w, in)
	return err
}

// symlink writes name as a symbolic link to target.
func (a *cpioTree) symlink(name, target string) error {
	if err := a.mkdir(filepath.Dir(name)); err != nil {
		return err
	}
	if err := a.w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(name, "/"), Mode: cpio.TypeSymlink | 0o777, Linkname: target, Size: int64(len(target))}); err != nil {
		return err
	}
	_, err := a.w.Write([]byte(target))
	return err
}

func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

// CheckAdd validates --add entries before anything boots: HOST:GUEST with
// an absolute guest path, HOST a regular file (directories are not
// copied). Errors name the entry.
func CheckAdd(add []string) error {
	for _, a := range add {
		host, _, err := splitAdd(a)
		if err != nil {
			return err
		}
		fi, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("--add %q: %w", a, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("--add %q: %s is not a regular file (--add copies files, one per flag)", a, host)
		}
	}
	return nil
}

// splitAdd splits an --add entry HOST:GUEST; GUEST must be absolute.
func splitAdd(a string) (host, guest string, err error) {
	host, guest, ok := strings.Cut(a, ":")
	if !ok || !strings.HasPrefix(guest, "/") {
		return "", "", fmt.Errorf("--add %q: want HOST:GUEST with an absolute guest path", a)
	}
	return host, guest, nil
}
