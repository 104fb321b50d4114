package events

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Bounds of a whole struct's text (--arg '*file'): the bytes are bounded
// by the record (MaxStructBytes), the nesting and the arrays here.
const (
	// StructDepth is how many levels of nested structs are shown, the
	// outer one included; deeper ones print as {...}.
	StructDepth = 6
	// StructArrayElems is how many elements of an array are shown; the
	// rest print as "...".
	StructArrayElems = 16
)

// structFmt formats a struct's bytes from its BTF type, little-endian
// (amd64, arm64). cut is set once a member lies beyond the bytes read.
type structFmt struct {
	data []byte
	json bool
	cut  bool
	// member is the name of the member being shown ("" in arrays and at
	// the top).
	member string
}

// AppendStruct appends the struct or union t read as data (its first
// len(data) bytes: fewer than its size when truncated) as
// {name=value, ...} or, with json, a JSON object by field name. Members
// of anonymous structs and unions are shown inline; nested structs up to
// StructDepth levels ({...} below); arrays up to StructArrayElems
// elements; char arrays as strings; enums by name; pointers in hex
// (NULL; JSON: "0x..." strings and null, as appendTyped prints them);
// bitfields by value. Where the bytes end, "..." closes every
// open struct (JSON: a "..." member set to true).
func AppendStruct(b []byte, t btf.Type, data []byte, json bool) []byte {
	f := &structFmt{data: data, json: json}
	return f.value(b, t, 0, 0)
}

// value appends the object of type t at byte offset off.
func (f *structFmt) value(b []byte, t btf.Type, off uint32, depth int) []byte {
	u := btf.UnderlyingType(t)
	size, err := btf.Sizeof(u)
	if err != nil {
		size = 0
	}
	switch v := u.(type) {
	case *btf.Struct:
		return f.object(b, v.Members, off, depth)
	case *btf.Union:
		return f.object(b, v.Members, off, depth)
	case *btf.Array:
		return f.array(b, v, off, depth)
	}
	if int(off)+size > len(f.data) {
		f.cut = true
		return f.more(b, false)
	}
	raw := f.data[off : int(off)+size]
	switch v := u.(type) {
	case *btf.Int:
		if v.Encoding&btf.Bool != 0 {
			return strconv.AppendBool(b, le(raw) != 0)
		}
		if size > 8 {
			return f.hex(b, raw)
		}
		if !f.json && v.Encoding&btf.Signed == 0 {
			switch intBase(t, f.member) {
			case 16:
				return strconv.AppendUint(append(b, "0x"...), le(raw), 16)
			case 8:
				return strconv.AppendUint(append(b, '0'), le(raw), 8)
			}
		}
		return appendInt(b, le(raw), size, v.Encoding&btf.Signed != 0)
	case *btf.Enum:
		return f.enum(b, v, le(raw), size)
	case *btf.Pointer:
		return appendTyped(b, le(raw), symbols.ArgPtr, 8, nil, f.json)
	}
	// Floats and anything else: the raw bytes.
	return f.hex(b, raw)
}

// more appends the "..." that marks where the bytes or a bound ended: as
// a member of an object (member) or as a value.
func (f *structFmt) more(b []byte, member bool) []byte {
	switch {
	case !f.json:
		return append(b, "..."...)
	case member:
		return append(b, `"...":true`...)
	}
	return append(b, `"..."`...)
}

// object appends a struct's or union's members (at byte offset off).
func (f *structFmt) object(b []byte, ms []btf.Member, off uint32, depth int) []byte {
	b = append(b, '{')
	if depth >= StructDepth {
		b = f.more(b, true)
		return append(b, '}')
	}
	first := true
	b = f.members(b, ms, off, depth, &first)
	return append(b, '}')
}

