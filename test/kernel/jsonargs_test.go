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
			var entry map[string]any // the thread's last entry
			var entryLine string
			ours := 0
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				m := decodeLine(t, l)
				if m["func"] != "do_sys_openat2" || num(m["tgid"]) != pid || num(m["tid"]) != tid {
					continue
				}
				if m["type"] == "entry" {
					entry, entryLine = m, l
					continue
				}
				if m["type"] != "exit" || num(m["ret"]) != fd {
					continue
				}
				// One of the workload's opens: its entry, then its exit.
				ours++
				if ours == 1 {
					t.Logf("%s\n%s", entryLine, l)
				}
				require.NotNil(t, entry, "the entry before %s", l)
				for _, ev := range []map[string]any{entry, m} {
					args, ok := ev["args"].(map[string]any)
					require.True(t, ok, "args by name: %v", ev)
					assert.NotContains(t, ev, "regs", "BTF describes do_sys_openat2")
					assert.Equal(t, int64(-100), jsonNum(t, args["dfd"]), "dfd = AT_FDCWD: %v", args)
					assert.Equal(t, "-100", string(args["dfd"].(json.Number)), "a signed JSON number")
					assert.Regexp(t, `^0x[0-9a-f]+$`, args["filename"], "the user pointer in hex")
					assert.Regexp(t, `^0x[0-9a-f]+$`, args["how"], "struct open_how *: a kernel pointer in hex")
				}
				assert.Equal(t, entry["args"], m["args"], "the exit carries its entry's arguments")
				assert.Equal(t, strconv.FormatInt(fd, 10), m["ret_str"])
				assert.Greater(t, fd, int64(2), "an fd above stdio")
				entry = nil
			}
			assert.Equal(t, 3, ours, "the workload's three opens returning fd %d", fd)
			assertNothingAttached(t)
		})
	}
}
