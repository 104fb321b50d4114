package expr

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Limits of a compiled program. MaxLoads, MaxValues and MaxArgs are the
// sizes of bpf/trace.bpf.c's struct xprog and records (FTP_X_*); MaxTerms
// and MaxOps are the predicate compiler's (codegen.go: the truth table of
// a function's comparisons fits in four 64-bit constants).
const (
	MaxLoads  = len(bpfobj.TraceXprog{}.V[0].Off) // memory reads (dereferences) per value
	MaxTerms  = 8                                 // comparisons per function
	MaxOps    = 16                                // boolean program length (entry and exit each)
	MaxValues = len(bpfobj.TraceXprog{}.V)        // --arg values per function
	MaxStr    = len(bpfobj.TraceXvals{}.S[0])     // bytes of a string value or operand, NUL included
	MaxArgs   = len(bpfobj.TraceRecX{}.Args)      // argument registers recorded
	SrcRet    = uint8(MaxArgs)                    // Fetch.Src of the return value (FTP_X_RET)
)

// MaxStructBytes is how many bytes of whole structs (--arg '*file') one
// event records, shared in order by a function's struct values.
const MaxStructBytes = len(bpfobj.TraceEvent{}.Xb)

// ErrType is wrapped by every type-check error.
var ErrType = errors.New("type error")

// errNoName is wrapped when an expression names a parameter the function
// lacks: the expression then does not apply to that function.
var errNoName = errors.New("no such parameter")

// Term operators, compiled to BPF jumps by codegen.go.
const (
	OpNZ   = uint8(1) // value != 0
	OpEQ   = uint8(2)
	OpNE   = uint8(3)
	OpLT   = uint8(4)
	OpLE   = uint8(5)
	OpGT   = uint8(6)
	OpGE   = uint8(7)
	OpSEQ  = uint8(8) // string equals S
	OpSPFX = uint8(9) // string starts with S
	// OpSigned is or'ed into OpLT..OpGE for a signed comparison.
	OpSigned = uint8(0x80)
)

// Boolean program ops, in postfix order: push a term's result, combine
// the two top results, negate the top one. codegen.go folds a program
// into the truth table of its terms.
const (
	BoolPush = byte(0x10) // | term index
	BoolAnd  = byte(0x20)
	BoolOr   = byte(0x30)
	BoolNot  = byte(0x40)
)

// Fetch reads one value at a call: Src (argument register 0-5, or SrcRet),
// then each load reads Size (last load) or 8 bytes at value+Loads[i], then
// Tail is added and Mask (when not 0) applied. Str: the result is the
// address of a NUL-terminated string, read up to MaxStr bytes. Bytes (not
// 0): the result is the address of a struct or union, of which Bytes
// bytes are read (one read of at most MaxStructBytes). Bits (not 0): a
// bitfield of Bits bits, Shift bits above the start of the Size bytes
// (1 to 8) the last load reads; it is shifted down and cut (sign-extended when Signed)
// before Tail and Mask. Bitfields are compiled in --filter only.
type Fetch struct {
	Src    uint8
	Loads  []int32
	Tail   int32
	Size   uint8
	Signed bool
	Str    bool
	Mask   uint64
	Bytes  uint16
	Shift  uint8
	Bits   uint8
}

// Term is one comparison of a fetched value with a constant, or (RHS
// set) with a second fetched value.
type Term struct {
	Fetch
	Op  uint8
	K   uint64 // integer operand
	S   string // string operand (OpSEQ, OpSPFX)
	RHS *Fetch // the right-hand value of a comparison of two values (integer operators only)
}

// fetches is the term's value and, for two values, its right-hand one.
func (t Term) fetches() []Fetch {
	if t.RHS != nil {
		return []Fetch{t.Fetch, *t.RHS}
	}
	return []Fetch{t.Fetch}
}

// Value is one --arg expression compiled for a function.
type Value struct {
	Expr string
	Fetch
	Kind symbols.ArgKind // formatting: ArgCharPtr for strings, ArgStruct for a whole struct
	Size uint32          // bytes of the value (of the whole struct for ArgStruct)
	Enum []symbols.EnumValue
	Type string // C spelling of the value's type
	// Struct is an ArgStruct value's struct or union type; Off is where
	// its bytes go in the event's struct bytes (Fetch.Bytes of them are
	// read: fewer than Size when truncated).
	Struct btf.Type
	Off    uint32
}

