// Package matrix runs ftprobe's kernel tests (test/kernel) in the lab: for
// each kernel of the matrix it cross-compiles ftprobe and the test binary
// for the guest architecture, boots the kernel under QEMU with
// `ftprobe vm`'s machinery and reports the guest's test output here.
//
// It runs when FTPROBE_MATRIX is set ("1" for the default matrix, or a
// comma-separated list such as "arm64:7.3,amd64:7.3"); `make test` sets it.
// An entry ARCH:VERSION:fast runs the fast tier only (FastTests).
// FTPROBE_MATRIX_JOBS guests run at once (default 2), each taking the next
// entry in the matrix's order.
package matrix

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftprobe/ftprobe/internal/lab"
)

// DefaultMatrix runs every kernel test on arm64 7.3 (the target) and amd64
// 7.3, and the fast tier on Debian's other arm64 7.3 flavours (PREEMPT_RT,
// 16 KiB pages, cloud), arm64 7.2, 6.12 and 6.1, and amd64 6.12 and 6.1,
// and once on amd64 7.3 with the programs loaded as compiled
// (FTPROBE_SPECIALIZE=off: the specializer must change no result). Under
// TCG the full suite is the longest on arm64 7.3: it comes first, beside
// amd64 7.3's and then the fast tiers, so that `make test` stays within
// an hour on a 2-core machine.
var DefaultMatrix = []string{"arm64:7.3", "amd64:7.3",
	"arm64:7.3-rt:fast", "arm64:7.3-16k:fast", "arm64:7.3-cloud:fast", "arm64:7.2:fast", "arm64:6.12:fast", "arm64:6.1:fast",
	"amd64:6.12:fast", "amd64:6.1:fast", "amd64:7.3:fast:nospecialize"}

// FastTests is the fast tier: the mode verdicts (trial attaches against the
// expectation table), `ftprobe features`, one asserted trace per mode the
// kernel has, the exit code of each mode it lacks, and list's verdicts
// against the kernel's on a smaller sample (-test.short: 2 functions per
// category, 10 at random).
const FastTests = "^(TestModeExpectations|TestFeatures|TestTraceOpenAndRead|TestUnsupportedModeCLI|TestVerdictAgreement)$"

func TestKernelMatrix(t *testing.T) {
	spec := os.Getenv("FTPROBE_MATRIX")
	if spec == "" {
		t.Skip("test/matrix: kernel tests run inside the lab VM (make lab-test, or FTPROBE_MATRIX=1); none ran on this host")
	}
	matrix := DefaultMatrix
	if spec != "1" {
		matrix = strings.Split(spec, ",")
	}
	for _, entry := range matrix {
		if _, _, ok := entryFlags(strings.Split(strings.TrimSpace(entry), ":")); !ok {
			t.Fatalf("FTPROBE_MATRIX entry %q: want ARCH:VERSION, then optionally :fast and :nospecialize", entry)
		}
	}
	jobs, err := matrixJobs()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	m := &matrixRun{root: root, tmp: t.TempDir(), built: map[string][2]string{}}
	start := time.Now()
	// jobs guests at once, each worker taking the next entry in the
	// matrix's order (the full tiers, the longest, first).
	queue := make(chan string, len(matrix))
	for _, entry := range matrix {
		queue <- strings.TrimSpace(entry)
	}
	close(queue)
	jobs = min(jobs, len(matrix))
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for entry := range queue {
				f := strings.Split(entry, ":")
				t.Run(strings.Join(f, "-"), func(t *testing.T) { m.runEntry(t, f) })
			}
		})
	}
	wg.Wait()
	t.Logf("matrix %v took %s (%d guests at once)", matrix, time.Since(start).Round(time.Second), jobs)
	// Last, so that a log cut to its tail (CI's) still names them.
	for _, f := range m.failed {
		t.Logf("failed: %s", f)
	}
}

// matrixJobs reads FTPROBE_MATRIX_JOBS, how many guests run at once
// (default 2: the full tiers of both architectures side by side, each
// guest's TCG mostly one host thread on a 2-core machine).
func matrixJobs() (int, error) {
	v := os.Getenv("FTPROBE_MATRIX_JOBS")
	if v == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("FTPROBE_MATRIX_JOBS=%q: want a whole number of guests, at least 1", v)
	}
	return n, nil
}

