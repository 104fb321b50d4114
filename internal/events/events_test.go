package events

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

var openat2 = &symbols.Func{ID: 0, Name: "do_sys_openat2", Proto: &symbols.Proto{
	Params: []symbols.Param{
		{Name: "dfd", Type: "int", Kind: symbols.ArgInt, Size: 4},
		{Name: "filename", Type: "const char *", Kind: symbols.ArgCharPtr, Size: 8},
		{Name: "how", Type: "struct open_how *", Kind: symbols.ArgPtr, Size: 8},
	},
	Ret: "long", RetKind: symbols.RetLong,
}}

var ext4Open = &symbols.Func{ID: 1, Name: "ext4_file_open", Module: "ext4", Proto: &symbols.Proto{
	Params:  []symbols.Param{{Name: "inode", Kind: symbols.ArgPtr, Size: 8}, {Name: "filp", Kind: symbols.ArgPtr, Size: 8}},
	RetKind: symbols.RetS32,
}}

var table = Table{openat2, ext4Open, {ID: 2, Name: "noproto"}}

func sample(kind uint8, fn uint32, depth uint16) bpfobj.TraceEvent {
	e := bpfobj.TraceEvent{
		TsNs: 1_000_000_000, Tgid: 105, Tid: 106, FuncId: fn, Cpu: 1, Depth: depth,
		Kind: kind, Mode: 1, Nargs: 6, Flags: FlagHasArgs,
		Args: [6]uint64{0xffffffffffffff9c, 0xffffe2a627bc, 0, 0, 0, 0},
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e.Comm[0])), 16), "workload")
	if kind == KindExit {
		e.TsNs += 3066000
		e.DurationNs = 3066000
		e.Ret = 4
	}
	return e
}

func TestTextFormat(t *testing.T) {
	tx := &Text{Table: table}
	en := sample(KindEntry, 0, 0)
	ex := sample(KindExit, 0, 0)
	got := string(tx.Append(nil, &en)) + string(tx.Append(nil, &ex))
	assert.Equal(t,
		"0.000000   1 workload 105/106  → do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL)\n"+
			"0.003066   1 workload 105/106  ← do_sys_openat2 = 4  3.066ms\n", got)

	nested := sample(KindEntry, 1, 2)
	assert.Contains(t, string(tx.Append(nil, &nested)), "105/106      → ext4_file_open [ext4](inode=0xffffffffffffff9c, filp=0xffffe2a627bc)")

	fail := sample(KindExit, 1, 0)
	fail.Ret = -2
	assert.Contains(t, string(tx.Append(nil, &fail)), "← ext4_file_open [ext4] = -ENOENT  3.066ms")

	noEntry := sample(KindExit, 2, 0)
	noEntry.Flags = FlagNoEntry
	assert.Contains(t, string(tx.Append(nil, &noEntry)), "← noproto = 4  (no entry)")

	raw := sample(KindEntry, 2, 0)
	assert.Contains(t, string(tx.Append(nil, &raw)), "→ noproto(0xffffffffffffff9c, 0xffffe2a627bc, 0x0, 0x0, 0x0, 0x0)")
}

func TestRetDecoding(t *testing.T) {
	ptr := &symbols.Func{Proto: &symbols.Proto{RetKind: symbols.RetPtr}}
	assert.Equal(t, "ERR_PTR(-EINVAL)", string(AppendRet(nil, ptr, -22)))
	assert.Equal(t, "NULL", string(AppendRet(nil, ptr, 0)))
	assert.Equal(t, "0xffff000012345678", string(AppendRet(nil, ptr, int64(-0xffffedcba988))))
	void := &symbols.Func{Proto: &symbols.Proto{RetKind: symbols.RetVoid}}
	assert.Equal(t, "void", string(AppendRet(nil, void, 7)))
	assert.Equal(t, "-5000", string(AppendRet(nil, openat2, -5000)), "not an errno")
}

func TestDurations(t *testing.T) {
	for ns, want := range map[uint64]string{999: "999ns", 1500: "1.500µs", 2_500_000: "2.500ms", 3_000_000_000: "3.000s"} {
		assert.Equal(t, want, string(AppendDuration(nil, ns)))
	}
}

