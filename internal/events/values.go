package events

import (
	"strconv"
	"unsafe"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// appendTyped appends v, an argument register, a return value or an --arg
// value whose C type is of kind k (size bytes; en the constants of an
// enum), by the one rule every output follows (text, JSON lines, call
// trees, Perfetto; Line.Args documents it): a signed integer
// sign-extended from its size (an int of -100 is -100 whether its 64-bit
// register holds 0xffffff9c or 0xffffffffffffff9c), an unsigned one cut
// to its size, a bool true or false (its low byte), an enum by the name
// of its constant (its number when none matches), a pointer in hex
// (NULL: JSON null), anything else (a float, a small struct) in hex. JSON
// quotes names and hex; text does not.
func appendTyped(b []byte, v uint64, k symbols.ArgKind, size uint32, en []symbols.EnumValue, json bool) []byte {
	if k == symbols.ArgEnum && len(en) > 0 {
		if n := symbols.EnumName(en, v, size); n != "" {
			if json {
				return appendQuoted(b, n)
			}
			return append(b, n...)
		}
	}
	if size == 0 || size > 8 {
		size = 8
	}
	switch k {
	case symbols.ArgInt, symbols.ArgEnum:
		return appendInt(b, v, int(size), true)
	case symbols.ArgUint:
		return appendInt(b, v, int(size), false)
	case symbols.ArgBool:
		return strconv.AppendBool(b, v&0xff != 0)
	case symbols.ArgPtr, symbols.ArgCharPtr:
		if v == 0 {
			if json {
				return append(b, "null"...)
			}
			return append(b, "NULL"...)
		}
	}
	if json {
		b = append(b, `"0x`...)
		b = strconv.AppendUint(b, v, 16)
		return append(b, '"')
	}
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

// protoParams returns the parameters of f's prototype that e's argument
// registers hold (at most 6), or ok false when the registers are raw: no
// prototype, or one that does not describe them (a struct passed by value
// takes two and shifts every later parameter; a compiler copy may drop or
// reorder parameters; ProtoErr says why, in --verbose).
func protoParams(f *symbols.Func) (params []symbols.Param, ok bool) {
	if f == nil || f.Proto == nil || f.ProtoErr != "" {
		return nil, false
	}
	return f.Proto.Params[:min(len(f.Proto.Params), 6)], true
}

// appendArg appends argument i of e, of parameter p: with --strings the
// string read for a `char *` (text: quoted, … when truncated, <fault>
// when the read failed; JSON: a string, null when the read failed), else
// the register by appendTyped's rule.
func appendArg(b []byte, p symbols.Param, e *bpfobj.TraceEvent, i int, json bool) []byte {
	s := strSlot(e, i)
	switch {
	case s < 0:
		return appendTyped(b, e.Args[i], p.Kind, p.Size, p.Enum, json)
	case !json:
		return appendString(b, e, s)
	}
	str, _, errno := StringArg(e, s)
	if errno != 0 {
		return append(b, "null"...)
	}
	return appendJSONString(b, str)
}

// AppendArgs appends "(a, b, ...)" for an entry: with a BTF prototype
// that describes the registers, "name=value" per parameter (appendArg);
// without one, nargs raw hex values. The --arg values follow as
// " {expr=value, ...}".
func AppendArgs(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	b = append(b, '(')
	params, ok := protoParams(f)
	n := int(e.Nargs)
	if ok {
		n = len(params)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		if !ok {
			b = append(b, "0x"...)
			b = strconv.AppendUint(b, e.Args[i], 16)
			continue
		}
		if p := params[i]; p.Name != "" {
			b = append(b, p.Name...)
			b = append(b, '=')
		}
		b = appendArg(b, params[i], e, i, false)
	}
	if ok && len(f.Proto.Params) > 6 {
		b = append(b, ", ..."...)
	}
	b = append(b, ')')
	if e.Flags&FlagVals != 0 && f != nil && len(f.Values) > 0 {
		b = append(b, " {"...)
		for i := range f.Values {
			if i >= len(e.X.V) {
				break
			}
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, f.Values[i].Name...)
			b = append(b, '=')
			b = appendXValue(b, f.Values[i], e, i, false)
		}
		b = append(b, '}')
	}
	return b
}

// argsField is the JSON field that holds e's arguments: "args" (an
// object by parameter name) when f's prototype describes the registers,
// else "regs" (the raw registers).
func argsField(f *symbols.Func) string {
	if _, ok := protoParams(f); ok {
		return "args"
	}
	return "regs"
}

// appendArgsValue appends the value of argsField: {"name":value,...} in
// prototype order (appendArg; an unnamed parameter is argN), or
// [reg,...], nargs unsigned numbers.
func appendArgsValue(b []byte, f *symbols.Func, e *bpfobj.TraceEvent) []byte {
	params, ok := protoParams(f)
	if !ok {
		b = append(b, '[')
		for i := 0; i < int(e.Nargs) && i < len(e.Args); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, e.Args[i], 10)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, p := range params {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, paramName(f, i))
		b = append(b, ':')
		b = appendArg(b, p, e, i, true)
	}
	return append(b, '}')
}

