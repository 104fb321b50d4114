// Package symbols resolves function patterns against the running kernel:
// /proc/kallsyms (addresses, modules), tracefs available_filter_functions
// (what ftrace can patch) and BTF (prototypes, for fentry), and says for
// each attach mode whether a function can be traced and why not.
package symbols

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// The trace modes (trace and stat --mode), each named by the kernel attach
// paths it uses joined by '+' (attach.TraceModes lists the paths of each).
// A function is checked for every one (Func.Skip).
const (
	// ModeFentryFexit is one fentry and one fexit program per function
	// (5.5; arm64 6.4).
	ModeFentryFexit = "fentry+fexit"
	// ModeFSession is one fsession program per function (7.0).
	ModeFSession = "fsession"
	// ModeFSessionMulti is one fsession.multi link for all functions (7.x).
	ModeFSessionMulti = "fsession.multi"
	// ModeFentryMulti is one fentry.multi and one fexit.multi link for all
	// functions (7.x).
	ModeFentryMulti = "fentry.multi+fexit.multi"
	// ModeKprobeSession is one kprobe.session link for all functions
	// (6.10; ftprobe's program needs 7.0's session kfuncs on ctx).
	ModeKprobeSession = "kprobe.session"
	// ModeKprobeMulti is one kprobe.multi and one kretprobe.multi link for
	// all functions (5.18 with CONFIG_FPROBE; arm64 6.14).
	ModeKprobeMulti = "kprobe.multi+kretprobe.multi"
	// ModeKprobe is one kprobe and one kretprobe per function.
	ModeKprobe = "kprobe+kretprobe"
)

// Modes lists the trace modes in `trace --mode` order (after auto).
var Modes = []string{ModeFentryFexit, ModeFSession, ModeFSessionMulti, ModeFentryMulti, ModeKprobeSession, ModeKprobeMulti, ModeKprobe}

// Sym is one text symbol from /proc/kallsyms.
type Sym struct {
	Name   string
	Addr   uint64
	Module string // "" for vmlinux
}

// ParseKallsyms reads /proc/kallsyms format ("ADDR TYPE NAME [MODULE]") and
// returns the text (t/T) symbols. Addresses are zero without privilege
// (kptr_restrict); callers must check. The parser avoids per-field
// allocations: kallsyms has ~200k lines and is read under emulation too.
func ParseKallsyms(r io.Reader) ([]Sym, error) {
	out := make([]Sym, 0, 1<<16)
	mods := map[string]string{}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\n")
			sp := bytes.IndexByte(line, ' ')
			if sp > 0 && len(line) > sp+3 && (line[sp+1] == 't' || line[sp+1] == 'T') && line[sp+2] == ' ' {
				a, perr := strconv.ParseUint(string(line[:sp]), 16, 64)
				if perr != nil {
					return nil, fmt.Errorf("kallsyms: bad address %q", line[:sp])
				}
				rest := line[sp+3:]
				s := Sym{Addr: a}
				if t := bytes.IndexByte(rest, '\t'); t >= 0 {
					mod := string(bytes.Trim(rest[t+1:], "[] \t"))
					if m, ok := mods[mod]; ok {
						s.Module = m
					} else {
						mods[mod] = mod
						s.Module = mod
					}
					rest = rest[:t]
				}
				s.Name = string(bytes.TrimSpace(rest))
				out = append(out, s)
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kallsyms: %w", err)
		}
	}
}

// FilterKey names a function in available_filter_functions.
type FilterKey struct{ Name, Module string }

// ParseFilterFunctions reads tracefs available_filter_functions ("NAME" or
// "NAME [MODULE]", one per patchable call site) and counts each name.
func ParseFilterFunctions(r io.Reader) (map[FilterKey]int, error) {
	out := make(map[FilterKey]int, 1<<16)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			k := FilterKey{}
			if sp := bytes.IndexByte(line, ' '); sp > 0 {
				k.Name = string(line[:sp])
				k.Module = string(bytes.Trim(line[sp+1:], "[] "))
			} else {
				k.Name = string(line)
			}
			out[k]++
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("available_filter_functions: %w", err)
		}
	}
}

