package kernel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// readerReads is how many one-byte reads of /dev/zero the workload thread
// makes (two rounds of half).
const readerReads = 200_000

// TestReaderKeepsUp: at the default ringbuf size, ftprobe's reader keeps
// up with a thread that reads /dev/zero a byte at a time as fast as it
// can: trace vfs_read in fentry+fexit and fsession as text and in
// fsession as JSON delivers every one of the thread's calls, entry and
// exit, and the summary says none lost.
func TestReaderKeepsUp(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	for _, c := range []struct{ mode, output string }{
		{attach.ModeFentryFexit, "text"}, {attach.ModeFSession, "text"}, {attach.ModeFSession, "json"},
	} {
		t.Run(c.mode+"/"+c.output, func(t *testing.T) {
			needMode(t, e, c.mode)
			w := startReader(t)
			defer w.stop()
			// The events go to a file: this process reads them once the
			// trace is over, not through a pipe meanwhile (a read of its
			// own would run the programs, as every task's vfs_read does,
			// and could preempt them: kernel-skipped runs).
			file := filepath.Join(t.TempDir(), "events")
			log := traceDuring(t, bin, []string{"--mode", c.mode, "--output", c.output, "--tid", fmt.Sprint(w.tid), "-o", file, "vfs_read"}, w)
			out := &readCounter{json: c.output == "json", tid: w.tid}
			f, err := os.Open(file)
			require.NoError(t, err)
			_, err = io.Copy(out, f)
			f.Close()
			os.Remove(file)
			require.NoError(t, err)
			assert.Zero(t, out.other, "lines of another thread or call")
			assert.Equal(t, readerReads, out.entries, "entries of vfs_read(count=1) of thread %d", w.tid)
			assert.Equal(t, readerReads, out.exits, "exits of vfs_read returning 1")
			want := fmt.Sprintf("ftprobe: %d events (%d entries, %d exits) from 1 function in %s mode", 2*readerReads, readerReads, readerReads, c.mode)
			assert.Contains(t, log, want)
			// Every call of the workload is counted above; the programs
			// also run for other tasks' vfs_read, and the kernel may skip
			// one preempted on its CPU: the only loss let through (the
			// reader's is ringbuf drops, none).
			assert.Regexp(t, `; (none lost|LOST: \d+ recursion miss(es)?)\n$`, log)
			assert.NotContains(t, log, "ringbuf drop")
			if c.output == "json" {
				require.NotNil(t, out.summary, "the summary line")
				assert.EqualValues(t, 2*readerReads, out.summary.Events)
				assertNoLosses(t, out.summary.Losses)
			}
			assertNothingAttached(t)
		})
	}
}

// readWorkload is a thread, pinned to a CPU, that reads /dev/zero a byte
// at a time when told to.
type readWorkload struct {
	tid   int
	start chan bool // true: read; false: end without reading
	done  chan error
	// end lets the thread go: until then it stays locked to the
	// workload, so no other goroutine's read runs on it.
	end chan struct{}
}

// startReader starts the workload thread on CPU 0 with /dev/zero open,
// waiting to make readerReads reads.
func startReader(t *testing.T) *readWorkload { return startReaderOn(t, 0, readerReads) }

// startReaderOn starts a workload thread on cpu that makes reads reads.
func startReaderOn(t *testing.T, cpu, reads int) *readWorkload {
	w := &readWorkload{start: make(chan bool, 1), done: make(chan error, 1), end: make(chan struct{})}
	tids := make(chan int)
	go func() {
		// Never unlocked: the pinned thread exits with the goroutine
		// instead of going back to run others (a command started from
		// it would inherit the pinning).
		runtime.LockOSThread()
		f, err := os.Open("/dev/zero")
		if err == nil {
			err = pinThread(cpu)
		}
		tids <- unix.Gettid()
		if read := <-w.start; !read || err != nil {
			w.done <- err
			return
		}
		defer f.Close()
		var b [1]byte
		for round := 0; round < 2 && err == nil; round++ {
			for i := 0; i < reads/2 && err == nil; i++ {
				_, err = unix.Read(int(f.Fd()), b[:])
			}
		}
		w.done <- err
		<-w.end
	}()
	w.tid = <-tids
	return w
}

func (w *readWorkload) run() { w.start <- true; w.start = nil }

// stop ends the workload: never run, or done.
func (w *readWorkload) stop() {
	if w.start != nil {
		w.start <- false
	}
	close(w.end)
}

// traceDuring runs ftprobe trace with args, runs the workloads once it
// traces and waits for them, then stops it with SIGINT; it returns its log.
func traceDuring(t *testing.T, bin string, args []string, ws ...*readWorkload) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"trace"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	log := waitTracing(t, stderr)
	for _, w := range ws {
		w.run()
	}
	for _, w := range ws {
		require.NoError(t, <-w.done)
	}
	require.NoError(t, cmd.Process.Signal(unix.SIGINT))
	rest, _ := io.ReadAll(stderr)
	log += string(rest)
	require.NoError(t, cmd.Wait(), log)
	t.Log(strings.TrimSpace(log))
	return log
}

// waitTracing reads ftprobe's log until it says it is tracing, and
// returns what it read.
func waitTracing(t *testing.T, r io.Reader) string {
	t.Helper()
	var log strings.Builder
	br := bufio.NewReader(r)
	for {
		l, err := br.ReadString('\n')
		log.WriteString(l)
		if strings.HasPrefix(l, "ftprobe: tracing ") {
			return log.String()
		}
		require.NoError(t, err, "ftprobe ended before tracing: %s", log.String())
	}
}

// readCounter counts, without keeping them, the events trace writes:
// entries of vfs_read(count=1) and exits returning 1 of thread tid, and
// other lines; with JSON it decodes the summary line.
type readCounter struct {
	json                  bool
	tid                   int
	partial               []byte
	entries, exits, other int
	summary               *trace.Summary
	entry, exit           []byte
}

func (c *readCounter) Write(b []byte) (int, error) {
	if c.entry == nil {
		if c.json {
			c.entry = []byte(fmt.Sprintf(`"tid":%d,`, c.tid))
		} else {
			c.entry = []byte(fmt.Sprintf("/%d  → vfs_read(", c.tid))
			c.exit = []byte(fmt.Sprintf("/%d  ← vfs_read = 1  ", c.tid))
		}
	}
	splitLines(&c.partial, b, c.line)
	return len(b), nil
}

func (c *readCounter) line(l []byte) {
	switch {
	case !c.json && bytes.Contains(l, c.entry) && bytes.Contains(l, []byte(", count=1, ")):
		c.entries++
	case !c.json && bytes.Contains(l, c.exit):
		c.exits++
	case c.json && bytes.HasPrefix(l, []byte(`{"type":"summary"`)):
		c.summary = &trace.Summary{}
		if json.Unmarshal(l, c.summary) != nil {
			c.other++
		}
	case c.json && bytes.Contains(l, c.entry) && bytes.Contains(l, []byte(`"func":"vfs_read"`)):
		if bytes.HasPrefix(l, []byte(`{"type":"entry"`)) && bytes.Contains(l, []byte(`"count":1,`)) {
			c.entries++
		} else if bytes.HasPrefix(l, []byte(`{"type":"exit"`)) && bytes.Contains(l, []byte(`"ret":1,`)) {
			c.exits++
		} else {
			c.other++
		}
	default:
		c.other++
	}
}
