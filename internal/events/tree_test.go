package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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

// TestTreePerfetto: a three-level tree with Tree.Perfetto becomes nested
// complete slices on its thread's track, each inside its parent (ns),
// the path to the error origin marked; an exit without entry is a
// zero-length slice inside its parent.
func TestTreePerfetto(t *testing.T) {
	p := &Perfetto{Table: table}
	tr := &Tree{Table: table, Entries: map[uint32]bool{0: true}, Perfetto: p}
	noEntry := exitAt(2, 2, 1500, 0, 0)
	noEntry.Flags = FlagNoEntry
	for _, e := range []*bpfobj.TraceEvent{
		exitAt(2, 2, 1200, 100, -2), // the origin: inside the first depth-1 call
		noEntry,
		exitAt(1, 1, 2000, 1000, -2),
		exitAt(1, 1, 4000, 500, 0),
		exitAt(0, 0, 5000, 4900, -2),
	} {
		assert.Empty(t, tr.Append(nil, e), "nothing written before the end")
	}
	assert.Equal(t, uint64(1), tr.Shown)
	var b bytes.Buffer
	_, err := p.WriteTo(&b)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []struct {
			Name, Ph string
			Ts, Dur  float64
			Tid      uint32
			Args     map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc), b.String())
	evs := doc.TraceEvents
	require.Len(t, evs, 6, "thread name + 5 slices: %s", b.String())
	assert.Equal(t, "M", evs[0].Ph)
	ns := func(us float64) int64 { return int64(math.Round(us * 1e3)) }
	type span struct{ start, end int64 }
	var names []string
	open := []span{}
	for _, e := range evs[1:] {
		assert.Equal(t, "X", e.Ph)
		assert.Equal(t, uint32(106), e.Tid)
		d := int(e.Args["depth"].(float64))
		s := span{ns(e.Ts), ns(e.Ts) + ns(e.Dur)}
		if d > 0 {
			require.Greater(t, len(open), d-1)
			par := open[d-1]
			assert.GreaterOrEqual(t, s.start, par.start, "%s at depth %d starts inside its parent", e.Name, d)
			assert.LessOrEqual(t, s.end, par.end, "%s at depth %d ends inside its parent", e.Name, d)
		}
		open = append(open[:d], s)
		names = append(names, fmt.Sprintf("%d %s %v %v %v %v", d, e.Name, e.Args["ret"], e.Args["ret_str"], e.Args["error_path"], e.Args["error_origin"]))
	}
	assert.Equal(t, []string{
		"0 do_sys_openat2 -2 -ENOENT true <nil>",
		"1 ext4_file_open [ext4] -2 -ENOENT true <nil>",
		"2 noproto -2 -ENOENT true true",
		"2 noproto 0 0 <nil> <nil>",
		"1 ext4_file_open [ext4] 0 0 <nil> <nil>",
	}, names)
	root := evs[1].Args
	assert.Equal(t, map[string]any{"dfd": -100.0, "filename": "0xffffe2a627bc", "how": nil}, root["args"], "as a JSON line has them")
	assert.Equal(t, []any{float64(0xffffffffffffff9c), float64(0xffffe2a627bc), 0.0, 0.0, 0.0, 0.0}, evs[3].Args["regs"], "no prototype: the raw registers")
	assert.Equal(t, true, root["entry_call"])
	assert.Equal(t, "noproto", root["error_origin_func"])
	assert.Equal(t, "ENOENT", root["errno"])
	assert.Equal(t, true, evs[4].Args["no_entry"])
	assert.Equal(t, int64(1500), ns(evs[4].Ts))
	assert.Equal(t, int64(0), ns(evs[4].Dur))
}