// BaseName strips compiler-generated suffixes (.isra.0, .constprop.0,
// .part.0, .cold, .llvm.NNN) from a symbol name.
func BaseName(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

// IsSuffixedCopy reports whether name carries a compiler suffix.
func IsSuffixedCopy(name string) bool { return strings.IndexByte(name, '.') > 0 }

// denyList holds functions that tracing would recurse into BPF or ftrace
// itself, or that the kernel refuses (kernel/bpf/verifier.c btf_id_deny,
// kernel/trace/ftrace.c notrace paths).
var denyList = []string{
	"rcu_read_lock*", "rcu_read_unlock*", "__rcu_read_lock", "__rcu_read_unlock",
	"migrate_disable", "migrate_enable", "preempt_count_add", "preempt_count_sub",
	"__bpf_prog_enter*", "__bpf_prog_exit*", "bpf_trampoline_*", "__bpf_tramp_*",
	"bpf_ringbuf_*", "bpf_get_current_*", "bpf_ktime_get_ns", "__htab_map_lookup_elem",
	"ftrace_*", "__ftrace_*", "fprobe_*", "rethook_*", "function_graph_*",
	"__x64_sys_*_bpf", "arch_ftrace_*", "trace_hardirqs_*", "lockdep_*",
	"do_idle", "cpu_idle*", "default_idle*", "arch_cpu_idle*",
	"__rcu_*", "rcu_note_*", "*_rcu_*_enter", "*_rcu_*_exit",
	"kprobe_*", "*kretprobe*", "bpf_dispatcher_*", "copy_from_kernel_nofault*",
}

// noreturn lists functions that never return: the verifier rejects fexit on
// those of kernel/bpf/verifier.c noreturn_deny (do_exit, do_group_exit,
// kthread_exit, kthread_complete_and_exit, make_task_dead,
// __module_put_and_kthread_exit, the x86 exit/exit_group syscall
// handlers, the KUnit aborts), and a return probe on any of them never
// fires (the arm64 exit syscall handlers, panic, ...). They are traced at
// entry only (Func.EntryOnly) in every mode.
var noreturn = map[string]bool{
	"do_exit": true, "do_group_exit": true, "kthread_exit": true, "make_task_dead": true,
	"__module_put_and_kthread_exit": true, "kthread_complete_and_exit": true, "panic": true,
	"do_task_dead": true, "__stack_chk_fail": true, "rewind_stack_and_make_dead": true,
	"machine_real_restart": true, "cpu_startup_entry": true, "__ubsan_handle_builtin_unreachable": true,
	"__x64_sys_exit": true, "__x64_sys_exit_group": true, "__ia32_sys_exit": true, "__ia32_sys_exit_group": true,
	"__arm64_sys_exit": true, "__arm64_sys_exit_group": true, "__kunit_abort": true, "kunit_try_catch_throw": true,
}

// IsNoreturn reports whether name (or the function it is a compiler copy
// of) never returns (the noreturn list: the verifier's noreturn_deny set,
// which refuses fexit on it, and the others whose return probe would never
// fire); such functions are traced at entry only.
func IsNoreturn(name string) bool { return noreturn[BaseName(name)] }

// NoreturnNames lists the functions IsNoreturn knows, sorted.
func NoreturnNames() []string {
	out := make([]string, 0, len(noreturn))
	for n := range noreturn {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Copies returns how many kallsyms addresses name has in module ("" for
// vmlinux).
func (k *Kernel) Copies(name, module string) int {
	n := 0
	for _, j := range k.byName[name] {
		if k.Syms[j].Module == module {
			n++
		}
	}
	return n
}

// resolvedCopy is the index of the copy of vmlinux name that the kernel
// attaches a trampoline to: it resolves a BTF name through
// kallsyms_lookup_name, which finds the lowest address of that name
// (kallsyms sorts equal names by address).
func (k *Kernel) resolvedCopy(name string) int {
	best := -1
	for _, j := range k.byName[name] {
		if k.Syms[j].Module == "" && (best < 0 || k.Syms[j].Addr < k.Syms[best].Addr) {
			best = j
		}
	}
	return best
}

// Denied returns the deny-list pattern that name matches, or "".
func Denied(name string) string {
	b := BaseName(name)
	for _, p := range denyList {
		if ok, _ := path.Match(p, b); ok {
			return p
		}
	}
	return ""
}

// Proto is a function's BTF prototype, reduced to what tracing needs.
type Proto struct {
	Params    []Param
	Ret       string // C type of the return value
	RetKind   RetKind
	RetSize   uint32 // bytes of the return type (0 unknown or void)
	RetSigned bool
	// RetArg classifies the return type as a parameter's (ArgBool,
	// ArgEnum, ArgUint, ...), and RetEnum holds an enum return type's
	// constants, so a return value prints by the rule its arguments do.
	RetArg        ArgKind
	RetEnum       []EnumValue
	Varargs       bool
	StructByValue string // first parameter passed by value as a struct/union
	// RetStruct is set when the function returns a struct or union by
	// value (RetSize bytes).
	RetStruct bool
}

// Param is one parameter.
type Param struct {
	Name string
	Type string // C spelling, e.g. "const char *"
	Kind ArgKind
	Size uint32 // bytes
	// Enum holds the constants of an enum parameter (ArgEnum), so values
	// print by name.
	Enum []EnumValue
	// CtxScalar is true when every kernel ftprobe supports (6.1 and
	// later) lets a trampoline program read this parameter straight
	// from its ctx: an integer, enum or bool, or a pointer to a struct,
	// a union, an integer (qualifiers and typedefs skipped) or plain
	// void. Older kernels' btf_ctx_access (kernel/bpf/btf.c) refuses the
	// others, e.g. pointers to pointers, to functions, to enums or to
	// const void ("invalid bpf_context access" on 6.12).
	CtxScalar bool
}

// EnumValue is one enum constant. Value is the constant's bits as BTF
// stores them; compare it masked to the enum's size.
type EnumValue struct {
	Name  string
	Value uint64
}

// EnumName returns the name of the constant of e whose value equals v in
// the low size bytes, or "".
func EnumName(e []EnumValue, v uint64, size uint32) string {
	mask := ^uint64(0)
	if size > 0 && size < 8 {
		mask = 1<<(8*size) - 1
	}
	for _, c := range e {
		if c.Value&mask == v&mask {
			return c.Name
		}
	}
	return ""
}

// RetKind classifies a return value for decoding.
type RetKind int

// Return kinds.
const (
	RetOther RetKind = iota
	RetVoid
	RetS32 // int-sized signed: errno-style
	RetPtr // pointer: ERR_PTR-style
	RetLong
)

// ArgKind classifies an argument for formatting.
type ArgKind int

// Argument kinds.
const (
	ArgInt ArgKind = iota
	ArgUint
	ArgPtr
	ArgCharPtr
	ArgBool
	ArgEnum
	ArgStruct
	ArgOther
)

// ProtoFromBTF reduces a BTF function to a Proto.
func ProtoFromBTF(fn *btf.Func) (*Proto, error) {
	fp, ok := fn.Type.(*btf.FuncProto)
	if !ok {
		return nil, fmt.Errorf("%s: BTF type is %T, not a prototype", fn.Name, fn.Type)
	}
	p := &Proto{}
	for i, prm := range fp.Params {
		if prm.Type == nil || (i == len(fp.Params)-1 && prm.Name == "" && isVoid(prm.Type)) {
			p.Varargs = true
			continue
		}
		q := Param{Name: prm.Name, Type: cType(prm.Type)}
		q.Kind, q.Size = classify(prm.Type)
		q.CtxScalar = ctxReadable(prm.Type)
		if en, ok := btf.UnderlyingType(prm.Type).(*btf.Enum); ok {
			for _, v := range en.Values {
				q.Enum = append(q.Enum, EnumValue{v.Name, v.Value})
			}
		}
		if q.Kind == ArgStruct && p.StructByValue == "" {
			p.StructByValue = prm.Name
		}
		p.Params = append(p.Params, q)
	}
	p.Ret = cType(fp.Return)
	k0, sz0 := classify(fp.Return)
	p.RetSize, p.RetSigned = sz0, k0 == ArgInt || k0 == ArgEnum
	p.RetStruct = k0 == ArgStruct
	p.RetArg = k0
	if en, ok := btf.UnderlyingType(fp.Return).(*btf.Enum); ok {
		for _, v := range en.Values {
			p.RetEnum = append(p.RetEnum, EnumValue{v.Name, v.Value})
		}
	}
	switch k, sz := k0, sz0; {
	case fp.Return == nil || isVoid(fp.Return):
		p.RetKind = RetVoid
		p.Ret = "void"
	case k == ArgPtr || k == ArgCharPtr:
		p.RetKind = RetPtr
	case k == ArgInt && sz == 4:
		p.RetKind = RetS32
	case k == ArgInt && sz == 8:
		p.RetKind = RetLong
	}
	return p, nil
}

// ctxReadable reports whether a parameter of type t is one the
// verifier of every supported kernel lets a tracing program load from
// its ctx (btf_ctx_access: an integer or enum, a pointer to plain void,
// a pointer to an integer after modifiers, a pointer to a struct or
// union). A struct by value is not (it may fill two registers). See
// Param.CtxScalar.
func ctxReadable(t btf.Type) bool {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		return u.Size <= 8
	case *btf.Enum:
		return true
	case *btf.Pointer:
		if _, ok := u.Target.(*btf.Void); ok || u.Target == nil {
			return true // plain void *: const void * only since 6.15-ish
		}
		switch btf.UnderlyingType(u.Target).(type) { // qualifiers and typedefs skipped
		case *btf.Int, *btf.Struct, *btf.Union:
			return true
		}
	}
	return false
}

func isVoid(t btf.Type) bool {
	_, ok := btf.UnderlyingType(t).(*btf.Void)
	return t == nil || ok
}

func classify(t btf.Type) (ArgKind, uint32) {
	if t == nil {
		return ArgOther, 0
	}
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		if u.Encoding&btf.Bool != 0 {
			return ArgBool, u.Size
		}
		if u.Encoding&btf.Signed != 0 {
			return ArgInt, u.Size
		}
		return ArgUint, u.Size
	case *btf.Enum:
		return ArgEnum, u.Size
	case *btf.Pointer:
		tgt := btf.UnderlyingType(u.Target)
		for {
			q, ok := tgt.(*btf.Const)
			if !ok {
				break
			}
			tgt = btf.UnderlyingType(q.Type)
		}
		if i, ok := tgt.(*btf.Int); ok && i.Size == 1 {
			return ArgCharPtr, 8
		}
		return ArgPtr, 8
	case *btf.Struct, *btf.Union:
		sz, _ := btf.Sizeof(u)
		return ArgStruct, uint32(sz)
	}
	return ArgOther, 0
}

func cType(t btf.Type) string {
	if t == nil {
		return "void"
	}
	switch v := t.(type) {
	case *btf.Pointer:
		if fp, ok := v.Target.(*btf.FuncProto); ok {
			// A function pointer: "int (*)(struct file *, void *)"; a
			// signature puts the parameter's name after the '*'.
			var ps []string
			for _, p := range fp.Params {
				ps = append(ps, cType(p.Type))
			}
			if len(ps) == 0 {
				ps = []string{"void"}
			}
			return cType(fp.Return) + " (*)(" + strings.Join(ps, ", ") + ")"
		}
		return cType(v.Target) + " *"
	case *btf.Const:
		return qualified("const", v.Type)
	case *btf.Volatile:
		return qualified("volatile", v.Type)
	case *btf.Restrict:
		return cType(v.Type)
	case *btf.Struct:
		return "struct " + v.Name
	case *btf.Union:
		return "union " + v.Name
	case *btf.Enum:
		return "enum " + v.Name
	case *btf.Void:
		return "void"
	case *btf.FuncProto:
		return "func"
	}
	if n := t.TypeName(); n != "" {
		return n
	}
	return fmt.Sprintf("%T", t)
}

// qualified spells qualifier q applied to t: before the type it qualifies
// ("const char *"), but after the '*' when t is a pointer, which the
// qualifier then applies to ("const BYTE * const" for a const pointer to
// const BYTE, not "const const BYTE *"). A qualified function pointer
// keeps the plain spelling, which Signature names.
func qualified(q string, t btf.Type) string {
	if p, ok := t.(*btf.Pointer); ok {
		if _, fn := p.Target.(*btf.FuncProto); !fn {
			return cType(t) + " " + q
		}
		return cType(t)
	}
	return q + " " + cType(t)
}

// Func is one resolved traceable candidate: one address of one symbol.
type Func struct {
	ID     uint32 // index in the plan's function table (set by Resolve)
	Name   string // kallsyms name, e.g. "foo.isra.0"
	Module string // "" for vmlinux
	Addr   uint64
	Copies int    // addresses with this name and module in kallsyms
	Proto  *Proto // nil without BTF
	// ProtoErr says why Proto is nil or not used to decode arguments (no
	// BTF, a type BTF cannot describe, a struct passed by value); "" when
	// arguments decode by name and type.
	ProtoErr string
	BTFName  string // BTF function name used for fentry ("" without BTF)
	// Skip says, per mode, why this function cannot be traced ("" = can).
	Skip map[string]string
	// EntryOnly says why this function's exit cannot be hooked in any mode
	// (EntryOnlyNoreturn), "" when entry and exit are both traced. Such a
	// function is traced at entry only: no exit probe is attached, and its
	// calls are neither losses nor calls in flight.
	EntryOnly string
	// Values are the --arg expressions recorded for this function
	// (internal/expr), in the order of the record's value slots.
	Values []Value
}

// Value is one --arg expression recorded at a function's entry, named as
// written, with how to format it (ArgCharPtr: a string; ArgStruct: a
// struct or union's bytes, formatted from Type).
type Value struct {
	Name string
	Kind ArgKind
	Size uint32
	Enum []EnumValue
	// Type is the struct or union of an ArgStruct value (BTF).
	Type btf.Type
	// Off and Len: where its bytes are in the event's struct bytes, and
	// how many were read (Len < Size: truncated).
	Off, Len uint32
}

// EntryOnlyNoreturn is Func.EntryOnly for a function that never returns
// (do_exit, do_group_exit, make_task_dead, ...): the verifier rejects fexit
// on it (kernel/bpf/verifier.c noreturn_deny) and a return probe would
// never fire.
const EntryOnlyNoreturn = "noreturn"

// Display is the name with module and, for a name with several copies,
// the address (name@0xADDR), as patterns accept it.
func (f *Func) Display() string {
	s := f.Name
	if f.Copies > 1 {
		s += fmt.Sprintf("@%#x", f.Addr)
	}
	if f.Module != "" {
		s += " [" + f.Module + "]"
	}
	return s
}

// Kernel is the symbol view of one kernel.
type Kernel struct {
	Syms   []Sym
	byName map[string][]int
	Filter map[FilterKey]int // nil when tracefs is unreadable
	BTF    func(name, module string) (*btf.Func, error)
	// Spec returns the BTF of vmlinux ("") or of a module (its types
	// with vmlinux's), for casts and enum constants in --arg/--filter;
	// nil when unknown.
	Spec func(module string) (*btf.Spec, error)
	Arch string // "arm64" or "amd64"
	// patchable[i] says whether Syms[i] holds an ftrace location (from
	// available_filter_functions_addrs, 6.5+); nil: by name from Filter.
	patchable []bool
	// loadAddrs reads available_filter_functions_addrs (LoadKernel), once,
	// when a duplicated name is first judged.
	loadAddrs func() []uint64
	addrsOnce sync.Once
	// Limits says what the trampoline modes take on this kernel (argument
	// slots, structs by value); set it before Match or Resolve. Nil: no
	// limit is checked.
	Limits Limits
	// Types is the kernel BTF cache BTF reads through (LoadKernel; nil
	// for recorded kernels): attach.Options.BTF shares it so vmlinux BTF
	// is decoded once per process.
	Types *btf.Cache
	// FromCache says LoadKernel took Syms and Filter from SymbolCacheDir.
	FromCache bool
	// SelfReached holds, by address, the functions ftprobe's own programs
	// reach (internal/selfreach) with the reason they are left out in
	// every mode; set it before Match or Resolve. Nil: none.
	SelfReached map[uint64]string
	// SelfChecked keeps what internal/selfreach learned on this kernel,
	// by the trace settings it learned with (a key of internal/trace),
	// then by address: how many times per traced call ftprobe's programs
	// call the function (0: not at all; -1: the kernel refused the
	// counting program, not known). A later trace with the same
	// settings checks only the functions not in it.
	SelfChecked map[string]map[uint64]float64
}

// NewKernel indexes syms. lim may be nil and set later (Kernel.Limits).
func NewKernel(syms []Sym, filter map[FilterKey]int, lookup func(name, module string) (*btf.Func, error), arch string, lim Limits) *Kernel {
	k := &Kernel{Syms: syms, Filter: filter, BTF: lookup, Arch: arch, Limits: lim, byName: map[string][]int{}}
	for i, s := range syms {
		k.byName[s.Name] = append(k.byName[s.Name], i)
	}
	return k
}

// TracefsPath is where ftprobe expects tracefs.
const TracefsPath = "/sys/kernel/tracing"

// ErrNoTracefs reports an unmounted tracefs.
var ErrNoTracefs = errors.New("tracefs is not mounted at " + TracefsPath + " (mount it: mount -t tracefs tracefs " + TracefsPath + ")")

// ErrHiddenAddresses reports /proc/kallsyms with zeroed addresses: the
// reader lacks the privilege to see them (kptr_restrict).
var ErrHiddenAddresses = errors.New("kallsyms addresses are hidden (kptr_restrict): run as root with CAP_SYSLOG")

// LoadKernel reads /proc/kallsyms (text symbols), available_filter_functions
// and the kernel BTF (vmlinux, and module BTF on demand). The first two
// come from SymbolCacheDir when this boot and module set were read before
// (Kernel.FromCache). Errors: unreadable kallsyms, ErrHiddenAddresses (no
// privilege), ErrNoTracefs. lim says what trampolines take (internal/trial
// measures it on the running kernel); nil leaves Kernel.Limits to be set
// before Match or Resolve.
func LoadKernel(arch string, lim Limits) (*Kernel, error) {
	return loadKernel(runningKernelSources(), arch, lim)
}

func loadKernel(src kernelSources, arch string, lim Limits) (*Kernel, error) {
	key := src.cacheKey()
	syms, filter, fromCache, err := src.readKernelSymbols(key)
	if err != nil {
		return nil, err
	}
	cache := btf.NewCache()
	lookup := func(name, module string) (*btf.Func, error) {
		var spec *btf.Spec
		var err error
		if module == "" {
			spec, err = cache.Kernel()
		} else {
			spec, err = cache.Module(module)
		}
		if err != nil {
			return nil, err
		}
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err != nil {
			return nil, err
		}
		return fn, nil
	}
	k := NewKernel(syms, filter, lookup, arch, lim)
	k.Types = cache
	k.FromCache = fromCache
	k.Spec = func(module string) (*btf.Spec, error) {
		if module == "" {
			return cache.Kernel()
		}
		return cache.Module(module)
	}
	k.loadAddrs = func() []uint64 { return src.readAddrs(key) }
	return k, nil
}

// Pattern is one parsed function pattern.
type Pattern struct {
	Raw    string
	Glob   string // name or glob
	Module string // "" = any for globs, vmlinux or unique for exact names
	Addr   uint64 // name@ADDR
	Exact  bool
}

// ParsePattern accepts NAME, GLOB, "NAME [MODULE]", MODULE:GLOB and
// NAME@0xADDR.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{Raw: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return p, errors.New("empty function pattern")
	}
	if i := strings.Index(s, " ["); i > 0 && strings.HasSuffix(s, "]") {
		p.Module = s[i+2 : len(s)-1]
		s = s[:i]
	} else if i := strings.IndexByte(s, ':'); i > 0 {
		p.Module, s = s[:i], s[i+1:]
	}
	if i := strings.IndexByte(s, '@'); i > 0 {
		a, err := strconv.ParseUint(strings.TrimPrefix(s[i+1:], "0x"), 16, 64)
		if err != nil {
			return p, fmt.Errorf("pattern %q: bad address after @", p.Raw)
		}
		p.Addr, s = a, s[:i]
	}
	if _, err := path.Match(s, ""); err != nil {
		return p, fmt.Errorf("pattern %q: %w", p.Raw, err)
	}
	p.Glob = s
	p.Exact = !strings.ContainsAny(s, "*?[")
	return p, nil
}

