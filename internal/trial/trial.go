// Package trial measures what BPF trampolines take on the running kernel:
// instead of a per-architecture constant, it loads and attaches an empty
// fentry and fexit program (bpf/bench.bpf.c's counting programs) to a real
// function of the running kernel with the shape in question (N argument
// slots, a struct of S bytes by value), once per rule and run, and keeps
// the answer. Where no trial can be made (no privilege, fentry unsupported,
// no function of that shape) it falls back to the documented rule
// (kfeat.Info.DocumentedTrampolineLimits) and says so.
package trial

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Baseline is the function the first trial attaches to: if fentry and
// fexit fail on it, no trial can tell anything about a function's shape.
const Baseline = "do_sys_openat2"

// Generic bounds that order the trials (never a verdict by themselves):
// MAX_BPF_FUNC_ARGS (include/linux/bpf.h, 12) and the verifier's largest
// struct by value (kernel/bpf/btf.c, 16 bytes). Up to FloorArgs argument
// slots every trampoline takes (the x86-64 and arm64 argument registers).
const (
	maxFuncArgs   = 12
	maxStructSize = 16
	// FloorArgs argument slots every BPF trampoline takes on every
	// architecture ftprobe supports (6 argument registers on x86-64, 8 on
	// arm64); no trial is made for them.
	FloorArgs = 6
)

// Record is one trial: the rule, the shape tried, the function, the
// outcome and how long the load and attach took.
type Record struct {
	Rule  string        `json:"rule"` // "args" or "struct"
	Shape int           `json:"shape"`
	Func  string        `json:"function"`
	OK    bool          `json:"ok"`
	Err   string        `json:"error,omitempty"` // the kernel's answer, in words
	Took  time.Duration `json:"took_ns"`
}

// AttachFunc loads and attaches an empty fentry and fexit program to the
// vmlinux function fn, then detaches them; it returns the kernel's error.
type AttachFunc func(fn string) error

// Limits is symbols.Limits measured on the running kernel. Safe for
// concurrent use.
type Limits struct {
	kin      *kfeat.Info
	k        *symbols.Kernel
	attach   AttachFunc
	funcs    func() ([]*btf.Func, error)
	fallback symbols.RuleLimits
	real     bool // attach loads programs into the running kernel

	mu      sync.Mutex
	started bool
	noTrial string // why no trial can be made ("" = trials work)
	args    bound
	structs bound
	rets    bound
	argCand map[int][]string    // argument slots (no struct) -> functions
	strCand map[uint32][]string // largest struct size (slots <= FloorArgs) -> functions
	retCand map[int][]string    // struct return size (no struct argument, slots <= FloorArgs) -> functions
	trials  []Record
}

// bound is what trials proved for one monotonic rule: every shape up to
// ok.n is taken, every shape from bad.n on is refused.
type bound struct {
	ok, bad struct {
		n      int
		fn, ex string
	}
}

// Options replace the real kernel in tests: Attach instead of loading
// programs, Funcs instead of reading the kernel's BTF.
type Options struct {
	Attach AttachFunc
	Funcs  func() ([]*btf.Func, error)
}

// New returns Limits for the kernel kin describes, choosing trial functions
// from k. opts may be nil (the real kernel).
func New(kin *kfeat.Info, k *symbols.Kernel, opts *Options) *Limits {
	n, st, rule := kin.DocumentedTrampolineLimits()
	l := &Limits{kin: kin, k: k, attach: AttachEmpty, real: true, funcs: kernelFuncs, fallback: symbols.RuleLimits{MaxArgs: n, MaxStruct: st, Rule: rule}}
	if opts != nil && opts.Attach != nil {
		l.attach, l.real = opts.Attach, false
	}
	if opts != nil && opts.Funcs != nil {
		l.funcs = opts.Funcs
	}
	return l
}

// LoadKernel is symbols.LoadKernel with Limits measured on the running
// kernel. Errors: those of symbols.LoadKernel.
func LoadKernel(kin *kfeat.Info) (*symbols.Kernel, *Limits, error) {
	k, err := symbols.LoadKernel(kin.Arch, nil)
	if err != nil {
		return nil, nil, err
	}
	l := New(kin, k, nil)
	k.Limits = l
	return k, l, nil
}

// Trials returns the trials made so far, in order.
func (l *Limits) Trials() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.trials...)
}

// NoTrial says why no trial could be made ("" when trials work or none was
// needed yet).
func (l *Limits) NoTrial() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noTrial
}

// Args implements symbols.Limits: n argument slots.
func (l *Limits) Args(n int) symbols.Verdict {
	if n <= FloorArgs {
		return symbols.Verdict{OK: true, Source: fmt.Sprintf("every BPF trampoline takes %d arguments", FloorArgs)}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.decide("args", n, &l.args, l.fallback.Args, func() map[int][]string { return l.argCand }, maxFuncArgs)
}

// StructArg implements symbols.Limits: a struct of size bytes by value.
func (l *Limits) StructArg(size uint32) symbols.Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	cands := func() map[int][]string {
		m := map[int][]string{}
		for s, fs := range l.strCand {
			m[int(s)] = fs
		}
		return m
	}
	return l.decide("struct", int(size), &l.structs, func(n int) symbols.Verdict { return l.fallback.StructArg(uint32(n)) }, cands, maxStructSize)
}

