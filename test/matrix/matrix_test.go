// Package matrix runs ftprobe's kernel tests (test/kernel) in the lab: for
// each kernel of the matrix it cross-compiles ftprobe and the test binary
// for the guest architecture, boots the kernel under QEMU with
// `ftprobe vm`'s machinery and reports the guest's test output here.
//
// It runs when FTPROBE_MATRIX is set ("1" for the default matrix, or a
// comma-separated list such as "arm64:7.3,amd64:7.3"); `make test` sets it.
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

// DefaultMatrix is arm64 7.3 (the target), arm64 6.12 and 6.1, and amd64 7.3.
var DefaultMatrix = []string{"arm64:7.3", "arm64:6.12", "arm64:6.1", "amd64:7.3"}

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
		arch, ver, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok {
			t.Fatalf("FTPROBE_MATRIX entry %q: want ARCH:VERSION", entry)
		}
		t.Run(arch+"-"+ver, func(t *testing.T) {
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
			// arm64 7.3 runs every mode and takes ~12 min alone under
			// TCG (15 min once when it shared the CPUs): room for slower
			// CI machines.
			res, err := lab.Run(ctx, lab.Config{
				Kernel: k, Binary: b[0], Exec: "/kernel.test",
				Add:     []string{b[1] + ":/kernel.test"},
				Args:    append([]string{"-test.v", "-test.timeout", "35m"}, runFilter()...),
				Env:     []string{"FTPROBE_BINARY=/bin/ftprobe"},
				Timeout: 40 * time.Minute, Stdout: pw, Stderr: os.Stderr,
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