func (p Pattern) matchName(name string) bool {
	if p.Exact {
		return name == p.Glob || BaseName(name) == p.Glob
	}
	ok, _ := path.Match(p.Glob, name)
	if !ok && IsSuffixedCopy(name) {
		ok, _ = path.Match(p.Glob, BaseName(name))
	}
	return ok
}

// matches reports whether symbol s matches p and no exclude.
func (p Pattern) matches(s Sym, ex []Pattern) bool {
	if (p.Module != "" && s.Module != p.Module) || !p.matchName(s.Name) || (p.Addr != 0 && s.Addr != p.Addr) {
		return false
	}
	for _, e := range ex {
		if (e.Module == "" || e.Module == s.Module) && e.matchName(s.Name) {
			return false
		}
	}
	return true
}

func parsePatterns(raw []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(raw))
	for _, r := range raw {
		p, err := ParsePattern(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Resolution is the outcome of resolving patterns for one mode.
type Resolution struct {
	Mode    string
	Funcs   []*Func        // traceable in Mode, IDs 0..n-1
	Skipped []*Func        // matched but not traceable in Mode (Skip[Mode] says why)
	Notes   []string       // ambiguity and copy notes
	Reasons map[string]int // skip reason -> count
}

// SkipSummary is "skipped N: 5 not in available_filter_functions, ...".
func (r *Resolution) SkipSummary() string {
	if len(r.Skipped) == 0 {
		return "skipped 0"
	}
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range r.Reasons {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || (kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k) })
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%d %s", e.v, e.k)
	}
	return fmt.Sprintf("skipped %d: %s", len(r.Skipped), strings.Join(parts, ", "))
}

