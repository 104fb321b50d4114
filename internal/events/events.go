// Package events decodes ftprobe's ringbuf records (the bpf2go-generated
// TraceEvent, native endianness) and formats them as text lines or JSON
// lines.
package events

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Record kinds and flags, generated from the BPF side (bpf/trace.bpf.c
// enum ftp_kind, enum ftp_flags).
const (
	KindEntry = uint8(bpfobj.TraceFtpKindFTP_ENTRY)
	KindExit  = uint8(bpfobj.TraceFtpKindFTP_EXIT)
	KindComm  = uint8(bpfobj.TraceFtpKindFTP_COMM)
	// KindCall is a record only (a leaf call's entry and exit in one,
	// attach.Options.LiveEntries): Decode gives its entry and Next its exit.
	KindCall = uint8(bpfobj.TraceFtpKindFTP_CALL)

	FlagNoEntry  = uint8(bpfobj.TraceFtpFlagsFTP_F_NO_ENTRY) // exit without a recorded entry: duration unknown
	FlagHasArgs  = uint8(bpfobj.TraceFtpFlagsFTP_F_HAS_ARGS) // args hold the entry arguments
	FlagDeferred = uint8(bpfobj.TraceFtpFlagsFTP_F_DEFERRED) // entry not emitted (--min-duration/--errors); exit carries args
	FlagStrings  = uint8(bpfobj.TraceFtpFlagsFTP_F_STRINGS)  // StrLen/StrArg/StrFlags/Str hold the string arguments (--strings)
	FlagStack    = uint8(bpfobj.TraceFtpFlagsFTP_F_STACK)    // StackLen/Kstack hold the kernel stack (--stack)
	FlagFull     = uint8(bpfobj.TraceFtpFlagsFTP_F_FULL)     // a full record (struct rec_full)
	FlagVals     = uint8(bpfobj.TraceFtpFlagsFTP_F_VALS)     // X holds the --arg values (struct rec_x)

	StrTruncated = 1 // StrFlags: longer than the buffer, shown with …
	StrUser      = 2 // StrFlags: read as a user pointer
)

// Wire sizes of the ringbuf records (bpf/trace.bpf.c): the header every
// record starts with, a full record (--strings, --stack) and a comm record.
const (
	HeaderSize = int(unsafe.Sizeof(bpfobj.TraceRecHdr{}))
	FullSize   = int(unsafe.Sizeof(bpfobj.TraceRecFull{}))
	// ValsSize is a record with values without struct bytes; up to
	// MaxStructBytes follow it (struct rec_x's b, as many as used).
	ValsSize       = int(unsafe.Offsetof(bpfobj.TraceRecX{}.B))
	MaxStructBytes = len(bpfobj.TraceEvent{}.Xb)
	commSize       = HeaderSize + 16
	exitFixed      = HeaderSize + 16 // duration_ns, ret
	maxArgs        = 6
)

// Decoder turns ringbuf records into events. It keeps each thread's comm,
// which the kernel sends once per thread (and again after an exec or a
// rename) in a comm record before the thread's next event, and each
// thread's open entries, so an exit carries its entry's arguments
// (FlagHasArgs) although the kernel sends them only once. The zero value
// is ready to use; a Decoder is not safe for concurrent use.
type Decoder struct {
	comms map[uint32][16]int8 // tid -> comm
	open  map[uint32]*threadFrames
	// The last thread looked up, its comm and frames (nil: not yet): a
	// thread's records mostly come in runs.
	lastTid    uint32
	lastComm   [16]int8
	lastFrames *threadFrames
	lastOK     bool
	// The exit of the call record Decode gave the entry of.
	next    bpfobj.TraceRecHdr
	nextDur uint64
	nextRet int64
	hasNext bool
	// Comms counts comm records seen.
	Comms uint64
}

// Decode decodes one record into e. It returns false for a record that
// is not an event (a comm record, which it keeps), and an error for a
// malformed record. A call record (KindCall) holds two events: Decode
// gives the entry, and Next the exit.
func (d *Decoder) Decode(sample []byte, e *bpfobj.TraceEvent) (bool, error) {
	d.hasNext = false
	if len(sample) < HeaderSize {
		return false, fmt.Errorf("ringbuf record of %d bytes, shorter than the %d-byte header", len(sample), HeaderSize)
	}
	h := (*bpfobj.TraceRecHdr)(unsafe.Pointer(&sample[0]))
	if d.comms == nil {
		d.comms = map[uint32][16]int8{}
	}
	if h.Flags&FlagFull != 0 {
		if len(sample) != FullSize {
			return false, fmt.Errorf("full record of %d bytes, want %d", len(sample), FullSize)
		}
		r := (*bpfobj.TraceRecFull)(unsafe.Pointer(&sample[0]))
		d.header(h, e)
		e.DurationNs, e.Ret, e.Args, e.Comm = r.DurationNs, r.Ret, r.Args, r.Comm
		e.StrLen, e.StrArg, e.StrFlags, e.StackLen = r.StrLen, r.StrArg, r.StrFlags, r.StackLen
		if h.Flags&FlagStrings != 0 {
			e.Str = r.Str
		}
		if h.Flags&FlagStack != 0 {
			e.Kstack = r.Kstack
		}
		d.setComm(h.Tid, r.Comm)
		d.pairArgs(e)
		return true, nil
	}
	if h.Flags&FlagVals != 0 {
		if len(sample) < ValsSize || len(sample) > ValsSize+MaxStructBytes {
			return false, fmt.Errorf("record with values of %d bytes, want %d to %d", len(sample), ValsSize, ValsSize+MaxStructBytes)
		}
		var r bpfobj.TraceRecX
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), ValsSize), sample)
		d.header(h, e)
		e.DurationNs, e.Ret, e.Args, e.X = r.DurationNs, r.Ret, r.Args, r.X
		copy(e.Xb[:], sample[ValsSize:])
		e.Comm = d.comm(h.Tid)
		d.pairArgs(e)
		return true, nil
	}
	n := int(h.Nargs)
	if n > maxArgs {
		return false, fmt.Errorf("record with %d arguments, at most %d", n, maxArgs)
	}
	switch h.Kind {
	case KindComm:
		if len(sample) != commSize {
			return false, fmt.Errorf("comm record of %d bytes, want %d", len(sample), commSize)
		}
		d.setComm(h.Tid, *(*[16]int8)(unsafe.Pointer(&sample[HeaderSize])))
		d.Comms++
		return false, nil
	case KindEntry:
		if len(sample) != HeaderSize+8*n {
			return false, fmt.Errorf("entry record of %d bytes with %d arguments, want %d", len(sample), n, HeaderSize+8*n)
		}
		d.header(h, e)
		e.DurationNs, e.Ret = 0, 0
		copyArgs(e, sample[HeaderSize:], n)
	case KindCall:
		if len(sample) != exitFixed+8*n {
			return false, fmt.Errorf("call record of %d bytes with %d arguments, want %d", len(sample), n, exitFixed+8*n)
		}
		d.header(h, e)
		dur := *(*uint64)(unsafe.Pointer(&sample[HeaderSize]))
		if dur > e.TsNs {
			return false, fmt.Errorf("call record of %d ns that ended at %d ns", dur, e.TsNs)
		}
		d.next, d.nextDur, d.nextRet = *h, dur, *(*int64)(unsafe.Pointer(&sample[HeaderSize+8]))
		e.Kind, e.TsNs, e.DurationNs, e.Ret, e.Cpu = KindEntry, e.TsNs-dur, 0, 0, uint32(h.EntryCpu)
		copyArgs(e, sample[exitFixed:], n)
		d.hasNext = true
	case KindExit:
		want := exitFixed
		if h.Flags&FlagHasArgs != 0 {
			want += 8 * n
		}
		if len(sample) != want {
			return false, fmt.Errorf("exit record of %d bytes, want %d", len(sample), want)
		}
		d.header(h, e)
		e.DurationNs = *(*uint64)(unsafe.Pointer(&sample[HeaderSize]))
		e.Ret = *(*int64)(unsafe.Pointer(&sample[HeaderSize+8]))
		if h.Flags&FlagHasArgs != 0 {
			copyArgs(e, sample[exitFixed:], n)
		} else {
			e.Nargs = 0
			e.Args = [maxArgs]uint64{}
		}
	default:
		return false, fmt.Errorf("record of unknown kind %d", h.Kind)
	}
	e.Comm = d.comm(h.Tid)
	d.pairArgs(e)
	return true, nil
}

