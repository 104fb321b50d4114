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

// Record kinds and flags, as the BPF side writes them (bpf/trace.bpf.c).
const (
	KindEntry = 1
	KindExit  = 2

	FlagNoEntry  = 1  // exit without a recorded entry: duration unknown
	FlagHasArgs  = 2  // args hold the entry arguments
	FlagDeferred = 4  // entry not emitted (--min-duration/--errors); exit carries args
	FlagStrings  = 8  // StrLen/StrArg/StrFlags/Str hold the string arguments (--strings)
	FlagStack    = 16 // StackLen/Kstack hold the kernel stack (--stack)

	StrTruncated = 1 // StrFlags: longer than the buffer, shown with …
	StrUser      = 2 // StrFlags: read as a user pointer
)

// RecordSize is the size in bytes of a full ringbuf record (with the
// strings and stack tail, --strings or --stack).
const RecordSize = int(unsafe.Sizeof(bpfobj.TraceEvent{}))

// HeaderSize is the size in bytes of a record without the tail: the
// kernel reserves only this much when neither --strings nor --stack is on.
const HeaderSize = int(unsafe.Offsetof(bpfobj.TraceEvent{}.StrLen))

// Decode copies a ringbuf sample into e. The sample is the kernel's struct
// event in native byte order, HeaderSize or RecordSize bytes long; a
// header-only sample leaves e's tail as it was (its flags say the tail is
// absent). It returns an error for any other size.
func Decode(sample []byte, e *bpfobj.TraceEvent) error {
	switch len(sample) {
	case RecordSize:
		*e = *(*bpfobj.TraceEvent)(unsafe.Pointer(&sample[0]))
	case HeaderSize:
		*(*[HeaderSize]byte)(unsafe.Pointer(e)) = *(*[HeaderSize]byte)(unsafe.Pointer(&sample[0]))
	default:
		return fmt.Errorf("event record of %d bytes, want %d or %d", len(sample), HeaderSize, RecordSize)
	}
	return nil
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

// ModeName names an event's attach mode.
func ModeName(m uint8) string {
	switch m {
	case 1:
		return "fentry"
	case 2:
		return "kprobe-multi"
	case 3:
		return "kprobe"
	case 4:
		return "fsession"
	case 5:
		return "fentry-multi"
	case 6:
		return "fsession-multi"
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

// AppendArgs appends "(a, b, ...)" for an entry: with a BTF prototype,
// "name=value" per parameter (signed decimal, unsigned decimal, enum
// constant names, true/false, pointers in hex, NULL, and with --strings
// the quoted string of a `char *`, … when truncated, <fault> when the read
// failed); without one, nargs raw hex values.
func AppendArgs(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	b = append(b, '(')
	n := int(e.Nargs)
	var params []symbols.Param
	// A prototype that does not describe the registers (a struct passed by
	// value takes two and shifts every later parameter; a compiler copy may
	// drop or reorder parameters): show raw registers then (ProtoErr says
	// why, in --verbose).
	if f != nil && f.Proto != nil && f.ProtoErr == "" {
		params = f.Proto.Params
		n = min(len(params), 6)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		v := e.Args[i]
		if i < len(params) {
			p := params[i]
			if p.Name != "" {
				b = append(b, p.Name...)
				b = append(b, '=')
			}
			if s := strSlot(e, i); s >= 0 {
				b = appendString(b, e, s)
			} else if p.Kind == symbols.ArgEnum && len(p.Enum) > 0 {
				if n := symbols.EnumName(p.Enum, v, p.Size); n != "" {
					b = append(b, n...)
				} else {
					b = appendValue(b, v, p.Kind, p.Size)
				}
			} else {
				b = appendValue(b, v, p.Kind, p.Size)
			}
		} else {
			b = append(b, "0x"...)
			b = strconv.AppendUint(b, v, 16)
		}
	}
	if len(params) > 6 {
		b = append(b, ", ..."...)
	}
	return append(b, ')')
}

func appendValue(b []byte, v uint64, k symbols.ArgKind, size uint32) []byte {
	switch k {
	case symbols.ArgInt, symbols.ArgEnum:
		switch size {
		case 1:
			return strconv.AppendInt(b, int64(int8(v)), 10)
		case 2:
			return strconv.AppendInt(b, int64(int16(v)), 10)
		case 4:
			return strconv.AppendInt(b, int64(int32(v)), 10)
		}
		return strconv.AppendInt(b, int64(v), 10)
	case symbols.ArgUint:
		if size < 8 && size > 0 {
			v &= 1<<(8*size) - 1
		}
		return strconv.AppendUint(b, v, 10)
	case symbols.ArgBool:
		if v&0xff != 0 {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case symbols.ArgPtr, symbols.ArgCharPtr:
		if v == 0 {
			return append(b, "NULL"...)
		}
	}
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

// AppendRet appends a return value: errno names for negative ints
// (-ENOENT), ERR_PTR(-E...) for error pointers, hex for pointers, decimal
// otherwise.
func AppendRet(b []byte, f *symbols.Func, ret int64) []byte {
	kind := symbols.RetLong
	if f != nil && f.Proto != nil {
		kind = f.Proto.RetKind
	}
	switch kind {
	case symbols.RetVoid:
		return append(b, "void"...)
	case symbols.RetPtr:
		if ret < 0 && ret >= -4095 {
			b = append(b, "ERR_PTR("...)
			b = appendErrno(b, ret)
			return append(b, ')')
		}
		if ret == 0 {
			return append(b, "NULL"...)
		}
		b = append(b, "0x"...)
		return strconv.AppendUint(b, uint64(ret), 16)
	case symbols.RetS32, symbols.RetLong:
		if ret < 0 && ret >= -4095 {
			return appendErrno(b, ret)
		}
	}
	return strconv.AppendInt(b, ret, 10)
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
		b = strconv.AppendFloat(b, float64(ns)/1e3, 'f', 3, 64)
		return append(b, "µs"...)
	case ns < 1000_000_000:
		b = strconv.AppendFloat(b, float64(ns)/1e6, 'f', 3, 64)
		return append(b, "ms"...)
	}
	b = strconv.AppendFloat(b, float64(ns)/1e9, 'f', 3, 64)
	return append(b, 's')
}

// FuncName returns the display name for id.
func (t Table) FuncName(id uint32) string {
	if f := t.Lookup(id); f != nil {
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
	Base  uint64     // timestamp of the first event (ns), set on first use
	Syms  Symbolizer // names stack frames (nil: hex addresses)
	buf   []byte
}

// Append appends one formatted line (with newline) to b.
func (t *Text) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	if t.Base == 0 {
		t.Base = e.TsNs
	}
	f := t.Table.Lookup(e.FuncId)
	rel := e.TsNs - t.Base
	b = strconv.AppendFloat(b, float64(rel)/1e9, 'f', 6, 64)
	b = append(b, ' ')
	b = appendPad(b, strconv.Itoa(int(e.Cpu)), 3)
	b = append(b, ' ')
	b = append(b, Comm(e)...)
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

// JSON formats events as JSON lines. Fields (units in the names):
//
//	type        "entry" | "exit"
//	ts_ns       CLOCK_MONOTONIC timestamp (bpf_ktime_get_ns), ns
//	cpu, tgid, tid, comm
//	func, module, func_id, mode ("fentry" | "kprobe-multi"), depth
//	args        [u64...] raw argument registers (entry, and exit with entry args)
//	ret         exit: return value (int64, sign-extended for int functions)
//	ret_str     exit: decoded return value ("-ENOENT", "ERR_PTR(-EINVAL)")
//	duration_ns exit: time since the matching entry, ns (absent without entry)
//	no_entry    exit: true when no entry was recorded
//	strings     --strings: {"param": "value" | null (read failed)}
//	truncated   --strings: ["param", ...] strings cut at 127 bytes
//	string_errors --strings: {"param": "-EFAULT"} reads that failed
//	stack       --stack: ["symbol+0xOFF [module]", ...] innermost first
//	stack_error --stack: "-EFAULT" when the capture failed
type JSON struct {
	Table Table
	Syms  Symbolizer // names stack frames (nil: hex addresses)
}

// Append appends one JSON line to b.
func (j *JSON) Append(b []byte, e *bpfobj.TraceEvent) []byte {
	f := j.Table.Lookup(e.FuncId)
	if e.Kind == KindEntry {
		b = append(b, `{"type":"entry","ts_ns":`...)
	} else {
		b = append(b, `{"type":"exit","ts_ns":`...)
	}
	b = strconv.AppendUint(b, e.TsNs, 10)
	b = append(b, `,"cpu":`...)
	b = strconv.AppendUint(b, uint64(e.Cpu), 10)
	b = append(b, `,"tgid":`...)
	b = strconv.AppendUint(b, uint64(e.Tgid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(e.Tid), 10)
	b = append(b, `,"comm":`...)
	b = strconv.AppendQuote(b, Comm(e))
	b = append(b, `,"func":`...)
	if f != nil {
		b = strconv.AppendQuote(b, f.Name)
		if f.Module != "" {
			b = append(b, `,"module":`...)
			b = strconv.AppendQuote(b, f.Module)
		}
	} else {
		b = strconv.AppendQuote(b, j.Table.FuncName(e.FuncId))
	}
	b = append(b, `,"func_id":`...)
	b = strconv.AppendUint(b, uint64(e.FuncId), 10)
	b = append(b, `,"mode":"`...)
	b = append(b, ModeName(e.Mode)...)
	b = append(b, `","depth":`...)
	b = strconv.AppendUint(b, uint64(e.Depth), 10)
	if e.Flags&FlagHasArgs != 0 {
		b = append(b, `,"args":[`...)
		n := int(e.Nargs)
		if f != nil && f.Proto != nil {
			n = min(len(f.Proto.Params), 6)
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, e.Args[i], 10)
		}
		b = append(b, ']')
	}
	if e.Flags&FlagStrings != 0 {
		b = appendJSONStrings(b, f, e)
	}
	if e.Flags&FlagStack != 0 {
		b = j.appendJSONStack(b, e)
	}
	if e.Kind == KindExit {
		b = append(b, `,"ret":`...)
		b = strconv.AppendInt(b, e.Ret, 10)
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

func appendJSONStrings(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	var trunc, faults []int
	first := true
	for s := range e.StrLen {
		if e.StrLen[s] == 0 {
			continue
		}
		if first {
			b = append(b, `,"strings":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		name := paramName(f, int(e.StrArg[s]))
		b = appendJSONString(b, []byte(name))
		b = append(b, ':')
		str, tr, errno := StringArg(e, s)
		if errno != 0 {
			b = append(b, "null"...)
			faults = append(faults, s)
			continue
		}
		b = appendJSONString(b, str)
		if tr {
			trunc = append(trunc, s)
		}
	}
	if first {
		return b
	}
	b = append(b, '}')
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