// EntryOnlySummary is "entry only: do_exit, do_group_exit (noreturn)" for
// the functions of fs traced at entry only (Func.EntryOnly), one group per
// reason, names sorted, at most 5 named per reason; "" when there is none.
func EntryOnlySummary(fs []*Func) string {
	by := map[string][]string{}
	for _, f := range fs {
		if f.EntryOnly != "" {
			by[f.EntryOnly] = append(by[f.EntryOnly], f.Display())
		}
	}
	if len(by) == 0 {
		return ""
	}
	var parts []string
	for why, names := range by {
		sort.Strings(names)
		names = slices.Compact(names)
		if len(names) > 5 {
			names = append(names[:5], fmt.Sprintf("%d more", len(names)-5))
		}
		parts = append(parts, strings.Join(names, ", ")+" ("+why+")")
	}
	sort.Strings(parts)
	return "entry only: " + strings.Join(parts, "; ")
}

// ErrNoMatch and ErrUntraceable classify resolution failures (bad input).
var (
	ErrNoMatch     = errors.New("no such function")
	ErrUntraceable = errors.New("function cannot be traced")
	ErrTooMany     = errors.New("too many functions")
)

// Resolve expands patterns minus excludes into functions for mode. An
// exact name that is not traceable is an error naming the reason; wildcard
// matches that are not traceable are skipped and counted. maxFuncs <= 0
// means no limit.
func (k *Kernel) Resolve(patterns, excludes []string, mode string, maxFuncs int) (*Resolution, error) {
	res := &Resolution{Mode: mode, Reasons: map[string]int{}}
	ex, err := parsePatterns(excludes)
	if err != nil {
		return nil, err
	}
	type key struct {
		name, mod string
		addr      uint64
	}
	seen := map[key]bool{}
	for _, raw := range patterns {
		p, err := ParsePattern(raw)
		if err != nil {
			return nil, err
		}
		var matched []*Func
		hits := 0
		for i, s := range k.Syms {
			if !p.matches(s, ex) {
				continue
			}
			hits++
			kk := key{s.Name, s.Module, s.Addr}
			if seen[kk] {
				continue
			}
			seen[kk] = true
			matched = append(matched, k.describe(i))
		}
		if hits == 0 {
			return nil, k.noMatch(raw, p, excludes)
		}
		if len(matched) == 0 {
			continue // every match came with an earlier pattern
		}
		// Exact names prefer the exact symbol over suffixed copies when both exist.
		if p.Exact {
			var exact []*Func
			for _, f := range matched {
				if f.Name == p.Glob {
					exact = append(exact, f)
				}
			}
			if len(exact) > 0 && len(exact) < len(matched) {
				matched = exact
			}
			for _, f := range matched {
				if f.Name != p.Glob {
					res.Notes = append(res.Notes, fmt.Sprintf("%s: traced as compiler copy %s", p.Glob, f.Name))
				}
			}
		}
		var ok []*Func
		for _, f := range matched {
			if why := f.Skip[mode]; why != "" {
				if p.Exact && len(matched) == 1 {
					return nil, fmt.Errorf("%w: %s in %s mode: %s", ErrUntraceable, f.Display(), mode, why)
				}
				res.Skipped = append(res.Skipped, f)
				res.Reasons[reasonClass(why)]++
				continue
			}
			ok = append(ok, f)
		}
		if p.Exact && len(ok) == 0 {
			return nil, fmt.Errorf("%w: %s in %s mode: %s", ErrUntraceable, matched[0].Display(), mode, matched[0].Skip[mode])
		}
		if IsTrampolineMode(mode) {
			ok = k.dedupeForFentry(ok, res)
		}
		res.Funcs = append(res.Funcs, ok...)
	}
	if len(res.Funcs) == 0 {
		return nil, fmt.Errorf("%w: no traceable function matches %s in %s mode (%s)", ErrUntraceable, strings.Join(patterns, " "), mode, res.SkipSummary())
	}
	if maxFuncs > 0 && len(res.Funcs) > maxFuncs {
		return nil, fmt.Errorf("%w: %s matches %d functions, more than --max-functions %d", ErrTooMany, strings.Join(patterns, " "), len(res.Funcs), maxFuncs)
	}
	for i, f := range res.Funcs {
		f.ID = uint32(i)
	}
	return res, nil
}