// Next gives the exit of the call record the last Decode gave the entry
// of, once; false when there is none.
func (d *Decoder) Next(e *bpfobj.TraceEvent) bool {
	if !d.hasNext {
		return false
	}
	d.hasNext = false
	d.header(&d.next, e)
	e.Kind, e.DurationNs, e.Ret = KindExit, d.nextDur, d.nextRet
	e.Flags &^= FlagHasArgs // its entry's, from pairArgs
	e.Nargs, e.Args = 0, [maxArgs]uint64{}
	e.Comm = d.comm(e.Tid)
	d.pairArgs(e)
	return true
}

// comm returns the comm of thread tid (zero when none was sent).
func (d *Decoder) comm(tid uint32) [16]int8 {
	if d.lastOK && d.lastTid == tid {
		return d.lastComm
	}
	d.lastTid, d.lastComm, d.lastFrames, d.lastOK = tid, d.comms[tid], nil, true
	return d.lastComm
}

// setComm keeps the comm of thread tid.
func (d *Decoder) setComm(tid uint32, c [16]int8) {
	d.comms[tid] = c
	if d.lastOK && d.lastTid == tid {
		d.lastComm = c
	}
}

// threadFrames are a thread's entries not yet matched by their exit, by
// depth, so an exit (whose record carries no arguments) gets its entry's.
type threadFrames struct {
	f [16]struct {
		funcID uint32
		nargs  uint8
		ok     bool
		args   [maxArgs]uint64
	}
}

