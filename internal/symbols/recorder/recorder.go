// Package recorder writes the symbol fixtures the host tests resolve
// against (internal/symbols/testdata): from the running lab kernel it picks
// a few functions per resolution rule and records their kallsyms and
// available_filter_functions lines and a reduced BTF blob per object. Only
// the hidden command `ftprobe internal-record-symbols` uses it; the fixtures
// are read back by symbols.LoadRecorded.
package recorder

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/ftprobe/ftprobe/internal/symbols"
	"golang.org/x/sys/unix"
)

// FixedRecordNames are always recorded: the functions the README and the
// kernel tests trace.
var FixedRecordNames = []string{"do_sys_openat2", "vfs_read", "vfs_write", "ksys_read", "bpf_get_numa_node_id"}

// RecordSymbols selects from the running kernel a few functions for each
// resolution rule (duplicates, compiler copies, modules, argument limits,
// varargs, struct by value, noreturn, deny list, notrace) plus
// FixedRecordNames, and writes into dir the kallsyms and
// available_filter_functions lines of those names, a BTF blob per object
// holding only their FUNC types, and meta.json. perRule bounds the names
// per rule.
func RecordSymbols(dir, arch string, maxArgs, perRule int) (*symbols.RecordedMeta, error) {
	rawSyms, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	rawFilter, err := os.ReadFile(symbols.TracefsPath + "/available_filter_functions")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, symbols.ErrNoTracefs
		}
		return nil, fmt.Errorf("read available_filter_functions: %w", err)
	}
	syms, err := symbols.ParseKallsyms(bytes.NewReader(rawSyms))
	if err != nil {
		return nil, err
	}
	filter, err := symbols.ParseFilterFunctions(bytes.NewReader(rawFilter))
	if err != nil {
		return nil, err
	}
	vmlinux, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("load vmlinux BTF: %w", err)
	}
	bt := btfIndex{"": vmlinux}
	sel := newSelection(syms, perRule)
	sel.pickListed()
	for _, s := range syms {
		sel.pick(s, filter, bt)
	}

	// Everything whose base name was chosen: the exact symbol and its copies.
	keep := func(name, mod string) bool {
		return sel.chosen[symbols.FilterKey{Name: symbols.BaseName(name), Module: mod}]
	}
	if err := os.MkdirAll(filepath.Join(dir, symbols.FixtureBTFDir), 0o755); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	ks, ff := keptKallsyms(rawSyms, keep), keptFilterLines(rawFilter, keep)
	if err := writeBTF(dir, sel.chosen, bt); err != nil {
		return nil, err
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	meta := &symbols.RecordedMeta{Arch: arch, Release: strings.TrimSpace(string(rel)), MaxArgs: maxArgs, Rules: sel.rules}
	mj, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	for name, data := range map[string][]byte{symbols.FixtureKallsyms: ks, symbols.FixtureFilter: ff, symbols.FixtureMeta: append(mj, '\n')} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
	}
	return meta, nil
}

// btfIndex holds the BTF of vmlinux ("") and of each module looked up so
// far (nil: the module has none).
type btfIndex map[string]*btf.Spec

func (bt btfIndex) spec(mod string) *btf.Spec {
	if s, ok := bt[mod]; ok {
		return s
	}
	s, err := btf.LoadKernelModuleSpec(mod)
	if err != nil {
		s = nil
	}
	bt[mod] = s
	return s
}

// funcs is the FUNC types named name in mod's BTF.
func (bt btfIndex) funcs(name, mod string) []*btf.Func {
	s := bt.spec(mod)
	if s == nil {
		return nil
	}
	ts, err := s.AnyTypesByName(name)
	if err != nil {
		return nil
	}
	var out []*btf.Func
	for _, t := range ts {
		if f, ok := t.(*btf.Func); ok {
			out = append(out, f)
		}
	}
	return out
}

// proto is the prototype of the first FUNC named name in mod's BTF, nil
// without one.
func (bt btfIndex) proto(name, mod string) *btf.FuncProto {
	fs := bt.funcs(name, mod)
	if len(fs) == 0 {
		return nil
	}
	fp, _ := fs[0].Type.(*btf.FuncProto)
	return fp
}

