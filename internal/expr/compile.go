package expr

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Expr is one parsed --arg or --filter expression.
type Expr struct {
	Src   string // as given, scope included
	Scope string // function glob ("" = every function)
	body  string // the expression without its scope
	root  *node
}

// Set is the parsed --arg and --filter expressions of one trace.
type Set struct {
	Args []*Expr
	// Filters are the --filter expressions: a call passes when every one
	// that applies to its function holds.
	Filters []*Expr
}

// Parse parses one expression, with an optional "glob:" scope. Errors
// wrap ErrSyntax and give the column.
func Parse(src string) (*Expr, error) {
	g, rest, off := splitScope(src)
	padded := strings.Repeat(" ", off) + rest
	root, err := parse(padded)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			se.Src = src
		}
		return nil, err
	}
	return &Expr{Src: src, Scope: g, body: strings.TrimSpace(rest), root: root}, nil
}

// ParseSet parses the --arg and --filter expressions. Errors name the
// flag and wrap ErrSyntax.
func ParseSet(args []string, filters []string) (*Set, error) {
	s := &Set{}
	for _, a := range args {
		e, err := Parse(a)
		if err != nil {
			return nil, fmt.Errorf("--arg %w", err)
		}
		s.Args = append(s.Args, e)
	}
	for _, f := range filters {
		e, err := Parse(f)
		if err != nil {
			return nil, fmt.Errorf("--filter %w", err)
		}
		s.Filters = append(s.Filters, e)
	}
	if len(s.Args) > MaxValues {
		return nil, fmt.Errorf("--arg: %d expressions, at most %d per trace: %w", len(s.Args), MaxValues, ErrType)
	}
	return s, nil
}

// Empty reports whether s has no expression.
func (s *Set) Empty() bool { return s == nil || len(s.Args) == 0 && len(s.Filters) == 0 }

func (s *Set) all() []*Expr { return append(append([]*Expr{}, s.Args...), s.Filters...) }

func (s *Set) flag(e *Expr) string {
	for _, a := range s.Args {
		if a == e {
			return "--arg"
		}
	}
	return "--filter"
}

func (e *Expr) applies(fn string) bool {
	if e.Scope == "" {
		return true
	}
	ok, _ := path.Match(e.Scope, symbols.BaseName(fn))
	if !ok {
		ok, _ = path.Match(e.Scope, fn)
	}
	return ok
}

// CompileFunc checks every expression of s that applies to one function
// and compiles them into its Plan (nil when none applies). An expression
// naming a parameter the function lacks does not apply (skip says why);
// any other error is returned.
func (s *Set) CompileFunc(env *Env) (p *Plan, skip map[*Expr]error, err error) {
	p = &Plan{}
	skip = map[*Expr]error{}
	for _, e := range s.Args {
		if !e.applies(env.Func) {
			continue
		}
		c := &checker{env: env, src: e.Src}
		v, k, err := c.value(e.root)
		if err != nil {
			if errors.Is(err, errNoName) {
				skip[e] = fmt.Errorf("--arg %w", err)
				continue
			}
			return nil, nil, fmt.Errorf("--arg %w", err)
		}
		if k != nil {
			return nil, nil, fmt.Errorf("--arg %w", c.errf(e.root, "a constant is not a value to record"))
		}
		if v.usesRet {
			return nil, nil, fmt.Errorf("--arg %w", c.errf(e.root, "ret is shown on every exit already; --arg values are read at entry"))
		}
		val, err := c.argValue(e, v)
		if err != nil {
			return nil, nil, fmt.Errorf("--arg %w", err)
		}
		if val.Kind == symbols.ArgStruct {
			// The event's struct bytes go to the struct values in order.
			left := MaxStructBytes - p.StructBytes
			if left <= 0 {
				return nil, nil, fmt.Errorf("--arg %w", c.errf(e.root, "no room for another struct: the struct values of one function take at most %d bytes per event, used by the ones before", MaxStructBytes))
			}
			val.Off = uint32(p.StructBytes)
			val.Bytes = uint16(min(int(val.Size), left))
			p.StructBytes += int(val.Bytes)
		}
		p.Values = append(p.Values, val)
	}
	var cond *bnode
	var srcs []string
	var last *checker
	for _, f := range s.Filters {
		if !f.applies(env.Func) {
			continue
		}
		c := &checker{env: env, src: f.Src}
		b, err := c.cond(f.root)
		switch {
		case errors.Is(err, errNoName):
			skip[f] = fmt.Errorf("--filter %w", err)
		case err != nil:
			return nil, nil, fmt.Errorf("--filter %w", err)
		default:
			if cond == nil {
				cond = b
			} else {
				cond = &bnode{op: '&', x: cond, y: b, usesRet: cond.usesRet || b.usesRet}
			}
			srcs = append(srcs, f.Src)
			last = c
		}
	}
	if cond != nil {
		last.src = strings.Join(srcs, " && ")
		if err := p.setFilter(last, cond); err != nil {
			return nil, nil, fmt.Errorf("--filter %w", err)
		}
		p.Filter = last.src
	}
	if p.Empty() {
		return nil, skip, nil
	}
	return p, skip, nil
}