// members appends ms (those of anonymous structs and unions inline) after
// the ones already in the object (first: none yet).
func (f *structFmt) members(b []byte, ms []btf.Member, off uint32, depth int, first *bool) []byte {
	sep := func() {
		if !*first {
			if f.json {
				b = append(b, ',')
			} else {
				b = append(b, ", "...)
			}
		}
		*first = false
	}
	for _, m := range ms {
		if f.cut {
			return b
		}
		bit := off*8 + uint32(m.Offset)
		if m.Name == "" && m.BitfieldSize == 0 {
			switch a := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct:
				b = f.members(b, a.Members, bit/8, depth, first)
				continue
			case *btf.Union:
				b = f.members(b, a.Members, bit/8, depth, first)
				continue
			}
		}
		if m.Name == "" {
			continue // padding bitfield
		}
		if bit/8 >= uint32(len(f.data)) {
			f.cut = true
		} else if m.BitfieldSize > 0 {
			end := (bit + uint32(m.BitfieldSize) + 7) / 8
			if int(end) > len(f.data) {
				f.cut = true
			}
		} else if size, err := btf.Sizeof(m.Type); err == nil && bit/8+uint32(size) > uint32(len(f.data)) && !f.partial(m.Type) {
			f.cut = true
		}
		sep()
		if f.cut {
			return f.more(b, true)
		}
		if f.json {
			b = appendQuoted(b, m.Name)
			b = append(b, ':')
		} else {
			b = append(b, m.Name...)
			b = append(b, '=')
		}
		if m.BitfieldSize > 0 {
			b = f.bitfield(b, m.Type, bit, uint32(m.BitfieldSize))
			continue
		}
		f.member = m.Name
		b = f.value(b, m.Type, bit/8, depth+1)
		f.member = ""
	}
	return b
}

// flagTypes are unsigned typedefs of bit sets, shown in hex in text
// output (JSON keeps numbers).
var flagTypes = map[string]bool{"fmode_t": true, "gfp_t": true, "blk_opf_t": true, "vm_flags_t": true,
	"slab_flags_t": true, "fop_flags_t": true, "iop_flags_t": true, "netdev_features_t": true}

// intBase is how text output shows an unsigned integer of type t held in
// a member named member: 8 for a umode_t (file type and permission bits,
// as ls shows them), 16 for a flag set (a typedef of flagTypes or named
// *_flags_t, or a member named flags or *_flags), else 10.
func intBase(t btf.Type, member string) int {
	for i := 0; i < 8 && t != nil; i++ {
		switch v := t.(type) {
		case *btf.Typedef:
			switch {
			case v.Name == "umode_t":
				return 8
			case flagTypes[v.Name] || strings.HasSuffix(v.Name, "flags_t"):
				return 16
			}
			t = v.Type
		case *btf.Const:
			t = v.Type
		case *btf.Volatile:
			t = v.Type
		default:
			t = nil
		}
	}
	if member == "flags" || strings.HasSuffix(member, "_flags") {
		return 16
	}
	return 10
}

// partial reports whether a member of type t is shown in part when its
// bytes end early (a struct, union or array: up to where they end).
func (f *structFmt) partial(t btf.Type) bool {
	switch btf.UnderlyingType(t).(type) {
	case *btf.Struct, *btf.Union, *btf.Array:
		return true
	}
	return false
}

// bitfield appends the n-bit field at bit offset bit (little-endian).
func (f *structFmt) bitfield(b []byte, t btf.Type, bit, n uint32) []byte {
	var x uint64
	for i := uint32(0); i < n; i++ {
		p := bit + i
		if f.data[p/8]>>(p%8)&1 != 0 {
			x |= 1 << i
		}
	}
	signed := false
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		if u.Encoding&btf.Bool != 0 {
			return strconv.AppendBool(b, x != 0)
		}
		signed = u.Encoding&btf.Signed != 0
	case *btf.Enum:
		if s := enumName(u, x, n); s != "" {
			return f.str(b, s)
		}
		signed = u.Signed
	}
	if signed && n < 64 && x>>(n-1)&1 != 0 {
		x |= ^uint64(0) << n
		return strconv.AppendInt(b, int64(x), 10)
	}
	return strconv.AppendUint(b, x, 10)
}