// matrixRun is one matrix run's shared state: the binaries built per
// architecture and every kernel's failures, guarded by mu.
type matrixRun struct {
	root, tmp string
	mu        sync.Mutex
	resolve   sync.Mutex // one kernel download at a time
	built     map[string][2]string
	failed    []string // "--- FAIL" lines of every kernel
}

// fail records a line for the log's tail.
func (m *matrixRun) fail(format string, a ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = append(m.failed, fmt.Sprintf(format, a...))
}

// build cross-compiles ftprobe and the kernel tests for arch, once per run.
func (m *matrixRun) build(arch string) ([2]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.built[arch]; ok {
		return b, nil
	}
	bin := filepath.Join(m.tmp, "ftprobe-"+arch)
	tst := filepath.Join(m.tmp, "kernel-"+arch+".test")
	envs := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	for _, args := range [][]string{
		{"build", "-o", bin, "./cmd/ftprobe"},
		{"test", "-c", "-o", tst, "./test/kernel"},
	} {
		c := exec.Command("go", args...)
		c.Dir, c.Env = m.root, envs
		if out, err := c.CombinedOutput(); err != nil {
			return [2]string{}, fmt.Errorf("go %v: %w\n%s", args, err, out)
		}
	}
	m.built[arch] = [2]string{bin, tst}
	return m.built[arch], nil
}

// runEntry boots one matrix entry's kernel (f: ARCH, VERSION, flags) and
// runs its tier of the kernel tests in it.
func (m *matrixRun) runEntry(t *testing.T, f []string) {
	fast, noSpec, _ := entryFlags(f)
	arch, ver, tag := f[0], f[1], strings.Join(f[1:], ":")
	filter := runFilter()
	if fast {
		if !slices.Contains(filter, "-test.run") {
			filter = append([]string{"-test.run", FastTests}, filter...)
		}
		// -test.short: the fast tier's TestVerdictAgreement samples
		// fewer functions per category.
		filter = append(filter, "-test.short")
	}
	ctx := context.Background()
	m.resolve.Lock()
	k, err := lab.ResolveDebian(ctx, ver, arch, os.Stderr)
	m.resolve.Unlock()
	if err != nil {
		m.fail("%s %s: resolve: %v", arch, tag, err)
		t.Fatalf("resolve debian:%s %s: %v", ver, arch, err)
	}
	b, err := m.build(arch)
	if err != nil {
		m.fail("%s %s: build: %v", arch, tag, err)
		t.Fatal(err)
	}
	add := []string{b[1] + ":/kernel.test"}
	env := []string{"FTPROBE_BINARY=/bin/ftprobe"}
	if noSpec {
		// ftprobe and the test binary load the programs as compiled
		// (package specialize).
		env = append(env, "FTPROBE_SPECIALIZE=off")
	}
	if runsTest(filter, "TestModuleFunction") {
		m.resolve.Lock()
		add, env = withModule(ctx, k, add, env)
		m.resolve.Unlock()
	}
	pr, pw := io.Pipe()
	out := make(chan guestOutput)
	go func() { out <- scanGuest(pr, arch, tag) }()
	// arm64 7.3 runs every mode, the longest suite under TCG, beside
	// another guest: the timeout leaves room for slower CI machines.
	res, err := lab.Run(ctx, lab.Config{
		Kernel: k, Binary: b[0], Exec: "/kernel.test",
		Add:     add,
		Args:    append([]string{"-test.v", "-test.timeout", "65m"}, filter...),
		Env:     env,
		Timeout: 70 * time.Minute, Stdout: pw, Stderr: os.Stderr,
	})
	pw.Close()
	g := <-out
	if err != nil {
		m.fail("%s %s: %v", arch, tag, err)
		t.Fatalf("%s: %v", k, err)
	}
	t.Logf("%s (guest %s, %s): exit %d, boot to tests %.1fs, total %.1fs", k, res.Release, res.Accel, res.ExitStatus, res.Boot.Seconds(), res.Total.Seconds())
	m.report(t, g, arch+" "+tag, res.ExitStatus)
	if res.ExitStatus != 0 {
		t.Errorf("kernel tests failed on %s (exit %d)", k, res.ExitStatus)
	}
}

// guestOutput is what scanGuest keeps of a guest's test output: the SKIP
// and FAIL lines with each failure's detail, and the detail lines after
// the last test result (a panic, a timeout).
type guestOutput struct {
	summary, leftover []string
}