func (d *Decoder) frames(tid uint32) *threadFrames {
	if d.lastOK && d.lastTid == tid && d.lastFrames != nil {
		return d.lastFrames
	}
	if d.open == nil {
		d.open = map[uint32]*threadFrames{}
	}
	t := d.open[tid]
	if t == nil {
		t = &threadFrames{}
		d.open[tid] = t
	}
	if d.lastOK && d.lastTid == tid {
		d.lastFrames = t
	}
	return t
}

// pairArgs remembers an entry's arguments, or gives an exit its entry's.
func (d *Decoder) pairArgs(e *bpfobj.TraceEvent) {
	if e.Depth >= 16 {
		return
	}
	t := d.frames(e.Tid)
	fr := &t.f[e.Depth]
	if e.Kind == KindEntry {
		fr.funcID, fr.nargs, fr.ok, fr.args = e.FuncId, e.Nargs, true, e.Args
		return
	}
	if e.Flags&(FlagHasArgs|FlagNoEntry) == 0 && fr.ok && fr.funcID == e.FuncId {
		e.Args, e.Nargs = fr.args, fr.nargs
		e.Flags |= FlagHasArgs
	}
	fr.ok = false
}

func (d *Decoder) header(h *bpfobj.TraceRecHdr, e *bpfobj.TraceEvent) {
	e.TsNs, e.Tgid, e.Tid, e.FuncId = h.TsNs, h.Tgid, h.Tid, h.FuncId
	e.Depth, e.Cpu, e.Kind, e.Mode, e.Flags, e.Nargs = h.Depth, uint32(h.Cpu), h.Kind, h.Mode, h.Flags, h.Nargs
}

func copyArgs(e *bpfobj.TraceEvent, b []byte, n int) {
	e.Args = [maxArgs]uint64{}
	for i := 0; i < n; i++ {
		e.Args[i] = *(*uint64)(unsafe.Pointer(&b[8*i]))
	}
}

