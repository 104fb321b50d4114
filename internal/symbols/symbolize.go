package symbols

import (
	"fmt"
	"os"
	"sort"
	"strconv"
)

// Symbolizer turns kernel text addresses (stack frames) into
// "name+0xOFF" with " [module]" for modules, BPF programs (bpf_prog_*) and
// trampolines (bpf_trampoline_*, module "bpf"), from /proc/kallsyms text
// symbols. Results are cached per address. It is not safe for concurrent
// use.
type Symbolizer struct {
	syms  []Sym // sorted by address
	cache map[uint64]string
}

// NewSymbolizer indexes syms (kallsyms text symbols, any order).
func NewSymbolizer(syms []Sym) *Symbolizer {
	s := make([]Sym, len(syms))
	copy(s, syms)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Addr < s[j].Addr })
	return &Symbolizer{syms: s, cache: map[uint64]string{}}
}

// LoadSymbolizer reads /proc/kallsyms now: call it after the programs are
// loaded and attached so their bpf_prog_* and bpf_trampoline_* symbols
// exist.
func LoadSymbolizer() (*Symbolizer, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("symbolize stacks: %w", err)
	}
	defer f.Close()
	syms, err := ParseKallsyms(f)
	if err != nil {
		return nil, fmt.Errorf("symbolize stacks: %w", err)
	}
	return NewSymbolizer(syms), nil
}

// maxSymbolSize bounds how far past a symbol's start an address is still
// attributed to it (kallsyms has no sizes; the last symbol of a region
// would otherwise swallow everything above it).
const maxSymbolSize = 1 << 20

// Symbolize returns "name+0xOFF" (" [module]" appended outside vmlinux)
// for a stack address, or "0xADDR" when no symbol covers it. The lookup
// uses addr-1, like the kernel's %pB for return addresses, so a call at
// the very end of a function is attributed to it and not to the next one;
// an address that is exactly a symbol's start is that symbol (a kprobe's
// pc at function entry is the first frame of its stack).
func (s *Symbolizer) Symbolize(addr uint64) string {
	if r, ok := s.cache[addr]; ok {
		return r
	}
	r := s.lookup(addr)
	s.cache[addr] = r
	return r
}

func (s *Symbolizer) lookup(addr uint64) string {
	q := addr - 1
	i := sort.Search(len(s.syms), func(i int) bool { return s.syms[i].Addr > q }) - 1
	if i+1 < len(s.syms) && s.syms[i+1].Addr == addr {
		i++
	}
	if i < 0 || addr == 0 || addr-s.syms[i].Addr > maxSymbolSize {
		return "0x" + strconv.FormatUint(addr, 16)
	}
	sym := s.syms[i]
	r := sym.Name + "+0x" + strconv.FormatUint(addr-sym.Addr, 16)
	if sym.Module != "" {
		r += " [" + sym.Module + "]"
	}
	return r
}
