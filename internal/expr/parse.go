// Package expr parses and type-checks ftprobe's argument expressions and
// predicates (trace --arg, --filter) against a function's BTF prototype,
// and compiles them to the bounded fetch-and-compare programs that
// bpf/trace.bpf.c interprets at each call (Plan).
//
// The language is a small C subset over the function's parameter names:
//
//	file->f_path.dentry->d_name.name      member access through pointers and structs
//	argv[1], (struct sock *)arg0          constant index, casts to a BTF type
//	count > 4096 && (flags & 0x40)        comparisons with a constant, bit tests, && || !
//	ret == -ENOENT, mode == FMODE_READ    errno and enum constant names
//	name == "foo", name ~ "tmp*"          strings: equality, prefix (a trailing '*')
//	vfs_read:count == 1                   scoped to the functions a glob matches
//
// argN names the Nth argument register (functions without BTF, or any),
// ret the return value (decided at the function's exit).
package expr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("syntax error")

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tInt
	tStr
	tPunct
)

type token struct {
	kind tokKind
	pos  int // byte offset in the source
	text string
	ival uint64
}

var puncts = []string{"->", "&&", "||", "==", "!=", "<=", ">=", "(", ")", "[", "]", ".", "!", "&", "<", ">", "~", "-", "*", ","}

// lex splits src into tokens.
func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
			continue
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, token{kind: tIdent, pos: i, text: src[i:j]})
			i = j
			continue
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] == 'x' || src[j] == 'X' || src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'f' || src[j] >= 'A' && src[j] <= 'F') {
				j++
			}
			lit := src[i:j]
			for j < len(src) && (src[j] == 'u' || src[j] == 'U' || src[j] == 'l' || src[j] == 'L') {
				j++ // C suffixes
			}
			v, err := strconv.ParseUint(lit, 0, 64)
			if err != nil {
				return nil, colErr(src, i, "bad integer %q", lit)
			}
			out = append(out, token{kind: tInt, pos: i, text: src[i:j], ival: v})
			i = j
			continue
		case c == '\'':
			s, n, err := unquote(src[i:], '\'')
			if err != nil || len(s) != 1 {
				return nil, colErr(src, i, "bad character literal (want one byte, e.g. 'a' or '\\n')")
			}
			out = append(out, token{kind: tInt, pos: i, text: src[i : i+n], ival: uint64(s[0])})
			i += n
			continue
		case c == '"':
			s, n, err := unquote(src[i:], '"')
			if err != nil {
				return nil, colErr(src, i, "%v", err)
			}
			out = append(out, token{kind: tStr, pos: i, text: s})
			i += n
			continue
		}
		found := false
		for _, p := range puncts {
			if strings.HasPrefix(src[i:], p) {
				out = append(out, token{kind: tPunct, pos: i, text: p})
				i += len(p)
				found = true
				break
			}
		}
		if !found {
			return nil, colErr(src, i, "unexpected character %q", c)
		}
	}
	return append(out, token{kind: tEOF, pos: len(src)}), nil
}

// unquote reads a C string or character literal at the start of s; it
// returns the value and the bytes consumed.
func unquote(s string, q byte) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		case '\\', '\'', '"', '*':
			if s[i] == '*' {
				b.WriteByte('\\') // kept escaped: a literal '*' in a ~ pattern
			}
			b.WriteByte(s[i])
		default:
			return "", 0, fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return "", 0, errors.New("unterminated literal")
}

// colErr is a syntax error pointing at byte offset pos of src (column
// pos+1).
func colErr(src string, pos int, f string, a ...any) error {
	return &SyntaxError{Src: src, Col: pos + 1, Msg: fmt.Sprintf(f, a...)}
}

// SyntaxError is a parse error at a 1-based column of Src; it wraps
// ErrSyntax.
type SyntaxError struct {
	Src string
	Col int
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%q: syntax error at column %d: %s", e.Src, e.Col, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

type nodeKind int

const (
	nIdent  nodeKind = iota
	nInt             // ival
	nStr             // sval
	nUnary           // op x: "!", "-", "*"
	nBinary          // x op y: "&&", "||", "==", ..., "&", "~"
	nMember          // x.name or x->name (op)
	nIndex           // x[y]
	nCast            // (typ)x
)

// node is one parsed expression node.
type node struct {
	kind nodeKind
	pos  int
	op   string
	name string // identifier, member
	ival uint64
	sval string
	x, y *node
	typ  *typeName // nCast
}

// typeName is a cast's type: "struct file *" = {kw struct, name file, ptrs 1}.
type typeName struct {
	kw   string // "struct", "union", "enum" or "" (typedef or base type)
	name string
	ptrs int
}

func (t *typeName) String() string {
	s := t.name
	if t.kw != "" {
		s = t.kw + " " + s
	}
	if t.ptrs > 0 {
		s += " " + strings.Repeat("*", t.ptrs)
	}
	return s
}

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) is(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

func (p *parser) expect(s string) error {
	if !p.is(s) {
		return p.errAt(p.peek(), "want %q", s)
	}
	p.i++
	return nil
}

func (p *parser) errAt(t token, f string, a ...any) error {
	msg := fmt.Sprintf(f, a...)
	switch t.kind {
	case tEOF:
		msg += ", found the end"
	case tStr:
		msg += fmt.Sprintf(", found %q", t.text)
	default:
		msg += fmt.Sprintf(", found %q", t.text)
	}
	return colErr(p.src, t.pos, "%s", msg)
}

// parse parses one expression.
func parse(src string) (*node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	if p.peek().kind == tEOF {
		return nil, colErr(src, 0, "empty expression")
	}
	n, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t, "want an operator or the end")
	}
	return n, nil
}