// dedupeForFentry keeps one address per BTF name: the kernel resolves a
// fentry target by BTF id and then by kallsyms name, which finds one copy.
func (k *Kernel) dedupeForFentry(fs []*Func, res *Resolution) []*Func {
	by := map[string][]*Func{}
	var order []string
	for _, f := range fs {
		kk := f.Name + "\x00" + f.Module
		if _, ok := by[kk]; !ok {
			order = append(order, kk)
		}
		by[kk] = append(by[kk], f)
	}
	var out []*Func
	for _, kk := range order {
		g := by[kk]
		out = append(out, g[0])
		if len(g) > 1 {
			var addrs []string
			for _, f := range g {
				addrs = append(addrs, fmt.Sprintf("%s@%#x", f.Name, f.Addr))
			}
			res.Notes = append(res.Notes, fmt.Sprintf("%s is ambiguous (%d copies: %s); the trampoline modes attach by BTF id to the one the kernel resolves; kprobe.session and kprobe.multi+kretprobe.multi trace all copies", g[0].Display(), len(g), strings.Join(addrs, ", ")))
		}
	}
	return out
}

func reasonClass(why string) string {
	if i := strings.Index(why, " ("); i > 0 {
		return why[:i]
	}
	return why
}

// Describe returns the Func of k.Syms[i] with its per-mode verdicts (what
// Match gives for that symbol).
func (k *Kernel) Describe(i int) *Func { return k.describe(i) }