// Plan is what runs at each call of one function: the filter's terms and
// its boolean programs (EntryOps decided at entry, ExitOps at exit, where
// ret is known), and the values to record.
type Plan struct {
	Terms    []Term
	EntryOps []byte
	ExitOps  []byte
	// ExitArgs: ExitOps read arguments (saved at entry), so an exit
	// without a recorded entry cannot be decided.
	ExitArgs bool
	Values   []Value
	// StructBytes is how many of the event's struct bytes Values use.
	StructBytes int
	// Filter is the source of the predicate applied ("" = none).
	Filter string
}

// Empty reports whether p does nothing.
func (p *Plan) Empty() bool {
	return p == nil || len(p.EntryOps) == 0 && len(p.ExitOps) == 0 && len(p.Values) == 0
}

// Env is what a function's expressions are checked against.
type Env struct {
	Func  string
	Proto *btf.FuncProto // nil without BTF: only argN and ret
	// Spec resolves cast type names and enum constants (nil: neither).
	Spec *btf.Spec
	// enums caches Spec's enum constants.
	enums map[string]enumConst
}

type enumConst struct {
	v      uint64
	signed bool
}

// cval is a checked value: an object at an address (lv) or a value, both
// computed by the fetch in it.
type cval struct {
	lv      bool
	src     uint8
	loads   []int32
	tail    int32
	typ     btf.Type
	mask    uint64
	usesRet bool
	// A bitfield lvalue: bits bits, shift bits above the start of the
	// unit bytes at tail.
	bits, shift, unit uint8
}

type cconst struct {
	str  bool
	s    string
	v    uint64
	enum bool
}

type checker struct {
	env *Env
	src string
}

func (c *checker) errf(n *node, f string, a ...any) error {
	return fmt.Errorf("%s: %q: %w: %s", c.env.Func, strings.TrimSpace(c.src), ErrType, fmt.Sprintf(f, a...))
}

func under(t btf.Type) btf.Type { return btf.UnderlyingType(t) }

func sizeof(t btf.Type) int {
	n, err := btf.Sizeof(t)
	if err != nil {
		return 0
	}
	return n
}

func typeString(t btf.Type) string {
	switch v := t.(type) {
	case nil:
		return "void"
	case *btf.Pointer:
		return typeString(v.Target) + " *"
	case *btf.Const:
		return "const " + typeString(v.Type)
	case *btf.Volatile:
		return typeString(v.Type)
	case *btf.Restrict:
		return typeString(v.Type)
	case *btf.Struct:
		return "struct " + v.Name
	case *btf.Union:
		return "union " + v.Name
	case *btf.Enum:
		return "enum " + v.Name
	case *btf.Array:
		return typeString(v.Type) + "[" + strconv.Itoa(int(v.Nelems)) + "]"
	case *btf.Void:
		return "void"
	}
	if n := t.TypeName(); n != "" {
		return n
	}
	return fmt.Sprintf("%T", t)
}

func isChar(t btf.Type) bool {
	i, ok := under(t).(*btf.Int)
	return ok && i.Size == 1 && i.Encoding&btf.Bool == 0
}

func isCharPtr(t btf.Type) bool {
	p, ok := under(t).(*btf.Pointer)
	return ok && isChar(p.Target)
}

func isCharArray(t btf.Type) bool {
	a, ok := under(t).(*btf.Array)
	return ok && isChar(a.Type)
}

func isSigned(t btf.Type) bool {
	switch u := under(t).(type) {
	case *btf.Int:
		return u.Encoding&btf.Signed != 0
	case *btf.Enum:
		return u.Signed
	}
	return false
}

// scalar reports whether a value of t fits a register: integer, enum,
// pointer.
func scalar(t btf.Type) bool {
	switch under(t).(type) {
	case *btf.Int, *btf.Enum, *btf.Pointer:
		s := sizeof(t)
		return s == 1 || s == 2 || s == 4 || s == 8
	}
	return false
}