func (c *checker) argValue(e *Expr, v *cval) (Value, error) {
	val := Value{Expr: e.body}
	if v.lv {
		switch u := under(v.typ).(type) {
		case *btf.Struct, *btf.Union:
			// A whole struct: its address, then its bytes.
			size := sizeof(u)
			if size <= 0 {
				return val, c.errf(e.root, "%s is a %s of no bytes (its BTF lists no fields)", e.body, typeString(v.typ))
			}
			val.Fetch = Fetch{Src: v.src, Loads: v.loads, Tail: v.tail, Size: 8}
			val.Kind, val.Size, val.Type, val.Struct = symbols.ArgStruct, uint32(size), typeString(v.typ), v.typ
			return val, nil
		}
	}
	if sv, ok, err := c.strValue(e.root, v); err != nil {
		return val, err
	} else if ok {
		f, err := c.fetch(e.root, sv, true)
		if err != nil {
			return val, err
		}
		val.Fetch, val.Kind, val.Size, val.Type = f, symbols.ArgCharPtr, 8, typeString(v.typ)
		return val, nil
	}
	r, err := c.rvalue(e.root, v)
	if err != nil {
		return val, err
	}
	f, err := c.fetch(e.root, r, false)
	if err != nil {
		return val, err
	}
	val.Fetch, val.Type = f, typeString(r.typ)
	val.Size = uint32(f.Size)
	if f.Bits > 0 {
		// Read as the bytes holding it, printed as its declared type.
		if f.Tail != 0 || f.Bits >= 64 {
			return val, c.errf(e.root, "a bitfield of %d bits with an offset of %d: not a value", f.Bits, f.Tail)
		}
		if n := sizeof(r.typ); n > 0 && n <= 8 {
			val.Size = uint32(n)
		}
	}
	switch u := under(r.typ).(type) {
	case *btf.Int:
		switch {
		case u.Encoding&btf.Bool != 0:
			val.Kind = symbols.ArgBool
		case u.Encoding&btf.Signed != 0:
			val.Kind = symbols.ArgInt
		default:
			val.Kind = symbols.ArgUint
		}
	case *btf.Enum:
		val.Kind = symbols.ArgEnum
		for _, ev := range u.Values {
			val.Enum = append(val.Enum, symbols.EnumValue{Name: ev.Name, Value: ev.Value})
		}
	default:
		val.Kind = symbols.ArgPtr
	}
	if f.Mask != 0 && val.Kind == symbols.ArgPtr {
		val.Kind = symbols.ArgUint
	}
	return val, nil
}

// setFilter splits the condition's top-level && into the parts decided at
// entry (no ret) and at exit, and writes their terms and programs.
func (p *Plan) setFilter(c *checker, b *bnode) error {
	var conj []*bnode
	var split func(b *bnode)
	split = func(b *bnode) {
		if b.op == '&' {
			split(b.x)
			split(b.y)
			return
		}
		conj = append(conj, b)
	}
	split(b)
	var entry, exit []*bnode
	for _, x := range conj {
		if x.usesRet {
			exit = append(exit, x)
		} else {
			entry = append(entry, x)
		}
	}
	emit := func(parts []*bnode, exitSide bool) ([]byte, error) {
		var ops []byte
		var walk func(b *bnode) error
		walk = func(b *bnode) error {
			switch b.op {
			case 'T':
				if len(p.Terms) >= MaxTerms {
					return c.errf(nil, "too many comparisons for the verifier: at most %d per function", MaxTerms)
				}
				for _, f := range b.term.fetches() {
					if exitSide && f.Src != SrcRet {
						p.ExitArgs = true
					}
				}
				ops = append(ops, BoolPush|byte(len(p.Terms)))
				p.Terms = append(p.Terms, b.term)
			case '!':
				if err := walk(b.x); err != nil {
					return err
				}
				ops = append(ops, BoolNot)
			default:
				if err := walk(b.x); err != nil {
					return err
				}
				if err := walk(b.y); err != nil {
					return err
				}
				if b.op == '&' {
					ops = append(ops, BoolAnd)
				} else {
					ops = append(ops, BoolOr)
				}
			}
			return nil
		}
		for i, x := range parts {
			if err := walk(x); err != nil {
				return nil, err
			}
			if i > 0 {
				ops = append(ops, BoolAnd)
			}
		}
		if len(ops) > MaxOps {
			return nil, c.errf(nil, "condition too long for the verifier: %d operations, at most %d", len(ops), MaxOps)
		}
		return ops, nil
	}
	var err error
	if p.EntryOps, err = emit(entry, false); err != nil {
		return err
	}
	p.ExitOps, err = emit(exit, true)
	return err
}