// Binary operators by precedence level (C's order; higher binds tighter).
var levels = [][]string{{"||"}, {"&&"}, {"&"}, {"==", "!=", "~"}, {"<", "<=", ">", ">="}}

func (p *parser) binary(level int) (*node, error) {
	if level == len(levels) {
		return p.unary()
	}
	x, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tPunct || !contains(levels[level], t.text) {
			return x, nil
		}
		p.i++
		y, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		x = &node{kind: nBinary, pos: t.pos, op: t.text, x: x, y: y}
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// baseTypes start a cast without struct/union/enum.
var baseTypes = map[string]bool{
	"char": true, "short": true, "int": true, "long": true, "unsigned": true, "signed": true, "void": true, "bool": true, "_Bool": true,
	"u8": true, "u16": true, "u32": true, "u64": true, "s8": true, "s16": true, "s32": true, "s64": true,
	"__u8": true, "__u16": true, "__u32": true, "__u64": true, "__s8": true, "__s16": true, "__s32": true, "__s64": true,
	"size_t": true, "ssize_t": true, "loff_t": true, "pid_t": true, "umode_t": true, "gfp_t": true,
}

func (p *parser) unary() (*node, error) {
	t := p.peek()
	if t.kind == tPunct {
		switch t.text {
		case "!", "-", "*":
			p.i++
			x, err := p.unary()
			if err != nil {
				return nil, err
			}
			return &node{kind: nUnary, pos: t.pos, op: t.text, x: x}, nil
		case "(":
			if tn, ok, err := p.castType(); err != nil {
				return nil, err
			} else if ok {
				x, err := p.unary()
				if err != nil {
					return nil, err
				}
				return &node{kind: nCast, pos: t.pos, typ: tn, x: x}, nil
			}
		}
	}
	return p.postfix()
}

// castType parses "(type)" at a '(' when what follows is a type name.
func (p *parser) castType() (*typeName, bool, error) {
	a := p.toks[p.i+1]
	if a.kind != tIdent {
		return nil, false, nil
	}
	tn := &typeName{}
	j := p.i + 1
	switch {
	case a.text == "struct" || a.text == "union" || a.text == "enum":
		b := p.toks[j+1]
		if b.kind != tIdent {
			return nil, false, colErr(p.src, b.pos, "want a %s name after %q", a.text, a.text)
		}
		tn.kw, tn.name = a.text, b.text
		j += 2
	case baseTypes[a.text]:
		var words []string
		for p.toks[j].kind == tIdent && baseTypes[p.toks[j].text] {
			words = append(words, p.toks[j].text)
			j++
		}
		tn.name = strings.Join(words, " ")
	default:
		// A typedef name: only when a '*' or ')' follows ("(pid_t)x",
		// "(my_t *)x"); "(count)" stays a parenthesized expression.
		b := p.toks[j+1]
		if !(b.kind == tPunct && b.text == "*") {
			return nil, false, nil
		}
		tn.name = a.text
		j++
	}
	for p.toks[j].kind == tPunct && p.toks[j].text == "*" {
		tn.ptrs++
		j++
	}
	if !(p.toks[j].kind == tPunct && p.toks[j].text == ")") {
		return nil, false, p.errAt(p.toks[j], "want ')' to close the cast to %s", tn)
	}
	p.i = j + 1
	return tn, true, nil
}

func (p *parser) postfix() (*node, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tPunct {
			return x, nil
		}
		switch t.text {
		case "->", ".":
			p.i++
			m := p.next()
			if m.kind != tIdent {
				return nil, p.errAt(m, "want a field name after %q", t.text)
			}
			x = &node{kind: nMember, pos: m.pos, op: t.text, name: m.text, x: x}
		case "[":
			p.i++
			idx, err := p.binary(0)
			if err != nil {
				return nil, err
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &node{kind: nIndex, pos: t.pos, x: x, y: idx}
		default:
			return x, nil
		}
	}
}

func (p *parser) primary() (*node, error) {
	t := p.next()
	switch t.kind {
	case tIdent:
		return &node{kind: nIdent, pos: t.pos, name: t.text}, nil
	case tInt:
		return &node{kind: nInt, pos: t.pos, ival: t.ival}, nil
	case tStr:
		return &node{kind: nStr, pos: t.pos, sval: t.text}, nil
	case tPunct:
		if t.text == "(" {
			x, err := p.binary(0)
			if err != nil {
				return nil, err
			}
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			return x, nil
		}
	}
	return nil, p.errAt(t, "want a name, a number, a string or '('")
}

// splitScope splits "glob:expr" into its function glob and expression;
// the glob is "" when the expression is not scoped.
func splitScope(s string) (glob, rest string, off int) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", s, 0
	}
	g := strings.TrimSpace(s[:i])
	for _, c := range g {
		if !(c == '_' || c == '*' || c == '?' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", s, 0
		}
	}
	if g == "" {
		return "", s, 0
	}
	return g, s[i+1:], i + 1
}

// String spells n back as C (the operand a message names).
func (n *node) String() string {
	if n == nil {
		return ""
	}
	switch n.kind {
	case nIdent:
		return n.name
	case nInt:
		return strconv.FormatUint(n.ival, 10)
	case nStr:
		return strconv.Quote(n.sval)
	case nUnary:
		return n.op + n.x.String()
	case nBinary:
		return n.x.String() + " " + n.op + " " + n.y.String()
	case nMember:
		return n.x.String() + n.op + n.name
	case nIndex:
		return n.x.String() + "[" + n.y.String() + "]"
	case nCast:
		return "(" + n.typ.String() + ")" + n.x.String()
	}
	return "?"
}