// ident resolves a name at the start of an expression.
func (c *checker) ident(n *node) (*cval, *cconst, error) {
	fp := c.env.Proto
	if fp != nil {
		for i, p := range fp.Params {
			if p.Name == n.name {
				return c.param(n, i)
			}
		}
	}
	if strings.HasPrefix(n.name, "arg") {
		if i, err := strconv.Atoi(n.name[3:]); err == nil && i >= 0 {
			return c.param(n, i)
		}
	}
	switch n.name {
	case "ret":
		var rt btf.Type = &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}
		if fp != nil {
			rt = fp.Return
			if _, void := under(rt).(*btf.Void); rt == nil || void {
				return nil, nil, c.errf(n, "%s returns void: there is no ret to test", c.env.Func)
			}
			if !scalar(rt) {
				return nil, nil, c.errf(n, "ret is a %s returned by value: only integer, enum and pointer returns can be tested", typeString(rt))
			}
		}
		return &cval{src: SrcRet, typ: rt, usesRet: true}, nil, nil
	case "NULL", "false":
		return nil, &cconst{}, nil
	case "true":
		return nil, &cconst{v: 1}, nil
	}
	if v, ok := errnos[n.name]; ok {
		return nil, &cconst{v: v}, nil
	}
	if e, ok := c.enumConst(n.name); ok {
		return nil, &cconst{v: e.v, enum: true}, nil
	}
	var names []string
	if fp != nil {
		for _, p := range fp.Params {
			names = append(names, p.Name)
		}
	}
	msg := fmt.Sprintf("%s has no parameter %q", c.env.Func, n.name)
	if fp == nil {
		msg = fmt.Sprintf("%s has no BTF prototype: name its arguments arg0..arg5", c.env.Func)
	} else if s := closest(n.name, names); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, ", ") + "?)"
	} else if len(names) > 0 {
		msg += " (parameters: " + strings.Join(names, ", ") + ")"
	}
	return nil, nil, fmt.Errorf("%w", &noNameError{c.errf(n, "%s", msg)})
}

type noNameError struct{ err error }

func (e *noNameError) Error() string { return e.err.Error() }
func (e *noNameError) Unwrap() []error {
	return []error{e.err, errNoName}
}

func (c *checker) param(n *node, i int) (*cval, *cconst, error) {
	if i >= MaxArgs {
		return nil, nil, c.errf(n, "%s is argument %d: only the first %d argument registers are recorded", n.name, i, MaxArgs)
	}
	fp := c.env.Proto
	if fp == nil {
		return &cval{src: uint8(i), typ: &btf.Int{Name: "unsigned long", Size: 8}}, nil, nil
	}
	if i >= len(fp.Params) {
		return nil, nil, fmt.Errorf("%w", &noNameError{c.errf(n, "%s has %d parameters, no %s", c.env.Func, len(fp.Params), n.name)})
	}
	for j := 0; j <= i; j++ {
		switch under(fp.Params[j].Type).(type) {
		case *btf.Struct, *btf.Union:
			return nil, nil, c.errf(n, "parameter %s of %s is a struct passed by value: registers from it on cannot be named", fp.Params[j].Name, c.env.Func)
		}
	}
	return &cval{src: uint8(i), typ: fp.Params[i].Type}, nil, nil
}

func (c *checker) enumConst(name string) (enumConst, bool) {
	if c.env.Spec == nil {
		return enumConst{}, false
	}
	if c.env.enums == nil {
		c.env.enums = map[string]enumConst{}
		for t := range c.env.Spec.All() {
			if e, ok := t.(*btf.Enum); ok {
				for _, v := range e.Values {
					c.env.enums[v.Name] = enumConst{v.Value, e.Signed}
				}
			}
		}
	}
	e, ok := c.env.enums[name]
	return e, ok
}

// value checks n as a value or a constant.
func (c *checker) value(n *node) (*cval, *cconst, error) {
	switch n.kind {
	case nIdent:
		return c.ident(n)
	case nInt:
		return nil, &cconst{v: n.ival}, nil
	case nStr:
		return nil, &cconst{str: true, s: n.sval}, nil
	case nUnary:
		return c.unaryValue(n)
	case nMember:
		v, k, err := c.value(n.x)
		if err != nil {
			return nil, nil, err
		}
		if v == nil {
			return nil, nil, c.errf(n, "%s%s of a constant", n.op, n.name)
		}
		return c.member(n, v, k)
	case nIndex:
		return c.indexValue(n)
	case nCast:
		return c.cast(n)
	case nBinary:
		if n.op == "&" {
			return c.maskValue(n)
		}
		return nil, nil, c.errf(n, "%q gives a condition, not a value", n.op)
	}
	return nil, nil, c.errf(n, "not a value")
}

// unaryValue checks a unary '-' of a constant or '*' of a pointer value.
func (c *checker) unaryValue(n *node) (*cval, *cconst, error) {
	v, k, err := c.value(n.x)
	if err != nil {
		return nil, nil, err
	}
	switch n.op {
	case "-":
		if k == nil || k.str {
			return nil, nil, c.errf(n, "'-' applies to a constant only")
		}
		return nil, &cconst{v: -k.v}, nil
	case "*":
		if v == nil {
			return nil, nil, c.errf(n, "'*' of a constant")
		}
		return c.deref(n, v, 0)
	}
	return nil, nil, c.errf(n, "%q gives a condition, not a value", n.op)
}

