// Package matrix runs ftprobe's kernel tests (test/kernel) in the lab: for
// each kernel of the matrix it cross-compiles ftprobe and the test binary
// for the guest architecture, boots the kernel under QEMU with
// `ftprobe vm`'s machinery and reports the guest's test output here.
//
// It runs when FTPROBE_MATRIX is set ("1" for the default matrix, or a
// comma-separated list such as "arm64:7.3,amd64:7.3"); `make test` sets it.
// An entry ARCH:VERSION:fast runs the fast tier only (FastTests).
package matrix

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftprobe/ftprobe/internal/lab"
)

// DefaultMatrix runs every kernel test on arm64 7.3 (the target) and amd64
// 7.3, and the fast tier on Debian's other arm64 7.3 flavours (PREEMPT_RT,
// 16 KiB pages, cloud), arm64 7.2, 6.12 and 6.1, and amd64 6.12 and 6.1:
// under TCG the full suite took 33 min on arm64 7.3 alone (session 5,
// before the symbol cache), and `make test` must stay within an hour on a
// 2-core machine.
var DefaultMatrix = []string{"arm64:7.3", "amd64:7.3",
	"arm64:7.3-rt:fast", "arm64:7.3-16k:fast", "arm64:7.3-cloud:fast", "arm64:7.2:fast", "arm64:6.12:fast", "arm64:6.1:fast",
	"amd64:6.12:fast", "amd64:6.1:fast"}

// FastTests is the fast tier: the mode verdicts (trial attaches against the
// expectation table), `ftprobe features`, one asserted trace per mode the
// kernel has, the exit code of each mode it lacks, and list's verdicts
// against the kernel's on a smaller sample (-test.short: 2 functions per
// category, 10 at random).
const FastTests = "^(TestModeExpectations|TestFeatures|TestTraceOpenAndRead|TestUnsupportedModeCLI|TestVerdictAgreement)$"

func TestKernelMatrix(t *testing.T) {
	spec := os.Getenv("FTPROBE_MATRIX")
	if spec == "" {
		t.Skip("kernel matrix not requested: set FTPROBE_MATRIX=1 (as `make test` does) to boot the lab kernels")
	}
	matrix := DefaultMatrix
	if spec != "1" {
		matrix = strings.Split(spec, ",")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	built := map[string][2]string{}
	var mu sync.Mutex
	build := func(arch string) ([2]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := built[arch]; ok {
			return b, nil
		}
		bin := filepath.Join(tmp, "ftprobe-"+arch)
		tst := filepath.Join(tmp, "kernel-"+arch+".test")
		envs := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		for _, args := range [][]string{
			{"build", "-o", bin, "./cmd/ftprobe"},
			{"test", "-c", "-o", tst, "./test/kernel"},
		} {
			c := exec.Command("go", args...)
			c.Dir, c.Env = root, envs
			if out, err := c.CombinedOutput(); err != nil {
				return [2]string{}, fmt.Errorf("go %v: %w\n%s", args, err, out)
			}
		}
		built[arch] = [2]string{bin, tst}
		return built[arch], nil
	}
	start := time.Now()
	for _, entry := range matrix {
		f := strings.Split(strings.TrimSpace(entry), ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "fast") {
			t.Fatalf("FTPROBE_MATRIX entry %q: want ARCH:VERSION or ARCH:VERSION:fast", entry)
		}
		arch, ver := f[0], f[1]
		filter := runFilter()
		if len(f) == 3 {
			if filter == nil {
				filter = []string{"-test.run", FastTests}
			}
			// -test.short: the fast tier's TestVerdictAgreement samples
			// fewer functions per category.
			filter = append(filter, "-test.short")
		}
		t.Run(strings.Join(f, "-"), func(t *testing.T) {
			ctx := context.Background()
			k, err := lab.ResolveDebian(ctx, ver, arch, os.Stderr)
			if err != nil {
				t.Fatalf("resolve debian:%s %s: %v", ver, arch, err)
			}
			b, err := build(arch)
			if err != nil {
				t.Fatal(err)
			}
			pr, pw := io.Pipe()
			var summary []string
			done := make(chan struct{})
			go func() {
				defer close(done)
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					l := sc.Text()
					fmt.Printf("[%s %s] %s\n", arch, ver, l)
					if s := strings.TrimSpace(l); strings.HasPrefix(s, "--- SKIP") || strings.HasPrefix(s, "--- FAIL") {
						summary = append(summary, s)
					}
				}
			}()
			// arm64 7.3 runs every mode and took 15 min alone under TCG
			// before the verdict, stat and entry-only tests were added
			// (session 4): room for them and for slower CI machines.
			res, err := lab.Run(ctx, lab.Config{
				Kernel: k, Binary: b[0], Exec: "/kernel.test",
				Add:     []string{b[1] + ":/kernel.test"},
				Args:    append([]string{"-test.v", "-test.timeout", "50m"}, filter...),
				Env:     []string{"FTPROBE_BINARY=/bin/ftprobe"},
				Timeout: 55 * time.Minute, Stdout: pw, Stderr: os.Stderr,
			})
			pw.Close()
			<-done
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			t.Logf("%s (guest %s, %s): exit %d, boot to tests %.1fs, total %.1fs", k, res.Release, res.Accel, res.ExitStatus, res.Boot.Seconds(), res.Total.Seconds())
			for _, s := range summary {
				t.Logf("  %s", s)
			}
			if res.ExitStatus != 0 {
				t.Errorf("kernel tests failed on %s (exit %d)", k, res.ExitStatus)
			}
		})
	}
	t.Logf("matrix %v took %s", matrix, time.Since(start).Round(time.Second))
}

// runFilter passes FTPROBE_TEST_RUN to the guest tests as -test.run.
func runFilter() []string {
	if r := os.Getenv("FTPROBE_TEST_RUN"); r != "" {
		return []string{"-test.run", r}
	}
	return nil
}