// describe builds a Func for symbol i with per-mode skip reasons.
func (k *Kernel) describe(i int) *Func {
	s := k.Syms[i]
	f := &Func{Name: s.Name, Module: s.Module, Addr: s.Addr, Skip: map[string]string{}}
	for _, j := range k.byName[s.Name] {
		if k.Syms[j].Module == s.Module {
			f.Copies++
		}
	}
	common := ""
	// A unique name is judged by name; a copy of a duplicated name by its
	// own address (available_filter_functions_addrs, read on first need:
	// generating it costs the kernel tens of seconds under emulation).
	notPatchable := k.Filter != nil && k.Filter[FilterKey{s.Name, s.Module}] == 0
	if f.Copies > 1 {
		if p := k.ftraceLocations(); p != nil {
			notPatchable = !p[i]
		}
	}
	if notPatchable {
		common = "not in available_filter_functions (notrace, inlined or not patchable)"
	}
	if d := Denied(s.Name); d != "" && common == "" {
		common = "deny-listed (" + d + ": tracing it recurses into BPF, ftrace or RCU)"
	}
	if r := k.SelfReached[s.Addr]; r != "" && common == "" {
		common = r
	}
	f.Skip[ModeKprobeSession] = common
	f.Skip[ModeKprobeMulti] = common
	f.Skip[ModeKprobe] = common
	f.Skip[ModeFentryFexit] = common
	if k.BTF != nil {
		name := s.Name
		fn, err := k.BTF(name, s.Module)
		if err != nil && IsSuffixedCopy(name) {
			fn, err = k.BTF(BaseName(name), s.Module)
		}
		if err == nil {
			f.BTFName = fn.Name
			var perr error
			if f.Proto, perr = ProtoFromBTF(fn); perr != nil {
				f.ProtoErr = "BTF cannot describe the prototype: " + perr.Error()
			}
		} else {
			f.ProtoErr = "no BTF prototype: " + err.Error()
		}
	} else {
		f.ProtoErr = "no kernel BTF"
	}
	if f.Proto != nil {
		if name, size := WideStruct(f.Proto); name != "" {
			f.ProtoErr = fmt.Sprintf("struct passed by value (%s, %d bytes) fills two argument registers and shifts the later ones", name, size)
		}
	}
	if f.Proto != nil && IsSuffixedCopy(s.Name) {
		f.ProtoErr = "compiler copy " + s.Name + " has no BTF of its own; the original's prototype may not match its registers"
	}
	if common == "" {
		switch {
		case f.Proto == nil:
			f.Skip[ModeFentryFexit] = "no BTF prototype (fentry needs one)"
		case IsSuffixedCopy(s.Name):
			f.Skip[ModeFentryFexit] = "compiler copy without BTF of its own (" + s.Name + ": the BTF prototype is the original's, whose ABI the copy may not keep)"
		case f.Proto.Varargs:
			f.Skip[ModeFentryFexit] = "varargs prototype (BPF trampolines reject variadic functions)"
		default:
			f.Skip[ModeFentryFexit] = k.shapeVerdict(f.Proto)
			if r := k.resolvedCopy(s.Name); f.Skip[ModeFentryFexit] == "" && f.Copies > 1 && s.Module == "" && r >= 0 && r != i {
				f.Skip[ModeFentryFexit] = fmt.Sprintf("another copy: a trampoline attaches by name to the copy the kernel resolves (%s@%#x, the lowest address), not this one", s.Name, k.Syms[r].Addr)
			}
		}
	}
	if noreturn[BaseName(s.Name)] {
		f.EntryOnly = EntryOnlyNoreturn
	}
	// fsession and the multi links are trampolines too: the same limits.
	for _, m := range []string{ModeFSession, ModeFSessionMulti, ModeFentryMulti} {
		f.Skip[m] = f.Skip[ModeFentryFexit]
		if f.Skip[ModeFentryFexit] == "" && s.Module != "" {
			f.Skip[m] = "module function: ftprobe loads fsession and multi-link programs against vmlinux BTF only (use " + ModeFentryFexit + ")"
		}
	}
	return f
}