// indexValue checks an index by an integer constant into a value.
func (c *checker) indexValue(n *node) (*cval, *cconst, error) {
	v, _, err := c.value(n.x)
	if err != nil {
		return nil, nil, err
	}
	_, k, err := c.value(n.y)
	if err != nil {
		return nil, nil, err
	}
	if v == nil {
		return nil, nil, c.errf(n, "index of a constant")
	}
	if k == nil || k.str {
		return nil, nil, c.errf(n.y, "an index must be an integer constant")
	}
	return c.index(n, v, int64(k.v))
}

// maskValue checks a binary '&': of two constants, or of a scalar value
// and a constant mask.
func (c *checker) maskValue(n *node) (*cval, *cconst, error) {
	v, k, err := c.value(n.x)
	if err != nil {
		return nil, nil, err
	}
	w, l, err := c.value(n.y)
	if err != nil {
		return nil, nil, err
	}
	if v == nil && w == nil {
		if k.str || l.str {
			return nil, nil, c.errf(n, "'&' of a string")
		}
		return nil, &cconst{v: k.v & l.v}, nil
	}
	if v != nil && w != nil {
		return nil, nil, c.errf(n, "'&' of two values: one side must be a constant mask")
	}
	if v == nil {
		v = w
	} else {
		k = l
	}
	if k.str {
		return nil, nil, c.errf(n, "'&' with a string")
	}
	v, err = c.rvalue(n, v)
	if err != nil {
		return nil, nil, err
	}
	if !scalar(v.typ) {
		return nil, nil, c.errf(n, "'&' of a %s", typeString(v.typ))
	}
	nv := *v
	if nv.mask != 0 {
		nv.mask &= k.v
	} else {
		nv.mask = k.v
	}
	if nv.mask == 0 {
		return nil, nil, c.errf(n, "mask %#x is always 0", k.v)
	}
	return &nv, nil, nil
}

// rvalue turns an object into its value: a load (arrays decay to their
// address).
func (c *checker) rvalue(n *node, v *cval) (*cval, error) {
	if !v.lv {
		return v, nil
	}
	switch u := under(v.typ).(type) {
	case *btf.Array:
		nv := *v
		nv.lv = false
		nv.typ = &btf.Pointer{Target: u.Type}
		return &nv, nil
	case *btf.Struct, *btf.Union:
		return nil, c.errf(n, "%s is a %s: name one of its fields (%s)", n, typeString(v.typ), strings.Join(fieldNames(u), ", "))
	}
	if !scalar(v.typ) {
		return nil, c.errf(n, "%s has type %s, which cannot be read as a value", n, typeString(v.typ))
	}
	if len(v.loads) >= MaxLoads {
		return nil, c.errf(n, "too deep for the verifier: at most %d memory reads in one expression", MaxLoads)
	}
	nv := *v
	nv.lv = false
	nv.loads = append(append([]int32{}, v.loads...), v.tail)
	nv.tail = 0
	return &nv, nil
}

// deref: *v, or the object v points at plus off bytes.
func (c *checker) deref(n *node, v *cval, off int64) (*cval, *cconst, error) {
	v, err := c.rvalue(n, v)
	if err != nil {
		return nil, nil, err
	}
	p, ok := under(v.typ).(*btf.Pointer)
	if !ok {
		return nil, nil, c.errf(n, "dereference of %s, a %s, not a pointer", c.srcBefore(n), typeString(v.typ))
	}
	if _, void := under(p.Target).(*btf.Void); void || p.Target == nil {
		return nil, nil, c.errf(n, "dereference of a void pointer: cast it first, e.g. (struct foo *)")
	}
	nv := *v
	nv.lv = true
	nv.tail += int32(off)
	nv.typ = p.Target
	return &nv, nil, nil
}

// srcBefore is the text of the operand node n applies to.
func (c *checker) srcBefore(n *node) string {
	if n.x != nil {
		return n.x.String()
	}
	return n.String()
}