// scanGuest prints the guest's test output prefixed with its entry and
// keeps its summary.
func scanGuest(r io.Reader, arch, tag string) guestOutput {
	var g guestOutput
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var why []string
	for sc.Scan() {
		l := sc.Text()
		fmt.Printf("[%s %s] %s\n", arch, tag, l)
		s := strings.TrimSpace(l)
		// A top-level test's result ends what it printed (its
		// subtests' results follow it).
		if strings.HasPrefix(l, "--- PASS") || strings.HasPrefix(l, "--- SKIP") {
			why = why[:0]
		} else if failureDetail(s) {
			why = append(why, cut(s, 300))
		}
		if strings.HasPrefix(s, "--- SKIP") || strings.HasPrefix(s, "--- FAIL") {
			g.summary = append(g.summary, s)
		}
		// A failure's last assertion and log lines go with it to the
		// log's tail (CI shows only that part).
		if strings.HasPrefix(s, "--- FAIL") {
			if len(why) > 8 {
				g.summary = append(g.summary, fmt.Sprintf("  (%d lines before)", len(why)-8))
				why = why[len(why)-8:]
			}
			for _, w := range why {
				g.summary = append(g.summary, "  "+w)
			}
			why = why[:0]
		}
	}
	g.leftover = why
	if sc.Err() != nil {
		// A line past the buffer: keep the guest's writes flowing to
		// their end.
		g.summary = append(g.summary, "--- FAIL: (guest output: "+sc.Err().Error()+")")
		_, _ = io.Copy(io.Discard, r)
	}
	return g
}

// report logs a guest's summary and records its failures (name: "ARCH
// TAG") for the log's tail.
func (m *matrixRun) report(t *testing.T, g guestOutput, name string, exit int) {
	inFail := false
	for _, s := range g.summary {
		t.Logf("  %s", s)
		if strings.HasPrefix(s, "--- FAIL") {
			inFail = true
		} else if !strings.HasPrefix(s, "  ") {
			inFail = false
		}
		if inFail {
			m.fail("%s: %s", name, s)
		}
	}
	if exit == 0 {
		return
	}
	// A panic prints after its test's FAIL line, a timeout without one:
	// its lines to the tail too.
	left := g.leftover
	if len(left) > 8 {
		left = left[len(left)-8:]
	}
	for _, w := range left {
		m.fail("%s:   %s", name, w)
	}
	why := ""
	if !slices.ContainsFunc(g.summary, func(s string) bool { return strings.HasPrefix(s, "--- FAIL") }) {
		why = " (no test failed: a panic or timeout)"
	}
	m.fail("%s: kernel tests exit %d%s", name, exit, why)
}

// entryFlags reads the flags after ARCH:VERSION of a matrix entry (f, its
// fields): fast (the fast tier) and nospecialize (FTPROBE_SPECIALIZE=off
// in the guest), each at most once; ok is false for anything else.
func entryFlags(f []string) (fast, noSpec, ok bool) {
	if len(f) < 2 {
		return false, false, false
	}
	for _, x := range f[2:] {
		switch {
		case x == "fast" && !fast:
			fast = true
		case x == "nospecialize" && !noSpec:
			noSpec = true
		default:
			return false, false, false
		}
	}
	return fast, noSpec, true
}

// failureDetail reports whether a trimmed line of the guest's test
// output says why a test failed: testify's "Error:" and "Messages:"
// lines, a t.Fatal/t.Error line (file.go:N: ...), or a panic.
func failureDetail(s string) bool {
	if strings.HasPrefix(s, "Error:") || strings.HasPrefix(s, "Messages:") || strings.HasPrefix(s, "panic:") {
		return true
	}
	file, _, ok := strings.Cut(s, ": ")
	if !ok || !strings.Contains(file, "_test.go:") || strings.ContainsAny(file, " \t") {
		return false
	}
	// "kernel_test.go:123: " followed by text, not testify's bare
	// location line that precedes "Error Trace:".
	return len(s) > len(file)+2
}

// cut shortens s to n bytes, saying it did.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TestEntryFlags: a matrix entry takes :fast and :nospecialize, once
// each, in either order, and nothing else.
func TestEntryFlags(t *testing.T) {
	for entry, want := range map[string][3]bool{
		"amd64:7.3":                   {false, false, true},
		"amd64:7.3:fast":              {true, false, true},
		"amd64:7.3:fast:nospecialize": {true, true, true},
		"amd64:7.3:nospecialize:fast": {true, true, true},
		"amd64:7.3:nospecialize":      {false, true, true},
		"amd64:7.3:fast:fast":         {false, false, false},
		"amd64:7.3:slow":              {false, false, false},
		"amd64":                       {false, false, false},
	} {
		fast, noSpec, ok := entryFlags(strings.Split(entry, ":"))
		if [3]bool{fast, noSpec, ok} != want {
			t.Errorf("%s: fast %v, nospecialize %v, ok %v; want %v", entry, fast, noSpec, ok, want)
		}
	}
}