// shapeVerdict is "" when k.Limits lets trampolines take a function of
// prototype p, else the reason, naming where the verdict came from.
func (k *Kernel) shapeVerdict(p *Proto) string {
	if k.Limits == nil {
		return ""
	}
	if p.RetStruct {
		if v := k.Limits.StructReturn(p.RetSize); !v.OK {
			return fmt.Sprintf("returns a struct by value (%s, %d bytes; %s)", p.Ret, p.RetSize, v.Source)
		}
	}
	slots, size := ArgSlots(p)
	if size > 0 {
		if v := k.Limits.StructArg(size); !v.OK {
			name := p.StructByValue
			for _, q := range p.Params {
				if q.Kind == ArgStruct && q.Size == size {
					name = q.Name
					break
				}
			}
			return fmt.Sprintf("struct passed by value (%s, %d bytes; %s)", name, size, v.Source)
		}
	}
	if v := k.Limits.Args(slots); !v.OK {
		n := fmt.Sprintf("%d arguments", len(p.Params))
		if slots != len(p.Params) {
			n = fmt.Sprintf("%d arguments in %d registers", len(p.Params), slots)
		}
		return fmt.Sprintf("too many arguments for a trampoline (%s; %s)", n, v.Source)
	}
	return ""
}

// IsTrampolineMode reports whether mode attaches through BPF trampolines
// (fentry+fexit, fsession, fsession.multi, fentry.multi+fexit.multi),
// which target functions by BTF id.
func IsTrampolineMode(mode string) bool {
	return mode == ModeFentryFexit || mode == ModeFSession || mode == ModeFSessionMulti || mode == ModeFentryMulti
}