func (c *checker) member(n *node, v *cval, _ *cconst) (*cval, *cconst, error) {
	if n.op == "->" {
		if _, ok := under(v.typ).(*btf.Pointer); !ok || v.lv && !scalar(v.typ) {
			if _, ok := under(v.typ).(*btf.Pointer); !ok {
				return nil, nil, c.errf(n, "%s->%s: %s is a %s, not a pointer (use '.' for a member of a struct)", c.srcBefore(n), n.name, c.srcBefore(n), typeString(v.typ))
			}
		}
		d, _, err := c.deref(n, v, 0)
		if err != nil {
			return nil, nil, err
		}
		v = d
	} else if !v.lv {
		if _, ok := under(v.typ).(*btf.Pointer); ok {
			return nil, nil, c.errf(n, "%s.%s: %s is a pointer (use '->')", c.srcBefore(n), n.name, c.srcBefore(n))
		}
		switch under(v.typ).(type) {
		case *btf.Struct, *btf.Union:
			return nil, nil, c.errf(n, "%s.%s: a struct passed by value cannot be read", c.srcBefore(n), n.name)
		}
		return nil, nil, c.errf(n, "%s.%s: %s is a %s, not a struct", c.srcBefore(n), n.name, c.srcBefore(n), typeString(v.typ))
	}
	var members []btf.Member
	switch u := under(v.typ).(type) {
	case *btf.Struct:
		members = u.Members
	case *btf.Union:
		members = u.Members
	default:
		return nil, nil, c.errf(n, "%s%s%s: %s is a %s, not a struct or union", c.srcBefore(n), n.op, n.name, c.srcBefore(n), typeString(v.typ))
	}
	m, off, ok := findMember(members, n.name)
	if !ok {
		msg := fmt.Sprintf("%s has no field %q", typeString(v.typ), n.name)
		if len(members) == 0 {
			msg += " (its BTF lists no fields)"
		} else if s := closest(n.name, fieldNames(under(v.typ))); len(s) > 0 {
			msg += " (did you mean " + strings.Join(s, ", ") + "?)"
		}
		return nil, nil, c.errf(n, "%s", msg)
	}
	nv := *v
	nv.typ = m.Type
	if m.BitfieldSize > 0 {
		// One read from the byte holding its first bit to the one
		// holding its last (1 to 8 bytes).
		bitpos := (off-int64(m.Offset.Bytes()))*8 + int64(m.Offset)
		shift, bits := uint8(bitpos%8), uint8(m.BitfieldSize)
		unit := uint8((int(shift) + int(bits) + 7) / 8) // no byte past the field
		if unit > 8 {
			return nil, nil, c.errf(n, "%s: a bitfield of %d bits at bit %d spans more than 8 bytes", n.name, bits, shift)
		}
		nv.tail += int32(bitpos / 8)
		nv.bits, nv.shift, nv.unit = bits, shift, unit
		return &nv, nil, nil
	}
	nv.tail += int32(off)
	return &nv, nil, nil
}

// findMember finds name among members, looking into anonymous structs and
// unions; off is its byte offset.
func findMember(ms []btf.Member, name string) (btf.Member, int64, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, int64(m.Offset.Bytes()), true
		}
		if m.Name == "" {
			var inner []btf.Member
			switch u := under(m.Type).(type) {
			case *btf.Struct:
				inner = u.Members
			case *btf.Union:
				inner = u.Members
			}
			if f, off, ok := findMember(inner, name); ok {
				return f, int64(m.Offset.Bytes()) + off, true
			}
		}
	}
	return btf.Member{}, 0, false
}

func fieldNames(t btf.Type) []string {
	var ms []btf.Member
	switch u := t.(type) {
	case *btf.Struct:
		ms = u.Members
	case *btf.Union:
		ms = u.Members
	}
	var out []string
	for _, m := range ms {
		if m.Name == "" {
			out = append(out, fieldNames(under(m.Type))...)
			continue
		}
		out = append(out, m.Name)
	}
	return out
}

func (c *checker) index(n *node, v *cval, i int64) (*cval, *cconst, error) {
	if a, ok := under(v.typ).(*btf.Array); ok && v.lv {
		if i < 0 || (a.Nelems > 0 && i >= int64(a.Nelems)) {
			return nil, nil, c.errf(n, "index %d out of range of %s", i, typeString(v.typ))
		}
		nv := *v
		nv.tail += int32(i * int64(sizeof(a.Type)))
		nv.typ = a.Type
		return &nv, nil, nil
	}
	v, err := c.rvalue(n, v)
	if err != nil {
		return nil, nil, err
	}
	p, ok := under(v.typ).(*btf.Pointer)
	if !ok {
		return nil, nil, c.errf(n, "index of %s, a %s, not a pointer or array", c.srcBefore(n), typeString(v.typ))
	}
	es := sizeof(p.Target)
	if es == 0 {
		return nil, nil, c.errf(n, "index of a pointer to %s, which has no size", typeString(p.Target))
	}
	return c.deref(n, v, i*int64(es))
}

