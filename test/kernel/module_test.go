package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// moduleRequired are the kernels (kernelKey) on which TestModuleFunction
// must run: the matrix's full tiers, for which test/matrix carries the
// kernel's own tun.ko into the guest.
var moduleRequired = map[string]bool{"arm64 7.3": true, "amd64 7.3": true}

// TestModuleFunction: --arg and --filter on a function of a
// loaded kernel module, through the real binary. The test loads the
// kernel's own tun.ko (finit_module), traces tun_chr_open(struct inode *,
// struct file *) with --arg 'file->f_flags' --filter 'file->f_flags & 2'
// (O_RDWR) while it opens /dev/net/tun three times read-write (once with
// O_NONBLOCK, so the values differ) and twice read-only: exactly the three
// read-write opens come out, each naming module tun and carrying the flags
// the kernel stored for that open, and the summary counts the two
// read-only opens as rejected. Modes: the ones that trace module functions
// (fentry+fexit, the fprobe modes, kprobe+kretprobe); fsession and the
// tracing multi links must refuse a module function with their documented
// reason.
func TestModuleFunction(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	t0 := time.Now()
	loadTestModule(t, e)
	dev := tunDevice(t)
	t.Logf("tun loaded and %s there in %s", dev, time.Since(t0).Round(time.Millisecond))

	// open(2) forces O_LARGEFILE on 64-bit kernels (its value differs by
	// arch); O_CLOEXEC is not kept in f_flags.
	largefile := map[string]uint64{"amd64": 0x8000, "arm64": 0x20000}[e.kin.Arch]
	require.NotZero(t, largefile, "arch %s", e.kin.Arch)
	rdwr := uint64(unix.O_RDWR) | largefile
	want := []uint64{rdwr, rdwr | unix.O_NONBLOCK, rdwr} // the values of the kept calls, in order
	opens := []int{unix.O_RDWR, unix.O_RDONLY, unix.O_RDWR | unix.O_NONBLOCK, unix.O_RDONLY, unix.O_RDWR}

	for _, mode := range moduleModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			start := time.Now()
			lines, stderr := traceCLI(t, bin, []string{"trace", "--mode", mode, "--output", "json", "--pid", strconv.Itoa(os.Getpid()),
				"tun_chr_open", "--arg", "file->f_flags", "--filter", "file->f_flags & 2"}, func() {
				for i, fl := range opens {
					fd, err := unix.Open(dev, fl|unix.O_CLOEXEC, 0)
					require.NoError(t, err, "open %d of %s", i, dev)
					unix.Close(fd)
				}
			})
			// The last stderr line is the summary: the CLI's own account.
			t.Logf("%s in %s: %s", mode, time.Since(start).Round(time.Millisecond), lastLine(stderr))
			assert.Contains(t, stderr, "ftprobe: tracing 1 function in "+mode+" mode")
			var entries, exits []map[string]any
			var sum map[string]any
			for _, m := range lines {
				switch m["type"] {
				case "entry":
					entries = append(entries, m)
				case "exit":
					exits = append(exits, m)
				case "summary":
					sum = m
				}
			}
			require.Len(t, entries, len(want), "the read-write opens: %v\n%s", lines, stderr)
			require.Len(t, exits, len(want), "%v", lines)
			for i, ev := range entries {
				assert.Equal(t, "tun_chr_open", ev["func"], "entry %d", i)
				assert.Equal(t, "tun", ev["module"], "entry %d: the function's module", i)
				assert.Equal(t, mode, ev["mode"], "entry %d", i)
				assert.EqualValues(t, os.Getpid(), ev["tgid"], "entry %d", i)
				assert.Equal(t, map[string]any{"file->f_flags": int64(want[i])}, numValues(ev["values"]), "entry %d: f_flags", i)
				assert.Equal(t, "tun", exits[i]["module"], "exit %d", i)
				assert.EqualValues(t, 0, exits[i]["ret"], "exit %d: tun_chr_open succeeded", i)
				assert.Equal(t, ev["tid"], exits[i]["tid"], "exit %d", i)
			}
			require.NotNil(t, sum, "summary record: %v", lines)
			assert.EqualValues(t, 2, sum["filter_rejected"], "the read-only opens")
			assert.EqualValues(t, 1, sum["functions"])
			assert.EqualValues(t, 2*len(want), sum["events"], "entries and exits")
			// per_function counts exits, under the name the plan
			// displays: a module function's with its module.
			assert.Equal(t, map[string]any{"tun_chr_open [tun]": int64(len(want))}, numValues(sum["per_function"]))
			assertNothingAttached(t)
		})
	}
	// fsession and the tracing multi links load their programs against vmlinux BTF
	// ids only (internal/attach TrampolineLoader, README "Linux 7.x
	// trampoline modes"): a module function is refused before anything
	// is loaded. When that changes, move these modes into moduleModes.
	for _, mode := range []string{attach.ModeFSession, attach.ModeFSessionMulti, attach.ModeFentryMulti} {
		if !e.works[mode] {
			continue
		}
		t.Run(mode+"-refused", func(t *testing.T) {
			out, err := exec.Command(bin, "trace", "--mode", mode, "tun_chr_open", "--arg", "file->f_flags", "--duration", "1s").CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 2, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), "tun_chr_open [tun]")
			assert.Contains(t, string(out), "module function: ftprobe loads fsession and multi-link programs against vmlinux BTF only (use fentry+fexit)")
			assertNothingAttached(t)
		})
	}
}