// suggest names the closest functions to a missing name.
// noMatch is the ErrNoMatch error for pattern raw: every match removed by
// an --exclude, a wildcard that matches nothing, or a name not in kallsyms
// with the closest names.
func (k *Kernel) noMatch(raw string, p Pattern, excludes []string) error {
	n := 0
	for _, s := range k.Syms {
		if p.matches(s, nil) {
			n++
		}
	}
	switch {
	case n > 0:
		var by []string
		for _, e := range excludes {
			if ep, err := ParsePattern(e); err == nil {
				for _, s := range k.Syms {
					if p.matches(s, nil) && ep.matches(s, nil) {
						by = append(by, e)
						break
					}
				}
			}
		}
		return fmt.Errorf("%w %q: it matches %d kallsyms entries, but --exclude %s removed every one", ErrNoMatch, raw, n, strings.Join(by, ","))
	case !p.Exact:
		return fmt.Errorf("%w %q: the pattern matches nothing in kallsyms", ErrNoMatch, raw)
	}
	return fmt.Errorf("%w %q: %s", ErrNoMatch, raw, k.suggest(p.Glob))
}

func (k *Kernel) suggest(name string) string {
	type cand struct {
		n string
		d int
	}
	var best []cand
	seen := map[string]bool{}
	for _, s := range k.Syms {
		if seen[s.Name] || abs(len(s.Name)-len(name)) > 4 {
			continue
		}
		seen[s.Name] = true
		d := EditDistance(name, s.Name)
		if d <= max(2, len(name)/4) {
			best = append(best, cand{s.Name, d})
		}
	}
	sort.Slice(best, func(i, j int) bool { return best[i].d < best[j].d || (best[i].d == best[j].d && best[i].n < best[j].n) })
	if len(best) == 0 {
		return "not in kallsyms"
	}
	var names []string
	for i := 0; i < len(best) && i < 5; i++ {
		names = append(names, best[i].n)
	}
	return "not in kallsyms; did you mean " + strings.Join(names, ", ") + "?"
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// EditDistance is the Levenshtein distance between a and b in bytes: the
// fewest single-byte insertions, deletions and substitutions that turn a
// into b (the "did you mean" suggestions of symbols and expr).
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Match returns every function matching patterns minus excludes, with
// per-mode skip reasons, without deciding a mode (for `ftprobe list`).
func (k *Kernel) Match(patterns, excludes []string) ([]*Func, error) {
	ex, err := parsePatterns(excludes)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []*Func
	for _, raw := range patterns {
		p, err := ParsePattern(raw)
		if err != nil {
			return nil, err
		}
		n := 0
		for i, s := range k.Syms {
			if !p.matches(s, ex) {
				continue
			}
			n++
			if seen[i] {
				continue // came with an earlier pattern
			}
			seen[i] = true
			out = append(out, k.describe(i))
		}
		if n == 0 {
			return nil, k.noMatch(raw, p, excludes)
		}
	}
	return out, nil
}

// ftraceLocations returns the per-symbol ftrace-location flags
// (SetFtraceLocations), reading available_filter_functions_addrs the first
// time when LoadKernel set it up; nil when unknown (judge by name).
func (k *Kernel) ftraceLocations() []bool {
	k.addrsOnce.Do(func() {
		if k.patchable == nil && k.loadAddrs != nil {
			if addrs := k.loadAddrs(); len(addrs) > 0 {
				k.SetFtraceLocations(addrs)
			}
		}
	})
	return k.patchable
}

// MatchFunc reports whether f (a resolved function) matches p: its name
// or glob, module and address, as Resolve matches kallsyms entries.
func (p Pattern) MatchFunc(f *Func) bool {
	return p.matches(Sym{Name: f.Name, Module: f.Module, Addr: f.Addr}, nil)
}