func (c *checker) cast(n *node) (*cval, *cconst, error) {
	v, k, err := c.value(n.x)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.lookupType(n, n.typ)
	if err != nil {
		return nil, nil, err
	}
	if k != nil {
		if k.str {
			return nil, nil, c.errf(n, "cast of a string")
		}
		return nil, k, nil
	}
	v, err = c.rvalue(n, v)
	if err != nil {
		return nil, nil, err
	}
	if !scalar(t) {
		return nil, nil, c.errf(n, "cast to %s: only integer, enum and pointer types", n.typ)
	}
	if v.bits > 0 {
		return nil, nil, c.errf(n, "cast of a bitfield: compare it as it is")
	}
	nv := *v
	nv.typ = t
	return &nv, nil, nil
}

var builtinInts = map[string]*btf.Int{
	"char": {Name: "char", Size: 1, Encoding: btf.Signed}, "unsigned char": {Name: "unsigned char", Size: 1},
	"short": {Name: "short", Size: 2, Encoding: btf.Signed}, "unsigned short": {Name: "unsigned short", Size: 2},
	"int": {Name: "int", Size: 4, Encoding: btf.Signed}, "unsigned int": {Name: "unsigned int", Size: 4}, "unsigned": {Name: "unsigned int", Size: 4},
	"long": {Name: "long", Size: 8, Encoding: btf.Signed}, "unsigned long": {Name: "unsigned long", Size: 8},
	"long long": {Name: "long long", Size: 8, Encoding: btf.Signed}, "unsigned long long": {Name: "unsigned long long", Size: 8},
	"u8": {Name: "u8", Size: 1}, "u16": {Name: "u16", Size: 2}, "u32": {Name: "u32", Size: 4}, "u64": {Name: "u64", Size: 8},
	"s8": {Name: "s8", Size: 1, Encoding: btf.Signed}, "s16": {Name: "s16", Size: 2, Encoding: btf.Signed},
	"s32": {Name: "s32", Size: 4, Encoding: btf.Signed}, "s64": {Name: "s64", Size: 8, Encoding: btf.Signed},
}

func (c *checker) lookupType(n *node, tn *typeName) (btf.Type, error) {
	var base btf.Type
	name := strings.TrimPrefix(tn.name, "__")
	if b, ok := builtinInts[name]; ok && tn.kw == "" {
		base = b
	} else if tn.kw == "" && tn.name == "void" {
		base = &btf.Void{}
	} else {
		if c.env.Spec == nil {
			return nil, c.errf(n, "cast to %s: no BTF to resolve it", tn)
		}
		ts, err := c.env.Spec.AnyTypesByName(tn.name)
		if err != nil && !errors.Is(err, btf.ErrNotFound) {
			return nil, c.errf(n, "cast to %s: %v", tn, err)
		}
		for _, t := range ts {
			ok := false
			switch t.(type) {
			case *btf.Struct:
				ok = tn.kw == "struct"
			case *btf.Union:
				ok = tn.kw == "union"
			case *btf.Enum:
				ok = tn.kw == "enum"
			case *btf.Typedef, *btf.Int:
				ok = tn.kw == ""
			}
			if ok && (base == nil || sizeof(t) > 0) {
				base = t
			}
		}
		if base == nil {
			return nil, c.errf(n, "cast to %s: no such type in the kernel's BTF", tn)
		}
	}
	for i := 0; i < tn.ptrs; i++ {
		base = &btf.Pointer{Target: base}
	}
	return base, nil
}

// bnode is a checked condition.
type bnode struct {
	op      byte // 'T' term, '&', '|', '!'
	term    Term
	x, y    *bnode
	usesRet bool
}

func (c *checker) cond(n *node) (*bnode, error) {
	switch {
	case n.kind == nBinary && (n.op == "&&" || n.op == "||"):
		x, err := c.cond(n.x)
		if err != nil {
			return nil, err
		}
		y, err := c.cond(n.y)
		if err != nil {
			return nil, err
		}
		op := byte('&')
		if n.op == "||" {
			op = '|'
		}
		return &bnode{op: op, x: x, y: y, usesRet: x.usesRet || y.usesRet}, nil
	case n.kind == nUnary && n.op == "!":
		x, err := c.cond(n.x)
		if err != nil {
			return nil, err
		}
		return &bnode{op: '!', x: x, usesRet: x.usesRet}, nil
	case n.kind == nBinary && n.op != "&":
		return c.compare(n)
	}
	v, k, err := c.value(n)
	if err != nil {
		return nil, err
	}
	if k != nil {
		return nil, c.errf(n, "a constant is not a condition")
	}
	v, err = c.rvalue(n, v)
	if err != nil {
		return nil, err
	}
	f, err := c.fetch(n, v, false)
	if err != nil {
		return nil, err
	}
	return &bnode{op: 'T', term: Term{Fetch: f, Op: OpNZ}, usesRet: v.usesRet}, nil
}