// strSlot returns the string slot of argument i, or -1 when the record
// carries no string for it (not a string, NULL, or --strings off).
func strSlot(e *bpfobj.TraceEvent, i int) int {
	if e.Flags&FlagStrings == 0 {
		return -1
	}
	for s := range e.StrLen {
		if e.StrLen[s] != 0 && int(e.StrArg[s]) == i {
			return s
		}
	}
	return -1
}

// StringArg returns the string read for slot s of e: its bytes (without
// the NUL), whether it was truncated, and the read's errno (0 when it
// worked).
func StringArg(e *bpfobj.TraceEvent, s int) (str []byte, truncated bool, errno int) {
	n := int(e.StrLen[s])
	if n < 0 {
		return nil, false, -n
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.Str[s][0])), len(e.Str[s]))
	if n > len(b) {
		n = len(b)
	}
	if n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:n], e.StrFlags[s]&StrTruncated != 0, 0
}

// appendString appends a string argument as a Go-quoted string, "…"
// after the closing quote when truncated, or <fault> when the read failed.
func appendString(b []byte, e *bpfobj.TraceEvent, s int) []byte {
	str, trunc, errno := StringArg(e, s)
	if errno != 0 {
		return append(b, "<fault>"...)
	}
	b = strconv.AppendQuote(b, string(str))
	if trunc {
		b = append(b, "…"...)
	}
	return b
}

// Stack returns the kernel stack of e (return addresses, innermost first)
// and the errno of a failed capture (0 when it worked, or without
// FlagStack).
func Stack(e *bpfobj.TraceEvent) ([]uint64, int) {
	if e.Flags&FlagStack == 0 {
		return nil, 0
	}
	if e.StackLen < 0 {
		return nil, int(-e.StackLen)
	}
	n := min(int(e.StackLen)/8, len(e.Kstack))
	return e.Kstack[:n], 0
}

// Symbolizer names kernel text addresses (symbols.Symbolizer).
type Symbolizer interface {
	Symbolize(addr uint64) string
}

// appendStackText appends one indented line per stack frame of e, or one
// line with the capture's errno.
func appendStackText(b []byte, e *bpfobj.TraceEvent, syms Symbolizer, indent int) []byte {
	st, errno := Stack(e)
	if errno != 0 {
		b = appendIndent(b, indent)
		b = append(b, "<stack: "...)
		b = appendErrno(b, -int64(errno))
		return append(b, ">\n"...)
	}
	for _, a := range st {
		b = appendIndent(b, indent)
		if syms != nil {
			b = append(b, syms.Symbolize(a)...)
		} else {
			b = append(b, "0x"...)
			b = strconv.AppendUint(b, a, 16)
		}
		b = append(b, '\n')
	}
	return b
}

func appendIndent(b []byte, n int) []byte {
	for i := 0; i < n; i++ {
		b = append(b, ' ')
	}
	return b
}

// commBytes returns the event's comm up to its NUL, without copying.
func commBytes(e *bpfobj.TraceEvent) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.Comm[0])), len(e.Comm))
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// appendQuoted appends s as a JSON string: directly when it is printable
// ASCII without quotes or backslashes (function names, most comms), else
// through appendJSONString.
func appendQuoted[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return appendJSONString(b, []byte(s))
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Comm returns the event's comm as a string.
func Comm(e *bpfobj.TraceEvent) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.Comm[0])), len(e.Comm))
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// ModeName names an event's attach mode: the trace mode (symbols.Modes)
// whose programs write that code (attach.TraceModes pairs each mode with
// its code). Entry-only functions of the fsession and multi-link modes
// are traced by a plain fentry program and carry fentry+fexit's code.
func ModeName(m uint8) string {
	switch bpfobj.TraceFtpMode(m) {
	case bpfobj.TraceFtpModeFTP_MODE_FENTRY:
		return symbols.ModeFentryFexit
	case bpfobj.TraceFtpModeFTP_MODE_KPROBE_MULTI:
		return symbols.ModeKprobeMulti
	case bpfobj.TraceFtpModeFTP_MODE_KPROBE:
		return symbols.ModeKprobe
	case bpfobj.TraceFtpModeFTP_MODE_FSESSION:
		return symbols.ModeFSession
	case bpfobj.TraceFtpModeFTP_MODE_FENTRY_MULTI:
		return symbols.ModeFentryMulti
	case bpfobj.TraceFtpModeFTP_MODE_FSESSION_MULTI:
		return symbols.ModeFSessionMulti
	case bpfobj.TraceFtpModeFTP_MODE_KPROBE_SESSION:
		return symbols.ModeKprobeSession
	}
	return "mode" + strconv.Itoa(int(m))
}