// selection is the names chosen so far, by rule (at most perRule each,
// twice that for the deny list), and the base names chosen.
type selection struct {
	perRule  int
	count    map[symbols.FilterKey]int // kallsyms entries per name and module
	rules    map[string][]string
	chosen   map[symbols.FilterKey]bool
	deniedBy map[string]bool // deny-list reasons with a name recorded
}

func newSelection(syms []symbols.Sym, perRule int) *selection {
	sel := &selection{perRule: perRule, count: map[symbols.FilterKey]int{}, rules: map[string][]string{},
		chosen: map[symbols.FilterKey]bool{}, deniedBy: map[string]bool{}}
	for _, s := range syms {
		sel.count[symbols.FilterKey{Name: s.Name, Module: s.Module}]++
	}
	return sel
}

// add records k's base name under rule, unless the rule is full or the
// name chosen already.
func (sel *selection) add(rule string, k symbols.FilterKey) bool {
	if sel.full(rule) {
		return false
	}
	b := symbols.FilterKey{Name: symbols.BaseName(k.Name), Module: k.Module}
	if sel.chosen[b] {
		return false
	}
	sel.chosen[b] = true
	n := b.Name
	if b.Module != "" {
		n += " [" + b.Module + "]"
	}
	sel.rules[rule] = append(sel.rules[rule], n)
	return true
}

func (sel *selection) full(rule string) bool { return len(sel.rules[rule]) >= sel.perRule }

// pickListed chooses FixedRecordNames ("fixed") and the noreturn list
// ("noreturn", sorted) where the kernel has them.
func (sel *selection) pickListed() {
	for _, n := range FixedRecordNames {
		if sel.count[symbols.FilterKey{Name: n}] > 0 {
			sel.chosen[symbols.FilterKey{Name: n}] = true
			sel.rules["fixed"] = append(sel.rules["fixed"], n)
		}
	}
	for _, n := range symbols.NoreturnNames() {
		if sel.count[symbols.FilterKey{Name: n}] > 0 {
			sel.chosen[symbols.FilterKey{Name: n}] = true
			sel.rules["noreturn"] = append(sel.rules["noreturn"], n)
		}
	}
	sort.Strings(sel.rules["noreturn"])
}

// pick chooses s for the first rule it illustrates, if that rule has
// room: notrace, deny list, module, compiler copy, duplicate, then the
// prototype's rules (pickByProto).
func (sel *selection) pick(s symbols.Sym, filter map[symbols.FilterKey]int, bt btfIndex) {
	k := symbols.FilterKey{Name: s.Name, Module: s.Module}
	if filter[k] <= 0 { // not traceable
		if s.Module == "" && !sel.full("notrace") && !symbols.IsSuffixedCopy(s.Name) && symbols.Denied(s.Name) == "" && bt.proto(s.Name, "") != nil {
			sel.add("notrace", k)
		}
		return
	}
	if d := symbols.Denied(s.Name); d != "" {
		if !sel.deniedBy[d] && len(sel.rules["deny"]) < 2*sel.perRule {
			sel.deniedBy[d] = true
			b := symbols.FilterKey{Name: symbols.BaseName(s.Name), Module: s.Module}
			if !sel.chosen[b] {
				sel.chosen[b] = true
				sel.rules["deny"] = append(sel.rules["deny"], b.Name)
			}
		}
		return
	}
	if s.Module != "" {
		if rule := "module:" + s.Module; !sel.full(rule) && !symbols.IsSuffixedCopy(s.Name) && bt.proto(s.Name, s.Module) != nil {
			sel.add(rule, k)
		}
		return
	}
	if symbols.IsSuffixedCopy(s.Name) {
		for _, suf := range []string{".isra.", ".constprop.", ".part."} {
			if strings.Contains(s.Name, suf) && !sel.full(suf) && bt.proto(symbols.BaseName(s.Name), "") != nil {
				sel.add(suf, k)
				break
			}
		}
		return
	}
	fp := bt.proto(s.Name, "")
	if fp == nil {
		return
	}
	if sel.count[k] > 1 && !sel.full("duplicate") {
		sel.add("duplicate", k)
		return
	}
	sel.pickByProto(k, fp)
}