// moduleModes are the modes that trace module functions, less on arm64
// for the CI budget (each CLI start and attach costs seconds under TCG):
// fentry+fexit and kprobe.session, the two families of attach paths.
func moduleModes(e *env) []string {
	if e.kin.Arch == "arm64" {
		return []string{attach.ModeFentryFexit, attach.ModeKprobeSession}
	}
	return []string{attach.ModeFentryFexit, attach.ModeKprobeSession, attach.ModeKprobeMulti, attach.ModeKprobe}
}

// loadTestModule loads the module test/matrix carried into the guest
// (FTPROBE_TEST_MODULE) and unloads it when the test ends, so that the
// tests after it see the module set they were written for. Without the
// file the test fails on the kernels that must run it, with the host's
// reason when it gave one.
func loadTestModule(t *testing.T, e *env) {
	t.Helper()
	path := os.Getenv("FTPROBE_TEST_MODULE")
	if path == "" {
		why := os.Getenv("FTPROBE_TEST_MODULE_ERROR")
		if why == "" {
			why = "FTPROBE_TEST_MODULE not set (test/matrix sets it and carries the module)"
		}
		if inLab() && moduleRequired[kernelKey(e.kin)] {
			t.Fatalf("no tun.ko to load on %s, where this test must run: %s", e.kin, why)
		}
		t.Skipf("no tun.ko to load: %s", why)
	}
	f, err := os.Open(path)
	require.NoError(t, err, "module file")
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return // loaded before (a rerun in the same guest); left loaded
	}
	require.NoError(t, err, "finit_module %s", path)
	t.Cleanup(func() {
		// O_NONBLOCK: fail at once rather than wait if something still
		// holds the module.
		if err := unix.DeleteModule("tun", unix.O_NONBLOCK); err != nil {
			t.Errorf("delete_module tun: %v", err)
		}
	})
}

// tunDevice returns /dev/net/tun: devtmpfs makes it when tun registers its
// misc device (asynchronously, so it is waited for); failing that, it is
// made with tun's fixed numbers (misc major 10, TUN_MINOR 200).
func tunDevice(t *testing.T) string {
	t.Helper()
	const dev = "/dev/net/tun"
	for i := 0; i < 20; i++ {
		if _, err := os.Stat(dev); err == nil {
			return dev
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, os.MkdirAll("/dev/net", 0o755))
	require.NoError(t, unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))), "mknod %s", dev)
	t.Logf("%s made with mknod (devtmpfs did not)", dev)
	return dev
}

// traceCLI runs the ftprobe binary with args, runs fn once it says it is
// tracing, stops it with SIGINT and returns its JSON lines and stderr.
func traceCLI(t *testing.T, bin string, args []string, fn func()) ([]map[string]any, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	var stderr strings.Builder
	ready := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if !seen && strings.HasPrefix(sc.Text(), "ftprobe: tracing ") {
				seen = true
				close(ready)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	select {
	case <-ready:
	case err := <-exited:
		<-copied
		t.Fatalf("ftprobe %s exited before tracing: %v\n%s", strings.Join(args, " "), err, stderr.String())
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-exited
		<-copied
		t.Fatalf("ftprobe %s: not tracing after 3 min\n%s", strings.Join(args, " "), stderr.String())
	}
	fn()
	time.Sleep(50 * time.Millisecond) // let the ringbuf reader catch up, as traceAround does
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := <-exited
	<-copied
	require.NoError(t, err, "ftprobe %s\n%s", strings.Join(args, " "), stderr.String())
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if l != "" {
			lines = append(lines, decodeLine(t, l))
		}
	}
	return lines, stderr.String()
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[len(l)-1]
}