// Table maps function ids to functions.
type Table []*symbols.Func

// Lookup returns the function for id, or nil.
func (t Table) Lookup(id uint32) *symbols.Func {
	if int(id) < len(t) {
		return t[id]
	}
	return nil
}

// ErrnoOf returns the errno name ("ENOENT") when ret is an error return of
// f (negative int, or an error value of a long or pointer), else "".
func ErrnoOf(f *symbols.Func, ret int64) string {
	if ret >= 0 || ret < -4095 {
		return ""
	}
	if f != nil && f.Proto != nil && (f.Proto.RetKind == symbols.RetVoid || (f.Proto.RetKind == symbols.RetOther && !f.Proto.RetSigned)) {
		return ""
	}
	if n := unix.ErrnoName(unix.Errno(-ret)); n != "" {
		return n
	}
	return strconv.FormatInt(ret, 10)
}

func appendErrno(b []byte, ret int64) []byte {
	if n := unix.ErrnoName(unix.Errno(-ret)); n != "" {
		b = append(b, '-')
		return append(b, n...)
	}
	return strconv.AppendInt(b, ret, 10)
}

// AppendDuration appends d (ns) with a unit: ns, µs, ms or s.
func AppendDuration(b []byte, ns uint64) []byte {
	switch {
	case ns < 1000:
		b = strconv.AppendUint(b, ns, 10)
		return append(b, "ns"...)
	case ns < 1000_000:
		return append(appendFixed3(b, ns), "µs"...)
	case ns < 1000_000_000:
		return append(appendFixed3(b, (ns+500)/1000), "ms"...)
	}
	return append(appendFixed3(b, (ns+500_000)/1000_000), 's')
}