// StructReturn implements symbols.Limits: a struct of size bytes returned
// by value.
func (l *Limits) StructReturn(size uint32) symbols.Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.decide("return", int(size), &l.rets, func(n int) symbols.Verdict { return l.fallback.StructReturn(uint32(n)) }, func() map[int][]string { return l.retCand }, maxStructSize)
}

func shapeWords(rule string, n int) string {
	switch rule {
	case "args":
		return fmt.Sprintf("%d arguments", n)
	case "return":
		return fmt.Sprintf("a %d-byte struct returned by value", n)
	}
	return fmt.Sprintf("a %d-byte struct by value", n)
}

// decide answers for shape n of rule from the bound, making trials until
// the bound covers n. limit orders the trials: up to it, the largest shape
// not above it is tried first (one acceptance covers every smaller shape);
// above it, the smallest.
func (l *Limits) decide(rule string, n int, b *bound, fallback func(int) symbols.Verdict, candsOf func() map[int][]string, limit int) symbols.Verdict {
	for range 8 {
		if b.ok.n >= n {
			return symbols.Verdict{OK: true, Source: fmt.Sprintf("the kernel accepted a trial trampoline with %s (%s)", shapeWords(rule, b.ok.n), b.ok.fn)}
		}
		if b.bad.n > 0 && b.bad.n <= n {
			return symbols.Verdict{Source: fmt.Sprintf("the kernel refused a trial trampoline with %s (%s): %s", shapeWords(rule, b.bad.n), b.bad.fn, b.bad.ex)}
		}
		if why := l.start(); why != "" {
			v := fallback(n)
			v.Source += "; no trial: " + why
			return v
		}
		cands := candsOf()
		lo, hi := b.ok.n+1, n // shapes not yet known
		if b.bad.n > 0 {
			hi = min(hi, b.bad.n-1)
		}
		pick := -1
		switch {
		case n <= limit && b.bad.n == 0:
			// The largest shape in [n, limit]: one acceptance covers
			// every smaller shape.
			for s := limit; s >= n && pick < 0; s-- {
				if len(cands[s]) > 0 {
					pick = s
				}
			}
		case n <= limit:
			// After a refusal: n itself, or the smallest shape above it.
			for s := n; s < b.bad.n && pick < 0; s++ {
				if len(cands[s]) > 0 {
					pick = s
				}
			}
		default:
			for s := max(lo, limit+1); s <= hi && pick < 0; s++ {
				if len(cands[s]) > 0 {
					pick = s
				}
			}
		}
		if pick < 0 {
			// Nothing of a shape that decides n: the nearest shapes below
			// and above n narrow the bound; n itself stays undecided.
			for s := n; s <= n+8 && pick < 0; s++ {
				if len(cands[s]) > 0 && (b.bad.n == 0 || s < b.bad.n) {
					pick = s
				}
			}
			if pick < 0 {
				v := fallback(n)
				v.Source += fmt.Sprintf("; no trial: this kernel has no traceable function with %s to try", shapeWords(rule, n))
				return v
			}
		}
		fn := cands[pick][0]
		t0 := time.Now()
		err := l.attach(fn)
		rec := Record{Rule: rule, Shape: pick, Func: fn, OK: err == nil, Took: time.Since(t0)}
		if err != nil {
			rec.Err = l.words(err)
			if b.bad.n == 0 || pick < b.bad.n {
				b.bad.n, b.bad.fn, b.bad.ex = pick, fn, rec.Err
			}
		} else if pick > b.ok.n {
			b.ok.n, b.ok.fn = pick, fn
		}
		l.trials = append(l.trials, rec)
	}
	v := fallback(n)
	v.Source += "; no trial decided it"
	return v
}

// start makes the baseline trial once and collects candidates; it returns
// why trials cannot be made, or "".
func (l *Limits) start() string {
	if l.started {
		return l.noTrial
	}
	l.started = true
	if l.attach == nil {
		l.noTrial = "no trial loader"
		return l.noTrial
	}
	if !kfeat.HasTracingCaps() && l.real {
		l.noTrial = "trials need CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)"
		return l.noTrial
	}
	t0 := time.Now()
	err := l.attach(Baseline)
	rec := Record{Rule: "baseline", Shape: 0, Func: Baseline, OK: err == nil, Took: time.Since(t0)}
	if err != nil {
		rec.Err = l.words(err)
		l.noTrial = "fentry and fexit on " + Baseline + " fail here (" + rec.Err + ")"
	}
	l.trials = append(l.trials, rec)
	if l.noTrial != "" {
		return l.noTrial
	}
	if err := l.collect(); err != nil {
		l.noTrial = "no candidate functions: " + err.Error()
	}
	return l.noTrial
}