// pickByProto chooses k for the first prototype rule it illustrates:
// varargs, struct by value, more than 12, 8 or 6 arguments.
func (sel *selection) pickByProto(k symbols.FilterKey, fp *btf.FuncProto) {
	var varargs bool
	var byValue bool
	for i, p := range fp.Params {
		if p.Type == nil || (i == len(fp.Params)-1 && p.Name == "" && isVoid(p.Type)) {
			varargs = true
		}
		switch btf.UnderlyingType(p.Type).(type) {
		case *btf.Struct, *btf.Union:
			byValue = true
		}
	}
	switch n := len(fp.Params); {
	case varargs:
		sel.add("varargs", k)
	case byValue:
		sel.add("struct-by-value", k)
	case n > 12:
		sel.add("args>12", k)
	case n > 8:
		sel.add("args>8", k)
	case n > 6:
		sel.add("args>6", k)
	}
}

// keptKallsyms is the text symbol lines of raw (/proc/kallsyms) whose
// name and module keep holds.
func keptKallsyms(raw []byte, keep func(name, mod string) bool) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[1] != "t" && f[1] != "T") {
			continue
		}
		mod := ""
		if len(f) > 3 {
			mod = strings.Trim(f[3], "[]")
		}
		if keep(f[2], mod) {
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}

// keptFilterLines is the lines of raw (available_filter_functions) whose
// name and module keep holds.
func keptFilterLines(raw []byte, keep func(name, mod string) bool) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		mod := ""
		if len(f) > 1 {
			mod = strings.Trim(f[1], "[]")
		}
		if keep(f[0], mod) {
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}

// writeBTF writes into dir's FixtureBTFDir one BTF blob per object
// ("vmlinux" or the module's name) holding the FUNC types of the chosen
// names, their types made shallow.
func writeBTF(dir string, chosen map[symbols.FilterKey]bool, bt btfIndex) error {
	byMod := map[string][]btf.Type{}
	sh := shallower{}
	keys := make([]symbols.FilterKey, 0, len(chosen))
	for k := range chosen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Module < keys[j].Module || (keys[i].Module == keys[j].Module && keys[i].Name < keys[j].Name)
	})
	for _, k := range keys {
		for _, fn := range bt.funcs(k.Name, k.Module) {
			byMod[k.Module] = append(byMod[k.Module], sh.typ(fn))
		}
	}
	for mod, types := range byMod {
		b, err := btf.NewBuilder(types, nil)
		if err != nil {
			return fmt.Errorf("record BTF: %w", err)
		}
		blob, err := b.Marshal(nil, nil)
		if err != nil {
			return fmt.Errorf("record BTF: %w", err)
		}
		name := mod
		if name == "" {
			name = "vmlinux"
		}
		if err := os.WriteFile(filepath.Join(dir, symbols.FixtureBTFDir, name), blob, 0o644); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	return nil
}

// LoadModule loads the kernel module file at path (finit_module), so that
// a recording has module functions to select from. A module that is
// already loaded is not an error.
func LoadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	flags := 0
	if strings.HasSuffix(path, ".xz") || strings.HasSuffix(path, ".zst") || strings.HasSuffix(path, ".gz") {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), "", flags); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", path, err)
	}
	return nil
}

// shallower copies BTF types, reducing structs, unions and enums to name
// and size so that a function's prototype does not pull in the whole
// kernel type graph. Copies are memoised so that shared types stay shared.
type shallower map[btf.Type]btf.Type

