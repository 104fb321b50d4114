package events

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

// exitAt is a deferred exit (--filter on ret: no entry record, the exit
// carries the arguments) of fn at depth, ending at end ns after a call of
// dur ns, returning ret.
func exitAt(fn uint32, depth uint16, end, dur uint64, ret int64) *bpfobj.TraceEvent {
	e := sample(KindExit, fn, depth)
	e.Flags = FlagDeferred | FlagHasArgs
	e.TsNs, e.DurationNs, e.Ret = end, dur, ret
	return &e
}

// TestTreeFromExits: trees build from exits alone (deferred: no entry
// records), in post-order; a call whose exit a filter dropped leaves its
// children waiting, and the next call at its depth does not adopt the
// ones that started before it; the error path follows the first child
// returning the root's value.
func TestTreeFromExits(t *testing.T) {
	tr := &Tree{Table: table, Entries: map[uint32]bool{0: true}, JSON: true}
	var b []byte
	for _, e := range []*bpfobj.TraceEvent{
		exitAt(2, 2, 1100, 50, 0),   // child of a depth-1 call whose exit was dropped
		exitAt(1, 1, 2000, 500, -2), // started at 1500: does not adopt the call above; the first -ENOENT: the origin
		exitAt(1, 1, 3000, 500, -2),
		exitAt(1, 1, 4000, 500, -13),
		exitAt(0, 0, 5000, 4500, -2),
	} {
		b = tr.Append(b, e)
	}
	require.NotEmpty(t, b)
	m := decodeJSON(t, b)
	assert.Equal(t, "call_tree", m["type"])
	assert.Equal(t, "ext4_file_open [ext4]", m["error_origin"])
	root := m["call_tree"].(map[string]any)
	kids := root["children"].([]any)
	require.Len(t, kids, 3, "the depth-2 call is nobody's child: %s", b)
	assert.Equal(t, true, kids[0].(map[string]any)["error_origin"])
	assert.Nil(t, kids[1].(map[string]any)["error_path"], "a later -ENOENT")
	assert.Nil(t, kids[2].(map[string]any)["error_path"], "-EACCES is another error")
	assert.Equal(t, uint64(1), tr.Calls)

	// --errors: a successful entry call is counted, not written.
	tr.ErrorsOnly = true
	assert.Empty(t, tr.Append(nil, exitAt(0, 0, 9000, 100, 3)))
	assert.Equal(t, uint64(2), tr.Calls)
	assert.Equal(t, uint64(1), tr.Shown)
}