// runFilter passes FTPROBE_TEST_RUN to the guest tests as -test.run, and
// FTPROBE_TEST_COUNT (a flaky test's repeats) as -test.count.
func runFilter() []string {
	var f []string
	if r := os.Getenv("FTPROBE_TEST_RUN"); r != "" {
		f = []string{"-test.run", r}
	}
	if n := os.Getenv("FTPROBE_TEST_COUNT"); n != "" {
		f = append(f, "-test.count", n)
	}
	return f
}

// TestModule is the kernel module TestModuleFunction traces a function of,
// and ModuleGuestPath where the guest finds it (FTPROBE_TEST_MODULE).
const (
	TestModule      = "tun"
	ModuleGuestPath = "/modules/tun.ko"
)

// withModule carries the kernel's own tun.ko into a full-tier guest for
// TestModuleFunction. When it cannot be had (no network, no such package
// for this kernel), the reason goes to the guest in
// FTPROBE_TEST_MODULE_ERROR instead: the test fails with it on the kernels
// that must run it (7.3) rather than passing by skipping.
func withModule(ctx context.Context, k *lab.Kernel, add, env []string) ([]string, []string) {
	p, err := lab.DebianModule(ctx, k, TestModule, os.Stderr)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintf(os.Stderr, "matrix: no %s.ko for %s: %s\n", TestModule, k, msg)
		return add, append(env, "FTPROBE_TEST_MODULE_ERROR=host could not provide "+TestModule+".ko: "+msg)
	}
	return append(add, p+":"+ModuleGuestPath), append(env, "FTPROBE_TEST_MODULE="+ModuleGuestPath)
}

// runsTest reports whether the guest's -test.run filter (nil: all tests)
// selects the top-level test name, so that a targeted run of other tests
// downloads no module. A pattern that does not compile counts as selecting
// it (go test reports the bad pattern itself).
func runsTest(filter []string, name string) bool {
	for i := 0; i+1 < len(filter); i++ {
		if filter[i] != "-test.run" {
			continue
		}
		top, _, _ := strings.Cut(filter[i+1], "/")
		re, err := regexp.Compile(top)
		return err != nil || re.MatchString(name)
	}
	return true
}

// TestRunsTest: the module is fetched for the full tier and for a targeted
// run that selects TestModuleFunction, not for the fast tier or other
// targets.
func TestRunsTest(t *testing.T) {
	for _, c := range []struct {
		filter []string
		want   bool
	}{
		{nil, true},
		{[]string{"-test.run", FastTests, "-test.short"}, false},
		{[]string{"-test.run", "TestModuleFunction"}, true},
		{[]string{"-test.run", "TestModuleFunction/fentry"}, true},
		{[]string{"-test.run", "^(TestArgFilter|TestModule.*)$"}, true},
		{[]string{"-test.run", "TestArgFilter"}, false},
		{[]string{"-test.run", "("}, true},
	} {
		if got := runsTest(c.filter, "TestModuleFunction"); got != c.want {
			t.Errorf("runsTest(%q) = %v, want %v", c.filter, got, c.want)
		}
	}
}

// TestFailureDetail: the lines that say why a guest test failed are
// kept for the log's tail; testify's bare location line and plain
// progress lines are not.
func TestFailureDetail(t *testing.T) {
	for s, want := range map[string]bool{
		"Error:      \t\"x\" does not match \"none lost\"":   true,
		"Messages:   \tfentry: the summaries were [...]":     true,
		"kernel_test.go:1555: demo exit 1":                   true,
		"kernel_test.go:1555:":                               false,
		"Error Trace:\t/src/test/kernel/kernel_test.go:1555": false,
		"=== RUN   TestDemo":                                 false,
		"panic: runtime error: index out of range":           true,
		"ok ftprobe: 3 events":                               false,
	} {
		if got := failureDetail(s); got != want {
			t.Errorf("failureDetail(%q) = %v, want %v", s, got, want)
		}
	}
}