// Describe is one line per compiled expression for a plan (--dry-run,
// -v): values with type and fetch, and the filter's split.
func (p *Plan) Describe() []string {
	var out []string
	for _, v := range p.Values {
		l := fmt.Sprintf("--arg %s: %s, %s", v.Expr, v.Type, v.Fetch)
		if v.Kind == symbols.ArgStruct && uint32(v.Bytes) < v.Size {
			l += fmt.Sprintf(" (truncated: %d of its %d bytes, at most %d per event)", v.Bytes, v.Size, MaxStructBytes)
		}
		out = append(out, l)
	}
	if p.Filter != "" {
		out = append(out, fmt.Sprintf("--filter %s: %s, %s at entry, %d at exit", p.Filter, plural.Count(len(p.Terms), "comparison"), plural.Count(len(p.EntryOps), "op"), len(p.ExitOps)))
		for i, t := range p.Terms {
			out = append(out, fmt.Sprintf("  term %d: %s %s", i, t.Fetch, t.opString()))
		}
	}
	return out
}

func (f Fetch) String() string {
	var b strings.Builder
	if f.Src == SrcRet {
		b.WriteString("ret")
	} else {
		fmt.Fprintf(&b, "arg%d", f.Src)
	}
	if f.Bytes > 0 {
		for _, o := range f.Loads {
			fmt.Fprintf(&b, " → read 8 bytes at +%d", o)
		}
		fmt.Fprintf(&b, " → read %d bytes at +%d → struct", f.Bytes, f.Tail)
		return b.String()
	}
	for i, o := range f.Loads {
		sz := 8
		if i == len(f.Loads)-1 {
			sz = int(f.Size)
		}
		fmt.Fprintf(&b, " → read %d bytes at +%d", sz, o)
	}
	if f.Bits > 0 {
		fmt.Fprintf(&b, " → bits %d..%d", f.Shift, int(f.Shift)+int(f.Bits)-1)
	}
	if f.Tail != 0 {
		fmt.Fprintf(&b, " → +%d", f.Tail)
	}
	if f.Mask != 0 {
		fmt.Fprintf(&b, " & %#x", f.Mask)
	}
	if f.Str {
		b.WriteString(" → string")
	}
	return b.String()
}

func (t Term) opString() string {
	names := map[uint8]string{OpNZ: "!= 0", OpEQ: "==", OpNE: "!=", OpLT: "<", OpLE: "<=", OpGT: ">", OpGE: ">=", OpSEQ: "== string", OpSPFX: "starts with"}
	s := names[t.Op&^OpSigned]
	if t.Op&OpSigned != 0 {
		s += " (signed)"
	}
	switch t.Op &^ OpSigned {
	case OpNZ:
		return s
	case OpSEQ, OpSPFX:
		return fmt.Sprintf("%s %q", s, t.S)
	}
	if t.RHS != nil {
		return fmt.Sprintf("%s (%s)", s, t.RHS)
	}
	if t.Op&OpSigned != 0 || t.Signed {
		return fmt.Sprintf("%s %d", s, int64(t.K))
	}
	return fmt.Sprintf("%s %d", s, t.K)
}

// Lookup gives a function's BTF prototype and the BTF to resolve casts
// and enum constants in (nil, nil without BTF).
type Lookup func(f *symbols.Func) (*btf.FuncProto, *btf.Spec)