func TestJSONFormat(t *testing.T) {
	j := &JSON{Table: table}
	ex := sample(KindExit, 1, 3)
	ex.Ret = -2
	line := j.Append(nil, &ex)
	require.True(t, strings.HasSuffix(string(line), "}\n"))
	d := json.NewDecoder(strings.NewReader(string(line)))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m))
	assert.Equal(t, "exit", m["type"])
	assert.Equal(t, json.Number("105"), m["tgid"])
	assert.Equal(t, json.Number("106"), m["tid"])
	assert.Equal(t, "workload", m["comm"])
	assert.Equal(t, "ext4_file_open", m["func"])
	assert.Equal(t, "ext4", m["module"])
	assert.Equal(t, "fentry+fexit", m["mode"])
	assert.Equal(t, json.Number("3"), m["depth"])
	assert.Equal(t, json.Number("-2"), m["ret"])
	assert.Equal(t, "-ENOENT", m["ret_str"])
	assert.Equal(t, json.Number("3066000"), m["duration_ns"])
	assert.Equal(t, map[string]any{"inode": "0xffffffffffffff9c", "filp": "0xffffe2a627bc"}, m["args"], "pointers as hex strings")
	assert.NotContains(t, m, "regs")
}

// TestJSONArgsTyped: JSON says what the text says. do_sys_openat2's int
// dfd = AT_FDCWD is -100 whether its register holds 0xffffff9c (amd64: a
// 32-bit int in a 64-bit register, upper bits zero) or 0xffffffffffffff9c
// (arm64), named, in prototype order; the exit's long return -ENOENT is
// -2; a function without a prototype has its raw registers as "regs".
func TestJSONArgsTyped(t *testing.T) {
	j := &JSON{Table: table}
	tx := &Text{Table: table}
	for _, reg := range []uint64{0xffffff9c, 0xffffffffffffff9c} {
		en := sample(KindEntry, 0, 0)
		en.Args[0] = reg
		assert.Contains(t, string(tx.Append(nil, &en)), "(dfd=-100, filename=0xffffe2a627bc, how=NULL)")
		line := string(j.Append(nil, &en))
		assert.Contains(t, line, `,"args":{"dfd":-100,"filename":"0xffffe2a627bc","how":null}}`, "register %#x", reg)
		ex := sample(KindExit, 0, 0)
		ex.Args[0], ex.Ret = reg, -2
		line = string(j.Append(nil, &ex))
		assert.Contains(t, line, `"args":{"dfd":-100,`, "the exit carries its entry's arguments")
		assert.Contains(t, line, `"ret":-2,"ret_str":"-ENOENT"`)
	}
	raw := sample(KindEntry, 2, 0)
	m := decodeJSON(t, j.Append(nil, &raw))
	assert.Equal(t, []any{float64(0xffffffffffffff9c), float64(0xffffe2a627bc), 0.0, 0.0, 0.0, 0.0}, m["regs"])
	assert.NotContains(t, m, "args", "raw registers are not args")

	// A prototype that does not describe the registers: regs too.
	byVal := *openat2
	byVal.ProtoErr = "struct passed by value"
	m = decodeJSON(t, (&JSON{Table: Table{&byVal}}).Append(nil, &raw))
	assert.Contains(t, m, "regs")
	assert.NotContains(t, m, "args")
}