func (f *structFmt) enum(b []byte, e *btf.Enum, x uint64, size int) []byte {
	if s := enumName(e, x, uint32(size*8)); s != "" {
		return f.str(b, s)
	}
	return appendInt(b, x, size, e.Signed)
}

// enumName is the name of the enum's value x of bits bits ("" if none).
func enumName(e *btf.Enum, x uint64, bits uint32) string {
	mask := ^uint64(0)
	if bits < 64 {
		mask = 1<<bits - 1
	}
	for _, v := range e.Values {
		if v.Value&mask == x&mask {
			return v.Name
		}
	}
	return ""
}

// str appends a name: bare in text, quoted in JSON.
func (f *structFmt) str(b []byte, s string) []byte {
	if f.json {
		return appendQuoted(b, s)
	}
	return append(b, s...)
}

// array appends an array at byte offset off: a char array as a string (up
// to its NUL), others as [a, b, ...].
func (f *structFmt) array(b []byte, a *btf.Array, off uint32, depth int) []byte {
	esize, err := btf.Sizeof(a.Type)
	if err != nil || esize == 0 {
		return append(b, "[]"...)
	}
	if isCharType(a.Type) {
		end := int(off) + int(a.Nelems)
		trunc := false
		if end > len(f.data) {
			end, trunc = len(f.data), true
			f.cut = true
		}
		s := f.data[min(int(off), end):end]
		for i, c := range s {
			if c == 0 {
				s, trunc = s[:i], false
				break
			}
		}
		if f.json {
			return appendJSONString(b, s)
		}
		b = strconv.AppendQuote(b, string(s))
		if trunc {
			b = append(b, "..."...)
		}
		return b
	}
	b = append(b, '[')
	for i := uint32(0); i < a.Nelems; i++ {
		if i > 0 {
			if f.json {
				b = append(b, ',')
			} else {
				b = append(b, ", "...)
			}
		}
		if i >= StructArrayElems {
			b = f.more(b, false)
			break
		}
		b = f.value(b, a.Type, off+i*uint32(esize), depth+1)
		if f.cut {
			break
		}
	}
	return append(b, ']')
}

// isCharType: char, signed char or unsigned char (qualifiers aside; a
// typedef such as u8 is a number).
func isCharType(t btf.Type) bool {
	for {
		switch v := t.(type) {
		case *btf.Const:
			t = v.Type
		case *btf.Volatile:
			t = v.Type
		case *btf.Int:
			return v.Size == 1 && (v.Name == "char" || v.Name == "signed char" || v.Name == "unsigned char")
		default:
			return false
		}
	}
}

func (f *structFmt) hex(b []byte, raw []byte) []byte {
	if f.json {
		b = append(b, '"')
	}
	b = append(b, "0x"...)
	for i := len(raw) - 1; i >= 0; i-- {
		b = append(b, "0123456789abcdef"[raw[i]>>4], "0123456789abcdef"[raw[i]&15])
	}
	if f.json {
		b = append(b, '"')
	}
	return b
}

// le reads up to 8 bytes little-endian.
func le(raw []byte) uint64 {
	var w [8]byte
	copy(w[:], raw)
	return binary.LittleEndian.Uint64(w[:])
}

func appendInt(b []byte, x uint64, size int, signed bool) []byte {
	if size < 8 {
		if signed {
			sh := 64 - 8*uint(size)
			return strconv.AppendInt(b, int64(x<<sh)>>sh, 10)
		}
		x &= 1<<(8*uint(size)) - 1
	}
	if signed {
		return strconv.AppendInt(b, int64(x), 10)
	}
	return strconv.AppendUint(b, x, 10)
}