// appendFixed3 appends v/1000 with three decimals ("3.066" for 3066).
func appendFixed3(b []byte, v uint64) []byte {
	b = strconv.AppendUint(b, v/1000, 10)
	f := v % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// AppendSeconds appends ns as seconds with six decimals (rounded to the
// microsecond), as the text outputs print timestamps.
func AppendSeconds(b []byte, ns uint64) []byte {
	us := (ns + 500) / 1000
	b = strconv.AppendUint(b, us/1_000_000, 10)
	f := us % 1_000_000
	var d [7]byte
	d[0] = '.'
	for i := 6; i >= 1; i-- {
		d[i] = byte('0' + f%10)
		f /= 10
	}
	return append(b, d[:]...)
}

// FuncName returns the display name for id.
func (t Table) FuncName(id uint32) string {
	if f := t.Lookup(id); f != nil {
		if f.Copies <= 1 && f.Module == "" {
			return f.Name // Display without building a string
		}
		return f.Display()
	}
	return "func#" + strconv.Itoa(int(id))
}

// Text formats events as text lines:
//
//	TIME(s) CPU COMM TGID/TID  → func(args)
//	TIME(s) CPU COMM TGID/TID  ← func = ret  duration
//
// indented two spaces per call depth of the thread.
//
// With --stack, the entry's kernel stack follows, one frame per line.
type Text struct {
	Table Table
	Base  uint64     // relative times count from it (ns); 0: set to the first event's
	Syms  Symbolizer // names stack frames (nil: hex addresses)
}

// Append appends one formatted line (with newline) to b.
func (t *Text) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	if t.Base == 0 {
		t.Base = e.TsNs
	}
	f := t.Table.Lookup(e.FuncId)
	rel := e.TsNs - min(e.TsNs, t.Base) // an entry older than Base (a leaf record) shows 0
	b = AppendSeconds(b, rel)
	b = append(b, ' ')
	switch {
	case e.Cpu < 10:
		b = append(b, ' ', ' ')
	case e.Cpu < 100:
		b = append(b, ' ')
	}
	b = strconv.AppendUint(b, uint64(e.Cpu), 10)
	b = append(b, ' ')
	b = append(b, commBytes(e)...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.Tgid), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(e.Tid), 10)
	b = append(b, "  "...)
	for i := 0; i < int(e.Depth) && i < 32; i++ {
		b = append(b, "  "...)
	}
	name := t.Table.FuncName(e.FuncId)
	if e.Kind == KindEntry {
		b = append(b, "→ "...)
		b = append(b, name...)
		b = AppendArgs(b, f, e)
		if f != nil && f.EntryOnly != "" {
			b = append(b, "  (entry only: "...)
			b = append(b, f.EntryOnly...)
			b = append(b, ')')
		}
		if e.Flags&FlagStack != 0 {
			b = append(b, '\n')
			return appendStackText(b, e, t.Syms, 8+2*min(int(e.Depth), 32))
		}
	} else {
		b = append(b, "← "...)
		b = append(b, name...)
		if e.Flags&FlagDeferred != 0 && e.Flags&FlagHasArgs != 0 {
			b = AppendArgs(b, f, e)
		}
		b = append(b, " = "...)
		b = AppendRet(b, f, e.Ret)
		b = append(b, "  "...)
		if e.Flags&FlagNoEntry != 0 {
			b = append(b, "(no entry)"...)
		} else {
			b = AppendDuration(b, e.DurationNs)
		}
		if e.Flags&FlagStack != 0 && e.Flags&FlagDeferred != 0 {
			b = append(b, '\n')
			return appendStackText(b, e, t.Syms, 8+2*min(int(e.Depth), 32))
		}
	}
	return append(b, '\n')
}