// TestRetTyped: "ret" follows the return type as "args" does, and
// "ret_str" says the same as text: unsigned, bool, enum, pointer (and
// error pointer), void.
func TestRetTyped(t *testing.T) {
	for _, c := range []struct {
		proto   symbols.Proto
		ret     int64
		js, txt string
	}{
		{symbols.Proto{RetKind: symbols.RetS32, RetArg: symbols.ArgInt, RetSize: 4}, -2, `-2`, `-ENOENT`},
		{symbols.Proto{RetKind: symbols.RetS32, RetArg: symbols.ArgInt, RetSize: 4}, 3, `3`, `3`},
		{symbols.Proto{RetKind: symbols.RetOther, RetArg: symbols.ArgUint, RetSize: 8}, -12, `18446744073709551604`, `18446744073709551604`},
		{symbols.Proto{RetKind: symbols.RetOther, RetArg: symbols.ArgUint, RetSize: 4}, 0xfffffff4, `4294967284`, `4294967284`},
		{symbols.Proto{RetKind: symbols.RetOther, RetArg: symbols.ArgBool, RetSize: 1}, 1, `true`, `true`},
		{symbols.Proto{RetKind: symbols.RetOther, RetArg: symbols.ArgEnum, RetSize: 4, RetSigned: true,
			RetEnum: []symbols.EnumValue{{Name: "LRU_ROTATE", Value: 2}}}, 2, `"LRU_ROTATE"`, `LRU_ROTATE`},
		{symbols.Proto{RetKind: symbols.RetOther, RetArg: symbols.ArgEnum, RetSize: 4, RetSigned: true}, -1, `-1`, `-1`},
		{symbols.Proto{RetKind: symbols.RetPtr, RetArg: symbols.ArgPtr, RetSize: 8}, int64(-0x7fff7fb84370), `"0xffff80008047bc90"`, `0xffff80008047bc90`},
		{symbols.Proto{RetKind: symbols.RetPtr, RetArg: symbols.ArgPtr, RetSize: 8}, -22, `"0xffffffffffffffea"`, `ERR_PTR(-EINVAL)`},
		{symbols.Proto{RetKind: symbols.RetPtr, RetArg: symbols.ArgPtr, RetSize: 8}, 0, `null`, `NULL`},
		{symbols.Proto{RetKind: symbols.RetVoid, RetArg: symbols.ArgOther}, 7, `null`, `void`},
	} {
		f := &symbols.Func{Name: "f", Proto: &c.proto}
		e := sample(KindExit, 0, 0)
		e.Ret = c.ret
		line := string((&JSON{Table: Table{f}}).Append(nil, &e))
		assert.Contains(t, line, `"ret":`+c.js+`,"ret_str":"`+c.txt+`"`, "%+v", c.proto)
		assert.Contains(t, string((&Text{Table: Table{f}}).Append(nil, &e)), "← f = "+c.txt+"  ")
	}
}

// Recorded-shape samples: an entry/exit pair of do_sys_openat2 and a
// nested vfs_read pair, as the arm64 7.3 lab kernel produced them.
func benchSamples() [][]byte {
	var out [][]byte
	for _, e := range []bpfobj.TraceEvent{sample(KindEntry, 0, 0), sample(KindExit, 0, 0), sample(KindEntry, 1, 1), sample(KindExit, 1, 1)} {
		e := e
		out = append(out, encode(&e))
	}
	return out
}