// collect lists, per shape, vmlinux functions a trial may use: in
// available_filter_functions once, one kallsyms copy, not deny-listed, not
// noreturn, no compiler suffix, a BTF prototype without varargs. Functions
// of one shape are sorted by name, so every run tries the same one.
func (l *Limits) collect() error {
	fs, err := l.funcs()
	if err != nil {
		return err
	}
	l.argCand, l.strCand, l.retCand = map[int][]string{}, map[uint32][]string{}, map[int][]string{}
	for _, fn := range fs {
		fp, ok := fn.Type.(*btf.FuncProto)
		if !ok {
			continue
		}
		_, retStruct := btf.UnderlyingType(fp.Return).(*btf.Struct)
		if _, u := btf.UnderlyingType(fp.Return).(*btf.Union); u {
			retStruct = true
		}
		if len(fp.Params) <= FloorArgs && !hasStruct(fp) && !retStruct {
			continue // shapes every trampoline takes
		}
		name := fn.Name
		if symbols.IsSuffixedCopy(name) || symbols.Denied(name) != "" || symbols.IsNoreturn(name) {
			continue
		}
		if l.k.Filter[symbols.FilterKey{Name: name}] != 1 || l.k.Copies(name, "") != 1 {
			continue
		}
		p, err := symbols.ProtoFromBTF(fn)
		if err != nil || p.Varargs {
			continue
		}
		slots, size := symbols.ArgSlots(p)
		switch {
		case p.RetStruct:
			if size == 0 && slots <= FloorArgs {
				l.retCand[int(p.RetSize)] = append(l.retCand[int(p.RetSize)], name)
			}
		case size == 0:
			l.argCand[slots] = append(l.argCand[slots], name)
		case slots <= FloorArgs:
			l.strCand[size] = append(l.strCand[size], name)
		}
	}
	for _, v := range l.argCand {
		sort.Strings(v)
	}
	for _, v := range l.strCand {
		sort.Strings(v)
	}
	for _, v := range l.retCand {
		sort.Strings(v)
	}
	return nil
}

func hasStruct(fp *btf.FuncProto) bool {
	for _, p := range fp.Params {
		switch btf.UnderlyingType(p.Type).(type) {
		case *btf.Struct, *btf.Union:
			return true
		}
	}
	return false
}

// words is the kernel's answer in words: the errno's name, and the
// verifier's last line when the load failed.
func (l *Limits) words(err error) string {
	var parts []string
	var errno unix.Errno
	if errors.As(err, &errno) {
		parts = append(parts, kfeat.ErrnoName(errno))
	} else if errors.Is(err, ebpf.ErrNotSupported) {
		// cilium/ebpf turns the kernel's ENOTSUPP (524, what the arch
		// trampoline code returns for a shape it cannot build) into
		// ErrNotSupported without the errno.
		parts = append(parts, "ENOTSUPP")
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		for i := len(ve.Log) - 1; i >= 0; i-- {
			if s := strings.TrimSpace(ve.Log[i]); s != "" && !strings.Contains(s, "processed") && !strings.HasPrefix(s, "verification time") {
				parts = append(parts, "at load, the verifier said: "+s)
				break
			}
		}
	} else if len(parts) > 0 && strings.Contains(err.Error(), "attach") {
		parts[0] += " at attach"
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return strings.Join(parts, ", ")
}

// kernelFuncs lists the FUNC types of the running kernel's vmlinux BTF.
func kernelFuncs() ([]*btf.Func, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("load vmlinux BTF: %w", err)
	}
	var out []*btf.Func
	for t := range spec.All() {
		if fn, ok := t.(*btf.Func); ok {
			out = append(out, fn)
		}
	}
	return out, nil
}

// AttachEmpty loads bench.bpf.c's count_fentry and count_fexit against the
// function fn (a kallsyms name the kernel resolves through its BTF),
// attaches both (ftprobe's fentry+fexit mode pairs them), and detaches. It
// returns the kernel's error, wrapped with the step that failed.
func AttachEmpty(fn string) error { return attachEmpty(fn, true) }

// AttachEmptyEntry is AttachEmpty with the fentry program only: what
// ftprobe attaches to a function traced at entry only (one that never
// returns).
func AttachEmptyEntry(fn string) error { return attachEmpty(fn, false) }

func attachEmpty(fn string, exit bool) error {
	spec, err := bpfobj.LoadBench()
	if err != nil {
		return fmt.Errorf("trial on %s: load BPF object: %w", fn, err)
	}
	paths := []attach.Path{attach.PathFentry}
	if exit {
		paths = append(paths, attach.PathFexit)
	}
	// Through the attach layer, as trace attaches: each path loaded,
	// then linked; all detached before returning.
	var pps []*attach.PathProbe
	defer func() {
		for _, pp := range pps {
			pp.Close()
		}
	}()
	for _, p := range paths {
		pp, err := attach.OpenPath(context.Background(), p, attach.PathOptions{Spec: spec, Program: attach.CountingProgram[p],
			Funcs: []*symbols.Func{{Name: fn, BTFName: fn}}})
		if err != nil {
			return fmt.Errorf("trial on %s: %w", fn, err)
		}
		pps = append(pps, pp)
	}
	return nil
}