func appendPad(b []byte, s string, w int) []byte {
	for i := len(s); i < w; i++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

// JSON formats events as JSON lines: Line documents every field, and
// how arguments, return values and --arg values print ("args": an object
// by parameter name, typed from BTF by the rule the text follows).
type JSON struct {
	Table Table
	Syms  Symbolizer // names stack frames (nil: hex addresses)
	// funcs holds, by function id, the parts of a line that depend only
	// on the function, built at its first event.
	funcs []*jsonFunc
}

// jsonFunc is what a function's JSON lines share: `,"func":...` up to
// its "func_id", and with a prototype, the key before each argument in
// "args" (`,"args":{"file":`, `,"buf":`, ...).
type jsonFunc struct {
	head []byte
	keys [][]byte
}

// fn returns the parts of function id's lines (f: its function, or nil).
func (j *JSON) fn(id uint32, f *symbols.Func) *jsonFunc {
	if int(id) < len(j.funcs) && j.funcs[id] != nil {
		return j.funcs[id]
	}
	jf := &jsonFunc{head: []byte(`,"func":`)}
	if f != nil {
		jf.head = appendQuoted(jf.head, f.Name)
		if f.Module != "" {
			jf.head = append(jf.head, `,"module":`...)
			jf.head = appendQuoted(jf.head, f.Module)
		}
	} else {
		jf.head = appendQuoted(jf.head, j.Table.FuncName(id))
	}
	jf.head = append(jf.head, `,"func_id":`...)
	jf.head = strconv.AppendUint(jf.head, uint64(id), 10)
	if params, ok := protoParams(f); ok {
		for i := range params {
			k := []byte(`,`)
			if i == 0 {
				k = []byte(`,"args":{`)
			}
			k = appendQuoted(k, paramName(f, i))
			jf.keys = append(jf.keys, append(k, ':'))
		}
	}
	if int(id) < 1<<16 { // a record's id indexes the table; a larger one is not kept
		for len(j.funcs) <= int(id) {
			j.funcs = append(j.funcs, nil)
		}
		j.funcs[id] = jf
	}
	return jf
}

// Append appends one JSON line to b.
func (j *JSON) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	f := j.Table.Lookup(e.FuncId)
	jf := j.fn(e.FuncId, f)
	if e.Kind == KindEntry {
		b = append(b, `{"type":"entry","ts_ns":`...)
	} else {
		b = append(b, `{"type":"exit","ts_ns":`...)
	}
	b = strconv.AppendUint(b, e.TsNs, 10)
	b = appendJSONWhere(b, e)
	b = append(b, jf.head...)
	b = append(b, `,"mode":"`...)
	b = append(b, ModeName(e.Mode)...)
	b = append(b, `","depth":`...)
	b = strconv.AppendUint(b, uint64(e.Depth), 10)
	if f != nil && f.EntryOnly != "" {
		b = append(b, `,"entry_only":`...)
		b = strconv.AppendQuote(b, f.EntryOnly)
	}
	withArgs := e.Kind == KindEntry || e.Flags&FlagHasArgs != 0
	if withArgs && len(jf.keys) > 0 {
		for i, p := range f.Proto.Params[:len(jf.keys)] {
			b = append(b, jf.keys[i]...)
			b = appendArg(b, p, e, i, true)
		}
		b = append(b, '}')
		withArgs = false
	}
	b = appendJSONArgs(b, f, e, withArgs)
	if e.Flags&FlagStack != 0 {
		b = j.appendJSONStack(b, e)
	}
	if e.Kind == KindExit {
		b = append(b, `,"ret":`...)
		b = appendRetJSON(b, f, e.Ret)
		b = append(b, `,"ret_str":"`...)
		b = AppendRet(b, f, e.Ret)
		b = append(b, '"')
		if e.Flags&FlagNoEntry != 0 {
			b = append(b, `,"no_entry":true`...)
		} else {
			b = append(b, `,"duration_ns":`...)
			b = strconv.AppendUint(b, e.DurationNs, 10)
		}
	}
	return append(b, "}\n"...)
}