func BenchmarkDecodeText(b *testing.B) {
	s := benchSamples()
	tx := &Text{Table: table}
	var ev bpfobj.TraceEvent
	dec := testDecoder()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := dec.Decode(s[i&3], &ev); err != nil {
			b.Fatal(err)
		}
		buf = tx.Append(buf[:0], &ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func BenchmarkDecodeJSON(b *testing.B) {
	s := benchSamples()
	j := &JSON{Table: table}
	var ev bpfobj.TraceEvent
	dec := testDecoder()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := dec.Decode(s[i&3], &ev); err != nil {
			b.Fatal(err)
		}
		buf = j.Append(buf[:0], &ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func TestGraphFoldsLeavesAndMarksThreads(t *testing.T) {
	g := &Graph{Table: table}
	outerIn := sample(KindEntry, 0, 0)
	innerIn := sample(KindEntry, 1, 1)
	innerIn.TsNs += 1000
	innerOut := sample(KindExit, 1, 1)
	innerOut.DurationNs = 1500
	innerOut.Ret = -2
	other := sample(KindExit, 2, 0)
	other.Tid = 200
	other.Flags = FlagNoEntry
	outerOut := sample(KindExit, 0, 0)
	var b []byte
	for _, e := range []bpfobj.TraceEvent{outerIn, innerIn, innerOut, other, outerOut} {
		e := e
		b = g.Append(b, &e)
	}
	b = g.Flush(b)
	want := "0.000000   1 105/106             |  do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL) {\n" +
		"0.000001   1 105/106     1.500µs |    ext4_file_open [ext4](inode=0xffffffffffffff9c, filp=0xffffe2a627bc) = -ENOENT;\n" +
		"------ 105/200 workload ------\n" +
		"0.003066   1 105/200             |  } = 4  /* noproto: no entry recorded */\n" +
		"------ 105/106 workload ------\n" +
		"0.003066   1 105/106     3.066ms |  } = 4  /* do_sys_openat2 */\n"
	assert.Equal(t, want, string(b))
}

func BenchmarkGraph(b *testing.B) {
	s := benchSamples()
	g := &Graph{Table: table}
	var ev bpfobj.TraceEvent
	dec := testDecoder()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := dec.Decode(s[i&3], &ev); err != nil {
			b.Fatal(err)
		}
		buf = g.Append(buf[:0], &ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func TestPerfettoTraceEventFormat(t *testing.T) {
	p := &Perfetto{Table: table}
	outerIn := sample(KindEntry, 0, 0)
	inner := sample(KindExit, 1, 1)
	inner.TsNs = outerIn.TsNs + 2000
	inner.DurationNs = 1000
	outer := sample(KindExit, 0, 0)
	orphan := sample(KindExit, 2, 0)
	orphan.Flags = FlagNoEntry
	for _, e := range []bpfobj.TraceEvent{outerIn, inner, outer, orphan} {
		e := e
		p.Add(&e)
	}
	var b bytes.Buffer
	_, err := p.WriteTo(&b)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []struct {
			Name, Ph string
			Ts, Dur  float64
			Pid, Tid uint32
			Args     map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	require.Len(t, doc.TraceEvents, 3, "thread name + 2 slices")
	assert.Equal(t, "M", doc.TraceEvents[0].Ph)
	assert.Equal(t, "workload 106", doc.TraceEvents[0].Args["name"])
	outerS, innerS := doc.TraceEvents[1], doc.TraceEvents[2]
	assert.Equal(t, "do_sys_openat2", outerS.Name)
	assert.Equal(t, "X", outerS.Ph)
	assert.InDelta(t, 1_000_000.0, outerS.Ts, 0.001, "µs")
	assert.InDelta(t, 3066.0, outerS.Dur, 0.001)
	assert.Equal(t, "ext4_file_open [ext4]", innerS.Name)
	assert.LessOrEqual(t, outerS.Ts, innerS.Ts)
	assert.LessOrEqual(t, innerS.Ts+innerS.Dur, outerS.Ts+outerS.Dur, "child inside parent")
	assert.Equal(t, 4.0, outerS.Args["ret"])
	assert.Equal(t, "4", outerS.Args["ret_str"])
	assert.Equal(t, map[string]any{"dfd": -100.0, "filename": "0xffffe2a627bc", "how": nil}, outerS.Args["args"])
	assert.Equal(t, "fentry+fexit", outerS.Args["mode"])
	assert.Equal(t, 1, p.Skipped)
}

func setStr(e *bpfobj.TraceEvent, slot int, arg uint8, s string, n int16, flags uint8) {
	e.Flags |= FlagStrings
	e.StrArg[slot] = arg
	e.StrFlags[slot] = flags
	e.StrLen[slot] = n
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e.Str[slot][0])), len(e.Str[slot])), s)
}

func TestEnumBoolNull(t *testing.T) {
	f := &symbols.Func{Name: "kill_pid_info_type", Proto: &symbols.Proto{Params: []symbols.Param{
		{Name: "type", Kind: symbols.ArgEnum, Size: 4, Enum: []symbols.EnumValue{{Name: "PIDTYPE_PID", Value: 0}, {Name: "PIDTYPE_TGID", Value: 1}, {Name: "PIDTYPE_MAX", Value: 4}}},
		{Name: "neg", Kind: symbols.ArgEnum, Size: 4, Enum: []symbols.EnumValue{{Name: "MINUS_ONE", Value: 0xffffffffffffffff}}},
		{Name: "force", Kind: symbols.ArgBool, Size: 1},
		{Name: "task", Kind: symbols.ArgPtr, Size: 8},
		{Name: "other", Kind: symbols.ArgEnum, Size: 4, Enum: []symbols.EnumValue{{Name: "A", Value: 0}}},
	}}}
	e := bpfobj.TraceEvent{Nargs: 6, Flags: FlagHasArgs, Args: [6]uint64{1, 0xffffffff, 0x100, 0, 7}}
	assert.Equal(t, "(type=PIDTYPE_TGID, neg=MINUS_ONE, force=false, task=NULL, other=7)", string(AppendArgs(nil, f, &e)),
		"enum by name, sign-extended constant matched at the enum's size, bool from the low byte, NULL, unknown enum value as its number")
	e.Args[2] = 1
	assert.Contains(t, string(AppendArgs(nil, f, &e)), "force=true")
}

func TestStringsTextAndJSON(t *testing.T) {
	en := sample(KindEntry, 0, 0)
	setStr(&en, 0, 1, "/etc/hostname", 14, StrUser)
	tx := &Text{Table: table}
	assert.Contains(t, string(tx.Append(nil, &en)), `do_sys_openat2(dfd=-100, filename="/etc/hostname", how=NULL)`)

	long := strings.Repeat("a", 127)
	setStr(&en, 0, 1, long, 128, StrUser|StrTruncated)
	assert.Contains(t, string(tx.Append(nil, &en)), `filename="`+long+`"…, how=NULL`, "truncation marked after the quote")

	setStr(&en, 0, 1, "", -14, StrUser)
	assert.Contains(t, string(tx.Append(nil, &en)), `filename=<fault>, how=NULL`)

	// NULL pointer: no string read, the pointer shows.
	en.Args[1] = 0
	setStr(&en, 0, 1, "", 0, StrUser)
	assert.Contains(t, string(tx.Append(nil, &en)), `filename=NULL`)

	// JSON: the string in args, truncated list, errors; escapes valid JSON.
	j := &JSON{Table: table}
	en = sample(KindEntry, 0, 0)
	setStr(&en, 0, 1, "a\"b\\\n\x01\xff", 8, 0)
	m := decodeJSON(t, j.Append(nil, &en))
	assert.Equal(t, map[string]any{"dfd": -100.0, "filename": "a\"b\\\n\x01\u00ff", "how": nil}, m["args"], "a byte that is not UTF-8 as \\u00XX")
	assert.NotContains(t, m, "truncated")
	assert.NotContains(t, m, "strings", "one place for a string: args")
	setStr(&en, 0, 1, long, 128, StrTruncated)
	m = decodeJSON(t, j.Append(nil, &en))
	assert.Equal(t, long, m["args"].(map[string]any)["filename"])
	assert.Equal(t, []any{"filename"}, m["truncated"])
	assert.NotContains(t, m, "string_errors")
	setStr(&en, 0, 1, "", -14, StrUser)
	m = decodeJSON(t, j.Append(nil, &en))
	assert.Equal(t, map[string]any{"dfd": -100.0, "filename": nil, "how": nil}, m["args"])
	assert.Equal(t, map[string]any{"filename": "-EFAULT"}, m["string_errors"])
	assert.NotContains(t, m, "truncated")
}

type fakeSyms map[uint64]string

func (f fakeSyms) Symbolize(a uint64) string { return f[a] }

func TestStackTextAndJSON(t *testing.T) {
	en := sample(KindEntry, 0, 1)
	en.Flags |= FlagStack
	en.Kstack[0], en.Kstack[1] = 0x10, 0x20
	en.StackLen = 16
	syms := fakeSyms{0x10: "ksys_read+0x5c", 0x20: "__arm64_sys_read+0x24"}
	got := string((&Text{Table: table, Syms: syms}).Append(nil, &en))
	assert.Equal(t, "0.000000   1 workload 105/106    → do_sys_openat2(dfd=-100, filename=0xffffe2a627bc, how=NULL)\n"+
		"          ksys_read+0x5c\n          __arm64_sys_read+0x24\n", got)
	m := decodeJSON(t, (&JSON{Table: table, Syms: syms}).Append(nil, &en))
	assert.Equal(t, []any{"ksys_read+0x5c", "__arm64_sys_read+0x24"}, m["stack"])

	en.StackLen = -14
	assert.Contains(t, string((&Text{Table: table, Syms: syms}).Append(nil, &en)), "\n          <stack: -EFAULT>\n")
	m = decodeJSON(t, (&JSON{Table: table, Syms: syms}).Append(nil, &en))
	assert.Equal(t, "-EFAULT", m["stack_error"])
	assert.NotContains(t, m, "stack")
}

func decodeJSON(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(line, &m), "%s", line)
	return m
}

// Recorded-shape full records: --strings and --stack on an entry.
func BenchmarkDecodeTextStrings(b *testing.B) {
	en := sample(KindEntry, 0, 0)
	setStr(&en, 0, 1, "/etc/hostname", 14, StrUser)
	ex := sample(KindExit, 0, 0)
	s := [][]byte{encode(&en), encode(&ex)}
	tx := &Text{Table: table}
	var ev bpfobj.TraceEvent
	dec := testDecoder()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := dec.Decode(s[i&1], &ev); err != nil {
			b.Fatal(err)
		}
		buf = tx.Append(buf[:0], &ev)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

// TestEntryOnlyMarked: an entry-only function's entry says it has no exit
// by design in text, JSON and the call graph (one line, nothing held back
// that would print as an open call).
func TestEntryOnlyMarked(t *testing.T) {
	exit := &symbols.Func{ID: 0, Name: "do_group_exit", EntryOnly: symbols.EntryOnlyNoreturn, Proto: &symbols.Proto{
		Params:  []symbols.Param{{Name: "exit_code", Type: "int", Kind: symbols.ArgInt, Size: 4}},
		RetKind: symbols.RetVoid, Ret: "void",
	}}
	tb := Table{exit, ext4Open}
	e := sample(KindEntry, 0, 0)
	e.Args[0] = 256
	txt := string((&Text{Table: tb}).Append(nil, &e))
	assert.Contains(t, txt, "→ do_group_exit(exit_code=256)  (entry only: noreturn)\n")
	js := decodeJSON(t, (&JSON{Table: tb}).Append(nil, &e))
	assert.Equal(t, "noreturn", js["entry_only"])
	o := sample(KindEntry, 1, 0)
	assert.NotContains(t, string((&JSON{Table: tb}).Append(nil, &o)), "entry_only", "a function that returns")

	// Graph: an open call, then the noreturn entry inside it on its own line.
	g := &Graph{Table: tb}
	var b []byte
	b = g.Append(b, &o)
	in := sample(KindEntry, 0, 1)
	in.Args[0] = 9
	b = g.Append(b, &in)
	b = g.Flush(b)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, "%s", b)
	assert.True(t, strings.HasSuffix(lines[0], "|  ext4_file_open [ext4](inode=0xffffffffffffff9c, filp=0xffffe2a627bc) {"), lines[0])
	assert.True(t, strings.HasSuffix(lines[1], "|    do_group_exit(exit_code=9);  /* entry only: noreturn */"), lines[1])
}

// TestEntryOnlyPerfetto: an entry-only entry is an instant event on its
// thread's track, with its arguments; other entries wait for their exits.
func TestEntryOnlyPerfetto(t *testing.T) {
	nr := &symbols.Func{ID: 0, Name: "do_exit", EntryOnly: symbols.EntryOnlyNoreturn, Proto: &symbols.Proto{
		Params: []symbols.Param{{Name: "code", Type: "long", Kind: symbols.ArgInt, Size: 8}}, RetKind: symbols.RetVoid}}
	p := &Perfetto{Table: Table{nr, ext4Open}}
	e := sample(KindEntry, 0, 0)
	e.Args[0] = 512
	p.Add(&e)
	o := sample(KindEntry, 1, 0)
	p.Add(&o)
	var b bytes.Buffer
	_, err := p.WriteTo(&b)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	var inst []map[string]any
	for _, ev := range doc.TraceEvents {
		if ev["ph"] != "M" {
			inst = append(inst, ev)
		}
	}
	require.Len(t, inst, 1, "%s", b.String())
	assert.Equal(t, "i", inst[0]["ph"])
	assert.Equal(t, "t", inst[0]["s"])
	assert.Equal(t, "do_exit", inst[0]["name"])
	assert.EqualValues(t, 1_000_000, inst[0]["ts"])
	assert.EqualValues(t, 106, inst[0]["tid"])
	args := inst[0]["args"].(map[string]any)
	assert.Equal(t, map[string]any{"code": 512.0}, args["args"])
	assert.Equal(t, "noreturn", args["entry_only"])
}