func (s shallower) typ(t btf.Type) btf.Type {
	if t == nil {
		return nil
	}
	if c, ok := s[t]; ok {
		return c
	}
	var c btf.Type
	switch v := t.(type) {
	case *btf.Func:
		n := &btf.Func{Name: v.Name, Linkage: v.Linkage}
		s[t] = n
		n.Type = s.typ(v.Type)
		return n
	case *btf.FuncProto:
		n := &btf.FuncProto{}
		s[t] = n
		n.Return = s.typ(v.Return)
		for _, p := range v.Params {
			n.Params = append(n.Params, btf.FuncParam{Name: p.Name, Type: s.typ(p.Type)})
		}
		return n
	case *btf.Pointer:
		n := &btf.Pointer{}
		s[t] = n
		n.Target = s.typ(v.Target)
		return n
	case *btf.Typedef:
		n := &btf.Typedef{Name: v.Name}
		s[t] = n
		n.Type = s.typ(v.Type)
		return n
	case *btf.Const:
		c = &btf.Const{Type: s.typ(v.Type)}
	case *btf.Volatile:
		c = &btf.Volatile{Type: s.typ(v.Type)}
	case *btf.Restrict:
		c = &btf.Restrict{Type: s.typ(v.Type)}
	case *btf.TypeTag:
		c = &btf.TypeTag{Value: v.Value, Type: s.typ(v.Type)}
	case *btf.Array:
		c = &btf.Array{Index: s.typ(v.Index), Type: s.typ(v.Type), Nelems: v.Nelems}
	case *btf.Struct:
		c = &btf.Struct{Name: v.Name, Size: v.Size}
	case *btf.Union:
		c = &btf.Union{Name: v.Name, Size: v.Size}
	case *btf.Enum:
		c = &btf.Enum{Name: v.Name, Size: v.Size, Signed: v.Signed}
	case *btf.Int:
		c = &btf.Int{Name: v.Name, Size: v.Size, Encoding: v.Encoding}
	case *btf.Float:
		c = &btf.Float{Name: v.Name, Size: v.Size}
	case *btf.Fwd:
		c = &btf.Fwd{Name: v.Name, Kind: v.Kind}
	case *btf.Void:
		c = &btf.Void{}
	default:
		c = &btf.Void{}
	}
	s[t] = c
	return c
}

// Archive markers around a recorded fixture set printed to a console.
const (
	ArchiveBegin = "FTPROBE-FIXTURES-BEGIN"
	ArchiveEnd   = "FTPROBE-FIXTURES-END"
	archiveLine  = "FTPROBE-FX "
)

// WriteArchive prints every file under dir to w as marked text lines, one
// "FTPROBE-FX <path> <base64 chunk>" per line between ArchiveBegin and
// ArchiveEnd, so that it survives a serial console with kernel log lines
// interleaved; ExtractArchive reads it back.
func WriteArchive(w io.Writer, dir string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, ArchiveBegin)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		enc := base64.StdEncoding.EncodeToString(data)
		fmt.Fprintf(bw, "%sfile %s %d\n", archiveLine, filepath.ToSlash(rel), len(data))
		for len(enc) > 0 {
			n := min(len(enc), 96)
			fmt.Fprintf(bw, "%s%s %s\n", archiveLine, filepath.ToSlash(rel), enc[:n])
			enc = enc[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	fmt.Fprintln(bw, ArchiveEnd)
	return bw.Flush()
}

// ExtractArchive reads a console capture holding WriteArchive output and
// writes its files under dir. Lines without the marker are ignored; a file
// whose decoded size differs from the announced one is an error.
func ExtractArchive(r io.Reader, dir string) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in, done := false, false
	sizes := map[string]int{}
	chunks := map[string]*strings.Builder{}
	var order []string
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, ArchiveBegin):
			in = true
			continue
		case strings.Contains(l, ArchiveEnd):
			done = in
		}
		if done {
			break
		}
		i := strings.Index(l, archiveLine)
		if !in || i < 0 {
			continue
		}
		f := strings.Fields(l[i+len(archiveLine):])
		if len(f) == 3 && f[0] == "file" {
			var n int
			if _, err := fmt.Sscan(f[2], &n); err != nil {
				return nil, fmt.Errorf("archive: bad size in %q", l)
			}
			sizes[f[1]] = n
			chunks[f[1]] = &strings.Builder{}
			order = append(order, f[1])
			continue
		}
		if len(f) != 2 || chunks[f[0]] == nil {
			return nil, fmt.Errorf("archive: bad line %q", l)
		}
		chunks[f[0]].WriteString(f[1])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if !done {
		return nil, fmt.Errorf("archive: no complete %s ... %s block", ArchiveBegin, ArchiveEnd)
	}
	for _, name := range order {
		data, err := base64.StdEncoding.DecodeString(chunks[name].String())
		if err != nil {
			return nil, fmt.Errorf("archive %s: %w", name, err)
		}
		if len(data) != sizes[name] {
			return nil, fmt.Errorf("archive %s: %d bytes decoded, %d announced", name, len(data), sizes[name])
		}
		clean := path.Clean(name)
		if strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
			return nil, fmt.Errorf("archive: path %q leaves the directory", name)
		}
		p := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
	}
	return order, nil
}

func isVoid(t btf.Type) bool {
	_, ok := btf.UnderlyingType(t).(*btf.Void)
	return t == nil || ok
}
