package attach

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

type fakeLink struct {
	link.Link
	closed *int
}

func (l fakeLink) Close() error { *l.closed++; return nil }

// fakeAttach refuses any set containing a bad function, as the kernel
// refuses a whole kprobe.multi link for one bad address.
func fakeAttach(bad map[string]bool, calls, closed *int, opened *int) func([]*symbols.Func) (link.Link, error) {
	return func(fs []*symbols.Func) (link.Link, error) {
		*calls++
		for _, f := range fs {
			if bad[f.Name] {
				return nil, fmt.Errorf("create kprobe multi link: %w", unix.EINVAL)
			}
		}
		*opened++
		return fakeLink{closed: closed}, nil
	}
}

func funcs(n int) []*symbols.Func {
	var out []*symbols.Func
	for i := 0; i < n; i++ {
		out = append(out, &symbols.Func{ID: uint32(i), Name: fmt.Sprintf("f%d", i)})
	}
	return out
}

func TestBisectFindsBadFunctions(t *testing.T) {
	var calls, closed, opened int
	fs := funcs(1000)
	good, bad, l, err := Bisect(context.Background(), fs, fakeAttach(map[string]bool{"f17": true, "f998": true}, &calls, &closed, &opened))
	require.NoError(t, err)
	require.NotNil(t, l)
	assert.Len(t, good, 998)
	require.Len(t, bad, 2)
	assert.Equal(t, "f17", bad[0].Func.Name)
	assert.Equal(t, "f998", bad[1].Func.Name)
	assert.ErrorIs(t, bad[0].Err, unix.EINVAL)
	assert.Less(t, calls, 60, "O(b log n) attempts")
	assert.Equal(t, opened-1, closed, "every probe link but the final one is closed")
	for i := 1; i < len(good); i++ {
		assert.Less(t, good[i-1].ID, good[i].ID)
	}
}

func TestBisectAllGood(t *testing.T) {
	var calls, closed, opened int
	good, bad, _, err := Bisect(context.Background(), funcs(10), fakeAttach(nil, &calls, &closed, &opened))
	require.NoError(t, err)
	assert.Len(t, good, 10)
	assert.Empty(t, bad)
	assert.Equal(t, 1, calls)
}

func TestBisectAllBad(t *testing.T) {
	var calls, closed, opened int
	all := map[string]bool{"f0": true, "f1": true, "f2": true}
	good, bad, l, err := Bisect(context.Background(), funcs(3), fakeAttach(all, &calls, &closed, &opened))
	require.Error(t, err)
	assert.Nil(t, l)
	assert.Empty(t, good)
	assert.Len(t, bad, 3)
}

func TestBisectModeMissingDoesNotBisect(t *testing.T) {
	calls := 0
	_, _, _, err := Bisect(context.Background(), funcs(64), func([]*symbols.Func) (link.Link, error) {
		calls++
		return nil, fmt.Errorf("kprobe multi: %w", ebpf.ErrNotSupported)
	})
	assert.True(t, errors.Is(err, ebpf.ErrNotSupported))
	assert.Equal(t, 1, calls)
}

func TestValidateRingbufSize(t *testing.T) {
	assert.NoError(t, ValidateRingbufSize(4<<20, 2))
	assert.NoError(t, ValidateRingbufSize(64<<10, 2))
	assert.EqualError(t, ValidateRingbufSize(32<<10, 2), "buffer of 32768 bytes per CPU: must be a power of two from 65536 (64 KiB) to 1073741824 (1 GiB) with 2 CPUs")
	assert.Error(t, ValidateRingbufSize(3<<20, 2))
	assert.Error(t, ValidateRingbufSize(1000, 1))
	// The areas of every CPU fit one BPF array, under 4 GiB: one CPU can
	// have 2 GiB, two 1 GiB each (2 x (1 + 16384) elements of 67,584
	// bytes), 64 CPUs 32 MiB each.
	assert.NoError(t, ValidateRingbufSize(MaxRingbufSize, 1))
	assert.ErrorContains(t, ValidateRingbufSize(MaxRingbufSize, 2), "to 1073741824 (1 GiB) with 2 CPUs")
	assert.Equal(t, uint64(32<<20), MaxRingbufSizeFor(64))
	assert.Equal(t, uint64(64<<10), MaxRingbufSizeFor(1<<20))
}

// TestEntryOnlyFlags: an entry-only function carries FlagEntryOnly beside
// its return type bits, and is left out of the exit-probe set.
func TestEntryOnlyFlags(t *testing.T) {
	ret := &symbols.Func{Name: "vfs_read", Proto: &symbols.Proto{RetKind: symbols.RetLong, RetSize: 8, RetSigned: true}}
	nr := &symbols.Func{Name: "do_group_exit", EntryOnly: symbols.EntryOnlyNoreturn, Proto: &symbols.Proto{RetKind: symbols.RetVoid}}
	nb := &symbols.Func{Name: "do_exit", EntryOnly: symbols.EntryOnlyNoreturn}
	assert.Equal(t, uint32(8<<8|1), FuncFlags(ret))
	assert.Equal(t, uint32(FlagEntryOnly|4), FuncFlags(nr))
	assert.Equal(t, uint32(FlagEntryOnly), FuncFlags(nb))
	assert.Equal(t, []*symbols.Func{ret}, exitFuncs([]*symbols.Func{nr, ret, nb}))
	assert.Empty(t, exitFuncs([]*symbols.Func{nr}))
}

// TestBisectStopsWhenCancelled: a context cancelled during the bisection
// (a signal) ends it at the next attempt, with the context's cause and
// nothing attached: every probe link made is closed.
func TestBisectStopsWhenCancelled(t *testing.T) {
	var calls, closed, opened int
	stop := errors.New("interrupted by SIGTERM")
	ctx, cancel := context.WithCancelCause(context.Background())
	attach := fakeAttach(map[string]bool{"f3": true}, &calls, &closed, &opened)
	good, _, l, err := Bisect(ctx, funcs(1000), func(fs []*symbols.Func) (link.Link, error) {
		if calls == 5 {
			cancel(stop)
		}
		return attach(fs)
	})
	require.ErrorIs(t, err, stop)
	assert.Nil(t, l)
	assert.Empty(t, good)
	assert.Equal(t, 6, calls, "the attempt running when cancelled, then none")
	assert.Equal(t, opened, closed, "every probe link closed")
}

// TestInterruptedSaysHowFar: Open's error after a signal wraps the cause
// and says the phase and how many functions it had done.
func TestInterruptedSaysHowFar(t *testing.T) {
	stop := errors.New("interrupted by SIGTERM")
	err := error(&Interrupted{Cause: stop, Phase: "attaching", Done: 123, Total: 400})
	assert.EqualError(t, err, "interrupted by SIGTERM while attaching 123 of 400 functions; nothing left attached")
	assert.ErrorIs(t, err, stop)
	assert.EqualError(t, &Interrupted{Cause: stop, Phase: "planning"}, "interrupted by SIGTERM while planning; nothing left attached")
}
