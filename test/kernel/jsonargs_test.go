package kernel

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/attach"
)

var openLine = regexp.MustCompile(`workload open: pid (\d+) tid (\d+): 3 ops on /etc/hostname \(last fd (\d+),`)

// TestTraceJSONTypedArgs runs `ftprobe trace --output json do_sys_openat2
// -- ftprobe workload open` in every trace mode of the registry the kernel
// has: the JSON lines name and type the arguments from BTF as the text
// line does. The workload's three opens (its own thread, relative to
// AT_FDCWD) have "dfd": -100 whatever the register's upper bits, the
// filename (a user pointer) and how (a kernel pointer) as hex strings, at
// entry and at exit, and return the fd the workload reports.
func TestTraceJSONTypedArgs(t *testing.T) {
	e := lab(t)
	bin := ftprobeBinary(t)
	for _, tm := range attach.TraceModes {
		mode := tm.Name
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			cmd := exec.Command(bin, "trace", "--mode", mode, "--output", "json", "do_sys_openat2", "--",
				bin, "workload", "open", "--path", "/etc/hostname", "--count", "3")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), stderr.String())
			// trace sends the command's stdout to its stderr.
			w := openLine.FindStringSubmatch(stderr.String())
			require.NotNil(t, w, "the workload's account: %s", stderr.String())
			pid, _ := strconv.ParseInt(w[1], 10, 64)
			tid, _ := strconv.ParseInt(w[2], 10, 64)
			fd, _ := strconv.ParseInt(w[3], 10, 64)
			// The thread's calls, entry and exit: its Go runtime's opens
			// at start (relative to AT_FDCWD too), then the workload's
			// three, the last ones.
			type call struct {
				entry, exit map[string]any
				lines       string
			}
			var calls []call
			var entry map[string]any
			var entryLine string
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				m := decodeLine(t, l)
				if m["func"] != "do_sys_openat2" || num(m["tgid"]) != pid || num(m["tid"]) != tid {
					continue
				}
				switch m["type"] {
				case "entry":
					entry, entryLine = m, l
				case "exit":
					require.NotNil(t, entry, "the entry before %s", l)
					calls = append(calls, call{entry, m, entryLine + "\n" + l})
					entry = nil
				}
			}
			require.GreaterOrEqual(t, len(calls), 3, "the workload's three opens: %s", stdout.String())
			for i, c := range calls {
				for _, ev := range []map[string]any{c.entry, c.exit} {
					args, ok := ev["args"].(map[string]any)
					require.True(t, ok, "args by name: %s", c.lines)
					assert.NotContains(t, ev, "regs", "BTF describes do_sys_openat2")
					_, ok = args["dfd"].(json.Number)
					assert.True(t, ok, "dfd, an int, is a JSON number: %s", c.lines)
					assert.Regexp(t, `^0x[0-9a-f]+$`, args["filename"], "the user pointer in hex: %s", c.lines)
					assert.Regexp(t, `^0x[0-9a-f]+$`, args["how"], "struct open_how *: a kernel pointer in hex: %s", c.lines)
				}
				assert.Equal(t, c.entry["args"], c.exit["args"], "the exit carries its entry's arguments: %s", c.lines)
				if i < len(calls)-3 {
					continue
				}
				// One of the workload's opens.
				if i == len(calls)-1 {
					t.Logf("%s", c.lines)
				}
				assert.Equal(t, "-100", string(c.entry["args"].(map[string]any)["dfd"].(json.Number)), "dfd = AT_FDCWD: %s", c.lines)
				assert.Equal(t, fd, num(c.exit["ret"]), "the fd the workload reports: %s", c.lines)
				assert.Equal(t, strconv.FormatInt(fd, 10), c.exit["ret_str"])
			}
			assert.Greater(t, fd, int64(2), "an fd above stdio")
			assertNothingAttached(t)
		})
	}
}