// Compile compiles s for every function of fs into plans by function ID
// (functions no expression applies to have none). An expression that
// applies to none of fs (every one lacks a parameter it names) is an
// error, the first function's reason. Errors wrap ErrType: bad input.
func (s *Set) Compile(fs []*symbols.Func, lookup Lookup) (map[uint32]*Plan, error) {
	if s.Empty() {
		return nil, nil
	}
	plans := map[uint32]*Plan{}
	used := map[*Expr]bool{}
	first := map[*Expr]error{}
	for _, f := range fs {
		env := &Env{Func: f.Name}
		if lookup != nil {
			env.Proto, env.Spec = lookup(f)
		}
		p, skip, err := s.CompileFunc(env)
		if err != nil {
			return nil, err
		}
		for e, r := range skip {
			if first[e] == nil {
				first[e] = r
			}
		}
		for _, e := range s.all() {
			if e.applies(f.Name) && skip[e] == nil {
				used[e] = true
			}
		}
		if p != nil {
			plans[f.ID] = p
		}
	}
	for _, e := range s.all() {
		if used[e] {
			continue
		}
		if r := first[e]; r != nil {
			return nil, r
		}
		return nil, fmt.Errorf("%s %q: %w: the scope %q matches none of the %d traced functions", s.flag(e), e.Src, ErrType, e.Scope, len(fs))
	}
	return plans, nil
}

func encodeFetch(f Fetch) (src, nload, size, flags uint8, tail int32, off [MaxLoads]int32, mask uint64) {
	src, nload, size, tail, mask = f.Src, uint8(len(f.Loads)), f.Size, f.Tail, f.Mask
	copy(off[:], f.Loads)
	if f.Signed {
		flags |= uint8(bpfobj.TraceFtpXflagsFTP_XF_SIGNED)
	}
	if f.Str {
		flags |= uint8(bpfobj.TraceFtpXflagsFTP_XF_STR)
	}
	if f.Mask != 0 {
		flags |= uint8(bpfobj.TraceFtpXflagsFTP_XF_MASK)
	}
	if f.Bytes > 0 {
		flags |= uint8(bpfobj.TraceFtpXflagsFTP_XF_BYTES)
	}
	if f.Bits > 0 {
		// A bitfield has no tail (compileValue refuses one): the slot
		// carries its shift and width.
		flags |= uint8(bpfobj.TraceFtpXflagsFTP_XF_BITS)
		tail = int32(f.Shift) | int32(f.Bits)<<8
	}
	return
}

// Encode is p as bpf/trace.bpf.c's struct xprog (the xprogs map value),
// without its predicates' program numbers (Predicates.Sel sets them).
func (p *Plan) Encode() bpfobj.TraceXprog {
	var x bpfobj.TraceXprog
	x.Nvals = uint8(len(p.Values))
	if p.ExitArgs {
		x.ExitArgs = 1
	}
	if p.EntryRegsOnly() {
		x.EntryRegs = 1
	}
	x.PredNargs = p.entryArgs()
	for i, v := range p.Values {
		d := &x.V[i]
		d.Src, d.Nload, d.Size, d.Flags, d.Tail, d.Off, d.Mask = encodeFetch(v.Fetch)
		x.Boff[i], x.Blen[i] = uint16(v.Off), v.Bytes
	}
	x.Nbytes = uint16(p.StructBytes)
	return x
}

// EntryRegsOnly reports whether p's entry predicate reads nothing but
// argument registers (no memory, no ret): an fexit, which sees the
// registers the call was entered with, decides it again exactly, so a
// rejected entry needs no frame.
func (p *Plan) EntryRegsOnly() bool {
	terms := p.entryTerms()
	if len(terms) == 0 {
		return false
	}
	for _, t := range terms {
		if t.Str || t.Op == OpSEQ || t.Op == OpSPFX {
			return false
		}
		for _, f := range t.fetches() {
			if len(f.Loads) > 0 || f.Src == SrcRet {
				return false
			}
		}
	}
	return true
}

// entryTerms are the comparisons the entry predicate pushes (in program
// order, repeats included).
func (p *Plan) entryTerms() []Term {
	var out []Term
	for _, op := range p.EntryOps {
		if op&0xf0 == BoolPush {
			out = append(out, p.Terms[op&0x0f])
		}
	}
	return out
}

// entryArgs is how many leading argument registers the entry predicate
// reads (the trampoline programs fetch those first).
func (p *Plan) entryArgs() uint8 {
	var n uint8
	for _, t := range p.entryTerms() {
		for _, f := range t.fetches() {
			if f.Src != SrcRet && f.Src+1 > n {
				n = f.Src + 1
			}
		}
	}
	return n
}