// fetch turns a checked value into the Fetch that reads it.
func (c *checker) fetch(n *node, v *cval, str bool) (Fetch, error) {
	f := Fetch{Src: v.src, Loads: v.loads, Tail: v.tail, Mask: v.mask}
	if str {
		f.Str = true
		f.Size = 8
		return f, nil
	}
	if !scalar(v.typ) {
		return f, c.errf(n, "%s is a %s, not an integer or pointer", strings.TrimSpace(c.src), typeString(v.typ))
	}
	f.Size = uint8(sizeof(v.typ))
	f.Signed = isSigned(v.typ)
	if v.bits > 0 {
		f.Size, f.Shift, f.Bits = v.unit, v.shift, v.bits
	}
	return f, nil
}

// strValue checks v as a string: a char array, or a char pointer.
func (c *checker) strValue(n *node, v *cval) (*cval, bool, error) {
	if v.lv && isCharArray(v.typ) {
		return v, true, nil
	}
	if isCharPtr(v.typ) {
		r, err := c.rvalue(n, v)
		return r, true, err
	}
	return v, false, nil
}

var cmpOps = map[string]uint8{"==": OpEQ, "!=": OpNE, "<": OpLT, "<=": OpLE, ">": OpGT, ">=": OpGE}
var flipped = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "~": "~"}

func (c *checker) compare(n *node) (*bnode, error) {
	v, k, err := c.value(n.x)
	if err != nil {
		return nil, err
	}
	w, l, err := c.value(n.y)
	if err != nil {
		return nil, err
	}
	op := n.op
	switch {
	case v == nil && w == nil:
		return nil, c.errf(n, "%q compares two constants", n.op)
	case v != nil && w != nil:
		return c.compareValues(n, v, w)
	case v == nil:
		v, op = w, flipped[op]
	default:
		k = l
	}
	if k.str {
		sv, ok, err := c.strValue(n, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, c.errf(n, "string comparison on %s, a %s, not a char array or char pointer", c.operandText(n), typeString(v.typ))
		}
		f, err := c.fetch(n, sv, true)
		if err != nil {
			return nil, err
		}
		t := Term{Fetch: f, Op: OpSEQ, S: k.s}
		neg := false
		switch op {
		case "==":
		case "!=":
			neg = true
		case "~":
			s := k.s
			if strings.HasSuffix(s, "*") && !strings.HasSuffix(s, "\\*") {
				t.Op, s = OpSPFX, strings.TrimSuffix(s, "*")
			}
			if strings.Contains(strings.ReplaceAll(s, "\\*", ""), "*") {
				return nil, c.errf(n, "pattern %q: only a trailing '*' (prefix match) is supported", k.s)
			}
			t.S = strings.ReplaceAll(s, "\\*", "*")
		default:
			return nil, c.errf(n, "%q on strings: use ==, != or ~ \"prefix*\"", op)
		}
		if op != "~" {
			t.S = strings.ReplaceAll(t.S, "\\*", "*")
		}
		if len(t.S) > MaxStr-2 {
			return nil, c.errf(n, "string %q is %d bytes: at most %d can be compared", t.S, len(t.S), MaxStr-2)
		}
		if strings.IndexByte(t.S, 0) >= 0 {
			return nil, c.errf(n, "string %q holds a NUL byte", t.S)
		}
		b := &bnode{op: 'T', term: t, usesRet: v.usesRet}
		if neg {
			b = &bnode{op: '!', x: b, usesRet: b.usesRet}
		}
		return b, nil
	}
	if op == "~" {
		return nil, c.errf(n, "'~' matches a string pattern: want a string on its right")
	}
	v, err = c.rvalue(n, v)
	if err != nil {
		return nil, err
	}
	f, err := c.fetch(n, v, false)
	if err != nil {
		return nil, err
	}
	o := cmpOps[op]
	if f.Signed && o >= OpLT {
		o |= OpSigned
	}
	if _, ptr := under(v.typ).(*btf.Pointer); ptr && k.v != 0 && o != OpEQ && o != OpNE {
		// ordering a pointer against an address is allowed but rare
		_ = ptr
	}
	return &bnode{op: 'T', term: Term{Fetch: f, Op: o, K: k.v}, usesRet: v.usesRet}, nil
}

