package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/trace"
)

// TestArgBitfield: a bitfield as an --arg value and in --filter, read in
// the kernel. struct sock's sk_no_check_tx is a 1-bit field of a u8 group
// (next to sk_gso_disabled and sk_kern_sock), set by setsockopt
// SO_NO_CHECK (sk_setsockopt). The test's thread opens a UDP socket and
// sets SO_NO_CHECK to 1 and then to 0: release_sock ends each call, after
// the change, so it sees 1 then 0; security_socket_setsockopt (the LSM
// hook __sys_setsockopt calls first) starts each, before it, so it sees 0
// then 1, through two dereferences (sock->sk). (lock_sock_nested, which
// also starts each, is inlined into sk_setsockopt on Debian's 6.1: no
// call to trace.) The filters keep exactly one call of each, with the
// value 1, and reject the others; the unfiltered values of release_sock
// are 0 but for the one after the first setsockopt, followed by the 0
// after the second.
func TestArgBitfield(t *testing.T) {
	e := lab(t)
	sockCalls := func(t *testing.T) func() {
		return func() {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			defer unix.Close(fd)
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1))
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 0))
		}
	}
	for _, mode := range filterModes(e) {
		t.Run(mode, func(t *testing.T) {
			needMode(t, e, mode)
			o := trace.Options{Patterns: []string{"release_sock", "security_socket_setsockopt"}, Mode: mode,
				Args:       []string{"release_sock:sk->sk_no_check_tx", "security_socket_setsockopt:sock->sk->sk_no_check_tx"},
				Predicates: []string{"release_sock:sk->sk_no_check_tx == 1", "security_socket_setsockopt:sock->sk->sk_no_check_tx == 1"}}
			evs, sum := traceInThreadWith(t, o, sockCalls(t))
			for fn, expr := range map[string]string{"release_sock": "sk->sk_no_check_tx", "security_socket_setsockopt": "sock->sk->sk_no_check_tx"} {
				entries := filterEvents(evs, "entry", fn)
				require.Len(t, entries, 1, "%s: %v", fn, evs)
				assert.Equal(t, map[string]any{expr: int64OrNum(1)}, numValues(entries[0]["values"]), fn)
			}
			assert.GreaterOrEqual(t, sum.Losses.FilterRejects, uint64(2), "the other call of each")
			assert.Zero(t, sum.Losses.ExprFaults)

			o = trace.Options{Patterns: []string{"release_sock"}, Mode: mode, Args: []string{"sk->sk_no_check_tx"}}
			evs, _ = traceInThreadWith(t, o, sockCalls(t))
			var got []any
			for _, ev := range filterEvents(evs, "entry", "release_sock") {
				got = append(got, numValues(ev["values"])["sk->sk_no_check_tx"])
			}
			// Socket creation and close may lock the socket too (with the
			// bit clear): exactly one release sees 1, and the next one 0.
			ones := 0
			for i, v := range got {
				if v == int64OrNum(1) {
					ones++
					require.Less(t, i+1, len(got), "a release after the one that saw 1: %v", got)
					assert.Equal(t, int64OrNum(0), got[i+1], "%v", got)
				} else {
					assert.Equal(t, int64OrNum(0), v, "%v", got)
				}
			}
			assert.Equal(t, 1, ones, "%v", got)
		})
	}
}