// appendJSONValues appends "values" (--arg, by expression) and, for reads
// that faulted, "value_errors".
func appendJSONValues(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	b = append(b, `,"values":`...)
	b = appendValuesObject(b, f, e)
	first := true
	for i := range f.Values {
		if i >= len(e.X.V) || e.X.Len[i] >= 0 {
			continue
		}
		if first {
			b = append(b, `,"value_errors":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		b = appendQuoted(b, f.Values[i].Name)
		b = append(b, `:"`...)
		b = appendErrno(b, int64(e.X.Len[i]))
		b = append(b, '"')
	}
	if !first {
		b = append(b, '}')
	}
	return b
}

// appendValuesObject appends the --arg values as {"expr":value,...} in
// the order given (appendXValue; null for NULL or a faulted read).
func appendValuesObject(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	b = append(b, '{')
	for i, val := range f.Values {
		if i >= len(e.X.V) {
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, val.Name)
		b = append(b, ':')
		b = appendXValue(b, val, e, i, true)
	}
	return append(b, '}')
}

// Signature is "ret name(type a, type b)" from a prototype, for plans.
func Signature(f *symbols.Func) string {
	if f.Proto == nil {
		return f.Name + "(?)"
	}
	var parts []string
	for _, p := range f.Proto.Params {
		if strings.Contains(p.Type, "(*)") { // function pointer: int (*name)(...)
			parts = append(parts, strings.Replace(p.Type, "(*)", "(*"+p.Name+")", 1))
			continue
		}
		parts = append(parts, strings.TrimSpace(p.Type+" "+p.Name))
	}
	if f.Proto.Varargs {
		parts = append(parts, "...")
	}
	if len(parts) == 0 {
		parts = []string{"void"}
	}
	return f.Proto.Ret + " " + f.Name + "(" + strings.Join(parts, ", ") + ")"
}

func paramName(f *symbols.Func, i int) string {
	if f != nil && f.Proto != nil && i < len(f.Proto.Params) && f.Proto.Params[i].Name != "" {
		return f.Proto.Params[i].Name
	}
	return "arg" + strconv.Itoa(i)
}

// appendJSONWhere appends where the event happened: "cpu", "tgid",
// "tid" and "comm".
func appendJSONWhere(b []byte, e *bpfobj.TraceEvent) []byte {
	b = append(b, `,"cpu":`...)
	b = strconv.AppendUint(b, uint64(e.Cpu), 10)
	b = append(b, `,"tgid":`...)
	b = strconv.AppendUint(b, uint64(e.Tgid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(e.Tid), 10)
	b = append(b, `,"comm":`...)
	b = appendQuoted(b, commBytes(e))
	return b
}

// appendJSONArgs appends the event's arguments when withArgs: "args" by
// the prototype, or "regs" (argsField, appendArgsValue); then, with
// --strings, which strings were cut or failed to read, and the --arg
// values when it carries them.
func appendJSONArgs(b []byte, f *symbols.Func, e *bpfobj.TraceEvent, withArgs bool) []byte {
	if withArgs {
		b = append(b, ',', '"')
		b = append(b, argsField(f)...)
		b = append(b, '"', ':')
		b = appendArgsValue(b, f, e)
	}
	if e.Flags&FlagStrings != 0 {
		b = appendJSONStringNotes(b, f, e)
	}
	if e.Flags&FlagVals != 0 && f != nil && len(f.Values) > 0 {
		b = appendJSONValues(b, f, e)
	}
	return b
}

// appendJSONStringNotes appends, for the strings read (--strings, whose
// values are in "args"), "truncated": the parameters whose string was
// cut, and "string_errors": the errno of each read that failed.
func appendJSONStringNotes(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	var trunc, faults []int
	for s := range e.StrLen {
		if e.StrLen[s] == 0 {
			continue
		}
		if _, tr, errno := StringArg(e, s); errno != 0 {
			faults = append(faults, s)
		} else if tr {
			trunc = append(trunc, s)
		}
	}
	if len(trunc) > 0 {
		b = append(b, `,"truncated":[`...)
		for i, s := range trunc {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, []byte(paramName(f, int(e.StrArg[s]))))
		}
		b = append(b, ']')
	}
	if len(faults) > 0 {
		b = append(b, `,"string_errors":{`...)
		for i, s := range faults {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, []byte(paramName(f, int(e.StrArg[s]))))
			b = append(b, ":\""...)
			b = appendErrno(b, int64(e.StrLen[s]))
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return b
}

func (j *JSON) appendJSONStack(b []byte, e *bpfobj.TraceEvent) []byte {
	st, errno := Stack(e)
	if errno != 0 {
		b = append(b, `,"stack_error":"`...)
		b = appendErrno(b, -int64(errno))
		return append(b, '"')
	}
	b = append(b, `,"stack":[`...)
	for i, a := range st {
		if i > 0 {
			b = append(b, ',')
		}
		if j.Syms != nil {
			b = appendJSONString(b, []byte(j.Syms.Symbolize(a)))
		} else {
			b = append(b, `"0x`...)
			b = strconv.AppendUint(b, a, 16)
			b = append(b, '"')
		}
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string: control characters, quotes,
// backslashes and bytes that are not UTF-8 escaped as \u00XX.
func appendJSONString(b []byte, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[i:])
			if r != utf8.RuneError || n > 1 {
				b = append(b, s[i:i+n]...)
				i += n
				continue
			}
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}

// Timestamp returns a record's ts_ns (bpf_ktime_get_ns at its event; the
// exit's for a call record), 0 for a record shorter than the header: what
// the rings reader orders the CPUs' records by.
func Timestamp(sample []byte) uint64 {
	if len(sample) < HeaderSize {
		return 0
	}
	return *(*uint64)(unsafe.Pointer(&sample[unsafe.Offsetof(bpfobj.TraceRecHdr{}.TsNs)]))
}
