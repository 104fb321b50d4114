package symbols

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Verdict is whether BPF trampolines (fentry, fexit, fsession and the
// tracing multi links) take one shape of function on a kernel, and where
// that answer came from.
type Verdict struct {
	OK bool
	// Source says where the verdict came from, in words: "the kernel
	// accepted a trial trampoline with 12 arguments (tcp_v4_send_ack)", "the
	// kernel refused a trial trampoline with 13 arguments
	// (ZSTD_buildCTable): EINVAL (...)", or a documented rule and why no
	// trial was made.
	Source string
}

// Limits answers, for the trampoline modes, whether the running kernel
// takes a function of a given shape. The running tool asks the kernel
// itself (internal/trial: one trial load and attach per rule, cached for
// the run); host tests and recorded fixtures use RuleLimits.
type Limits interface {
	// Args is the verdict for a function whose arguments fill n argument
	// slots of 8 bytes (a struct passed by value fills one slot per 8
	// bytes).
	Args(n int) Verdict
	// StructArg is the verdict for a function taking a struct or union of
	// size bytes by value.
	StructArg(size uint32) Verdict
	// StructReturn is the verdict for a function returning a struct or
	// union of size bytes by value.
	StructReturn(size uint32) Verdict
}

// RuleLimits are Limits from a written rule rather than from the kernel:
// MaxArgs argument slots, structs by value up to MaxStruct bytes (0: none),
// struct returns up to MaxStructRet bytes (0: none, the verifier's rule
// through 7.3: btf_distill_func_proto, "return type STRUCT is
// unsupported").
// Rule names the rule in reason texts, e.g. "the documented arm64 limit
// before 6.16".
type RuleLimits struct {
	MaxArgs      int
	MaxStruct    uint32
	MaxStructRet uint32
	Rule         string
}

// Args implements Limits.
func (r RuleLimits) Args(n int) Verdict {
	if r.MaxArgs <= 0 || n <= r.MaxArgs {
		return Verdict{OK: true, Source: fmt.Sprintf("%s: up to %d arguments", r.Rule, r.MaxArgs)}
	}
	return Verdict{Source: fmt.Sprintf("%s: at most %d arguments", r.Rule, r.MaxArgs)}
}

// StructArg implements Limits.
func (r RuleLimits) StructArg(size uint32) Verdict {
	if size <= r.MaxStruct {
		return Verdict{OK: true, Source: fmt.Sprintf("%s: structs by value up to %d bytes", r.Rule, r.MaxStruct)}
	}
	if r.MaxStruct == 0 {
		return Verdict{Source: r.Rule + ": no struct by value"}
	}
	return Verdict{Source: fmt.Sprintf("%s: structs by value up to %d bytes", r.Rule, r.MaxStruct)}
}

// StructReturn implements Limits.
func (r RuleLimits) StructReturn(size uint32) Verdict {
	if size <= r.MaxStructRet {
		return Verdict{OK: true, Source: fmt.Sprintf("%s: struct returns up to %d bytes", r.Rule, r.MaxStructRet)}
	}
	return Verdict{Source: r.Rule + ": no struct return"}
}

// ArgSlots returns the number of 8-byte argument slots p's parameters fill
// in a BPF trampoline's context (a struct or union by value fills one per
// 8 bytes, as the kernel's btf_func_model counts them), and the size in
// bytes of the largest struct or union passed by value (0: none).
func ArgSlots(p *Proto) (slots int, maxStruct uint32) {
	for _, q := range p.Params {
		if q.Kind == ArgStruct {
			slots += int(max(1, (q.Size+7)/8))
			maxStruct = max(maxStruct, q.Size)
			continue
		}
		slots++
	}
	return slots, maxStruct
}

// WideStruct returns the name and size of the first parameter of p passed
// by value as a struct or union larger than 8 bytes (it fills two argument
// slots, so later parameters do not sit at their position), or "", 0.
func WideStruct(p *Proto) (string, uint32) {
	for _, q := range p.Params {
		if q.Kind == ArgStruct && q.Size > 8 {
			return q.Name, q.Size
		}
	}
	return "", 0
}

// Fix says what would make f traceable in mode when f.Skip[mode] refuses
// it, where that is known: another mode that takes it, the original of a
// compiler copy (fentry), or one copy by address (name@ADDRESS). "" when
// mode takes f or nothing is known to help.
func (k *Kernel) Fix(f *Func, mode string) string {
	if f.Skip[mode] == "" {
		return ""
	}
	var hints []string
	if IsSuffixedCopy(f.Name) && IsTrampolineMode(mode) {
		base := BaseName(f.Name)
		for _, j := range k.byName[base] {
			if k.Syms[j].Module == f.Module && f.BTFName == base && k.describe(j).Skip[mode] == "" {
				hints = append(hints, "trace the original "+base+" (its own BTF) in "+mode+" mode")
				break
			}
		}
	}
	var other []string
	for _, m := range Modes {
		if m != mode && f.Skip[m] == "" {
			other = append(other, m)
		}
	}
	if len(other) > 0 {
		pat := f.Name
		if f.Copies > 1 {
			pat = fmt.Sprintf("%s@%#x", f.Name, f.Addr)
		}
		if f.Module != "" {
			pat += " [" + f.Module + "]"
		}
		h := "--mode " + other[0] + " takes it"
		if n := len(other); n > 1 {
			h = "--mode " + strings.Join(other[:n-1], ", ") + " or " + other[n-1] + " takes it"
		}
		if f.Copies > 1 && !IsTrampolineMode(other[0]) {
			h += " (" + pat + " selects this copy only)"
		}
		hints = append(hints, h)
	}
	return strings.Join(hints, "; ")
}

// ParseFilterAddrs reads tracefs available_filter_functions_addrs ("ADDR
// NAME [MODULE]", one per ftrace location, 6.5+) and returns the addresses.
func ParseFilterAddrs(r io.Reader) ([]uint64, error) {
	var out []uint64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		l := sc.Bytes()
		sp := bytes.IndexByte(l, ' ')
		if sp <= 0 {
			continue
		}
		a, err := strconv.ParseUint(string(l[:sp]), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("available_filter_functions_addrs: bad address %q", l[:sp])
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("available_filter_functions_addrs: %w", err)
	}
	return out, nil
}

// SetFtraceLocations marks, per kallsyms symbol, whether it holds one of
// the ftrace locations addrs (an ftrace location sits at or just after the
// symbol's address, before the next symbol), so that a copy of a
// duplicated name is judged by its own address rather than by its name.
// Without it (kernels before 6.5, fixtures) the name's count in
// available_filter_functions decides.
func (k *Kernel) SetFtraceLocations(addrs []uint64) {
	idx := make([]int, len(k.Syms))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return k.Syms[idx[a]].Addr < k.Syms[idx[b]].Addr })
	p := make([]bool, len(k.Syms))
	for _, a := range addrs {
		j := sort.Search(len(idx), func(x int) bool { return k.Syms[idx[x]].Addr > a }) - 1
		if j < 0 {
			continue
		}
		// Symbols sharing that address (aliases) all hold it.
		for at := k.Syms[idx[j]].Addr; j >= 0 && k.Syms[idx[j]].Addr == at; j-- {
			p[idx[j]] = true
		}
	}
	k.patchable = p
}