// compareValues checks a comparison of two values (count > file->f_pos):
// integers, enums or pointers on both sides, compared as C compares them
// after the usual arithmetic conversions in 64 bits: signed when both are
// signed, or when the unsigned one is narrower than int or than the
// signed one (it converts to the signed type); else unsigned.
func (c *checker) compareValues(n *node, v, w *cval) (*bnode, error) {
	if n.op == "~" {
		return nil, c.errf(n, "'~' matches a string pattern: want a string on its right")
	}
	for _, x := range []*cval{v, w} {
		if x.lv && isCharArray(x.typ) {
			return nil, c.errf(n, "%q compares two values, one a char array: a string compares with a string constant", n.op)
		}
	}
	var fs [2]Fetch
	var ptr [2]bool
	var types [2]string
	for i, x := range []*cval{v, w} {
		r, err := c.rvalue(n, x)
		if err != nil {
			return nil, err
		}
		if fs[i], err = c.fetch(n, r, false); err != nil {
			return nil, err
		}
		_, ptr[i] = under(r.typ).(*btf.Pointer)
		types[i] = typeString(r.typ)
	}
	if ptr[0] != ptr[1] {
		return nil, c.errf(n, "%q compares a %s with a %s: a pointer compares with a pointer, an integer with an integer", n.op, types[0], types[1])
	}
	o := cmpOps[n.op]
	if o >= OpLT && signedCompare(fs[0], fs[1]) {
		o |= OpSigned
	}
	rhs := fs[1]
	return &bnode{op: 'T', term: Term{Fetch: fs[0], Op: o, RHS: &rhs}, usesRet: v.usesRet || w.usesRet}, nil
}

// signedCompare: C's usual arithmetic conversions for two integers of at
// most 8 bytes, both widened to 64 bits by their fetch. A bitfield
// narrower than int promotes to int; one of 32 bits compares as its
// type's 4-byte integer, a wider one as its 8-byte type.
func signedCompare(a, b Fetch) bool {
	type cint struct {
		signed bool
		size   uint8
	}
	conv := func(f Fetch) cint {
		switch {
		case f.Bits == 0:
			return cint{f.Signed, f.Size}
		case f.Bits < 32:
			return cint{true, 4}
		case f.Bits == 32:
			return cint{f.Signed, 4}
		}
		return cint{f.Signed, 8}
	}
	x, y := conv(a), conv(b)
	if x.signed == y.signed {
		return x.signed
	}
	s, u := x, y
	if y.signed {
		s, u = y, x
	}
	return u.size < 4 || u.size < max(s.size, 4)
}

// operandText is the text of the value side of a comparison.
func (c *checker) operandText(n *node) string {
	if n.x.kind == nStr || n.x.kind == nInt {
		return n.y.String()
	}
	return n.x.String()
}

// closest returns up to 3 names nearest to name (edit distance), nearest
// first.
func closest(name string, names []string) []string {
	type cand struct {
		s string
		d int
	}
	var cs []cand
	seen := map[string]bool{}
	for _, s := range names {
		if seen[s] {
			continue
		}
		seen[s] = true
		d := symbols.EditDistance(strings.ToLower(name), strings.ToLower(s))
		if d <= max(2, len(name)/3) || strings.Contains(s, name) || strings.Contains(name, s) && len(s) > 2 {
			cs = append(cs, cand{s, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].s)
	}
	return out
}

// errnos maps errno names (ENOENT) to their positive values; -ENOENT is
// written with the unary minus.
var errnos = func() map[string]uint64 {
	m := map[string]uint64{}
	for e := 1; e < 4096; e++ {
		if n := unix.ErrnoName(unix.Errno(e)); n != "" {
			if _, ok := m[n]; !ok {
				m[n] = uint64(e)
			}
		}
	}
	// Kernel-internal errnos (include/linux/errno.h) that user space lacks.
	for n, v := range map[string]uint64{"ERESTARTSYS": 512, "ERESTARTNOINTR": 513, "ERESTARTNOHAND": 514, "ENOIOCTLCMD": 515,
		"ERESTART_RESTARTBLOCK": 516, "EPROBE_DEFER": 517, "EOPENSTALE": 518, "ENOPARAM": 519, "EBADHANDLE": 521,
		"ENOTSYNC": 522, "EBADCOOKIE": 523, "ENOTSUPP": 524, "ETOOSMALL": 525, "ESERVERFAULT": 526, "EBADTYPE": 527,
		"EJUKEBOX": 528, "EIOCBQUEUED": 529, "ERECALLCONFLICT": 530} {
		m[n] = v
	}
	return m
}()