// retType is how f's return value prints: its kind, size and enum
// constants, void true for a void function. Without a prototype: a
// signed 64-bit value.
func retType(f *symbols.Func) (k symbols.ArgKind, size uint32, en []symbols.EnumValue, void bool) {
	if f == nil || f.Proto == nil {
		return symbols.ArgInt, 8, nil, false
	}
	p := f.Proto
	switch p.RetKind {
	case symbols.RetVoid:
		return symbols.ArgOther, 0, nil, true
	case symbols.RetPtr:
		return symbols.ArgPtr, 8, nil, false
	}
	return p.RetArg, p.RetSize, p.RetEnum, false
}

// AppendRet appends a return value as text: errno names for error values
// of ints and longs (-ENOENT), ERR_PTR(-E...) for error pointers, void,
// else by appendTyped's rule (so "ret_str" says what "ret" says).
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
	case symbols.RetS32, symbols.RetLong:
		if ret < 0 && ret >= -4095 {
			return appendErrno(b, ret)
		}
	}
	k, size, en, _ := retType(f)
	return appendTyped(b, uint64(ret), k, size, en, false)
}

// appendRetJSON appends a return value as JSON ("ret") by appendTyped's
// rule: -2 for an int's -ENOENT, a pointer as a hex string (an error
// pointer too: "ret_str" names it), null for void.
func appendRetJSON(b []byte, f *symbols.Func, ret int64) []byte {
	k, size, en, void := retType(f)
	if void {
		return append(b, "null"...)
	}
	return appendTyped(b, uint64(ret), k, size, en, true)
}

// XValue returns --arg value i of e: the integer (or a string's address),
// the string's bytes (without the NUL) and whether it was truncated, and
// the errno of a faulted read (0 when it worked).
func XValue(e *bpfobj.TraceEvent, i int) (v uint64, str []byte, truncated bool, errno int) {
	n := int(e.X.Len[i])
	if n < 0 {
		return 0, nil, false, -n
	}
	v = e.X.V[i]
	if e.X.Flags[i]&uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_STR) == 0 || n == 0 {
		return v, nil, false, 0
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.X.S[i][0])), len(e.X.S[i]))
	n = min(n, len(b))
	if n > 0 && b[n-1] == 0 {
		n--
	}
	return v, b[:n], e.X.Flags[i]&uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_TRUNCATED) != 0, 0
}

// appendXValue appends --arg value i: a quoted string ("…" after it when
// truncated; NULL), a whole struct (AppendStruct, from its bytes in e.Xb),
// the value by appendTyped's rule, or <fault> (JSON: null).
func appendXValue(b []byte, val symbols.Value, e *bpfobj.TraceEvent, i int, json bool) []byte {
	v, str, trunc, errno := XValue(e, i)
	if errno != 0 {
		if json {
			return append(b, "null"...)
		}
		return append(b, "<fault>"...)
	}
	if val.Kind == symbols.ArgStruct && val.Type != nil {
		n := uint32(e.X.Len[i])
		if e.X.Flags[i]&uint8(bpfobj.TraceFtpXvalFlagsFTP_XV_BYTES) == 0 || val.Off+n > uint32(len(e.Xb)) {
			if json {
				return append(b, "null"...)
			}
			return append(b, "<no bytes>"...)
		}
		return AppendStruct(b, val.Type, e.Xb[val.Off:val.Off+n], json)
	}
	if val.Kind == symbols.ArgCharPtr {
		if str == nil {
			if json {
				return append(b, "null"...)
			}
			return append(b, "NULL"...)
		}
		if json {
			return appendJSONString(b, str)
		}
		b = strconv.AppendQuote(b, string(str))
		if trunc {
			b = append(b, "…"...)
		}
		return b
	}
	return appendTyped(b, v, val.Kind, val.Size, val.Enum, json)
}
