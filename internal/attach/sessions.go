package attach

import (
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TrampolineLoader loads the programs of one collection spec with the
// 7.x trampoline attach types (LoadTrampoline), sharing the collection's
// maps. The caller must Close it; programs it returned stay valid.
type TrampolineLoader struct {
	spec *ebpf.CollectionSpec
	coll *ebpf.Collection
	maps map[string]*ebpf.Map
	IDs  *FuncIDs // vmlinux BTF function ids
	// Slots, when set, counts LoadFunc's programs by how their
	// arguments are read (the Tracer's own count).
	Slots *SlotLoads
}

// NewTrampolineLoader creates spec's maps (those in repl are used as they
// are; .rodata takes spec's variables) and reads vmlinux BTF through
// cache (nil: a cache of its own).
func NewTrampolineLoader(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, cache *btf.Cache) (*TrampolineLoader, error) {
	if cache == nil {
		cache = btf.NewCache()
	}
	ids, err := NewFuncIDs(cache)
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
		Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
	}, ebpf.CollectionOptions{MapReplacements: repl, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("create maps: %w", err)
	}
	maps := map[string]*ebpf.Map{}
	for k, v := range coll.Maps {
		maps[k] = v
	}
	for k, v := range repl {
		maps[k] = v
	}
	return &TrampolineLoader{spec: spec, coll: coll, maps: maps, IDs: ids}, nil
}

// Load loads program name as attach type at against target (a vmlinux
// function; MultiTarget for the multi types). The caller must Close the
// program.
func (l *TrampolineLoader) Load(name string, at ebpf.AttachType, target string) (*ebpf.Program, error) {
	ps := l.spec.Programs[name]
	if ps == nil {
		return nil, fmt.Errorf("BPF object lacks program %s", name)
	}
	return LoadTrampoline(ps, at, target, l.maps, l.IDs)
}

// LoadFunc loads program name as attach type at for the one function f
// (fentry and fexit since 5.5, fsession since 7.0), its argument count
// immediate set from f's prototype where the kernel takes it
// (loadForFunc). Errors are the kernel's, wrapped (a verifier refusal as
// *ebpf.VerifierError). The caller must Close the program.
func (l *TrampolineLoader) LoadFunc(name string, at ebpf.AttachType, f *symbols.Func) (*ebpf.Program, error) {
	ps := l.spec.Programs[name]
	if ps == nil {
		return nil, fmt.Errorf("BPF object lacks program %s", name)
	}
	return loadForFunc(ps, f, l.Slots, func(c *ebpf.ProgramSpec) (*ebpf.Program, error) {
		return LoadTrampoline(c, at, f.BTFName, l.maps, l.IDs)
	})
}

// Map returns the collection's map name.
func (l *TrampolineLoader) Map(name string) *ebpf.Map { return l.maps[name] }

// Close frees the maps the loader created (not those passed in repl).
func (l *TrampolineLoader) Close() {
	if l != nil && l.coll != nil {
		l.coll.Close()
	}
}

func (t *Tracer) trampolineLoader(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, cache *btf.Cache) (*TrampolineLoader, error) {
	if t.tramp == nil {
		ld, err := NewTrampolineLoader(spec, repl, cache)
		if err != nil {
			return nil, err
		}
		ld.Slots = &t.slots
		t.tramp = ld
	}
	return t.tramp, nil
}

// openFSession loads and links one fsession program per function (7.0):
// one trampoline program that runs at entry and at exit, where fentry+fexit
// mode needs two.
func (t *Tracer) openFSession(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	if err := CheckAttachType(AttachTraceFSession); err != nil {
		return opts.Kernel.Explain("fsession", describeFuncs(opts.Funcs), err)
	}
	ld, err := t.trampolineLoader(spec, repl, opts.BTF)
	if err != nil {
		return opts.Kernel.Explain("fsession", describeFuncs(opts.Funcs), err)
	}
	raiseNofile(2*len(opts.Funcs) + 256) // 1 program + 1 link per function
	return t.perFunction(opts, func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
		var entryOnly func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error)
		return func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
			if f.EntryOnly != "" {
				if entryOnly == nil { // per worker, made when first needed
					entryOnly = fentryOnly(spec, repl, opts, &t.slots)
				}
				return entryOnly(f)
			}
			if err := opts.stopped(); err != nil {
				return nil, nil, err
			}
			prog, err := ld.LoadFunc("ftp_fsession", AttachTraceFSession, f)
			if err != nil {
				return nil, nil, opts.Kernel.Explain("fsession", f.Display(), err)
			}
			if err := opts.stopped(); err != nil {
				return []*ebpf.Program{prog}, nil, err
			}
			l, err := AttachFSession(prog, opts.cookie(f))
			if err != nil {
				return []*ebpf.Program{prog}, nil, opts.Kernel.Explain("fsession", f.Display(), err)
			}
			return []*ebpf.Program{prog}, []link.Link{l}, nil
		}
	})
}

// multiTargets prepares opts.Funcs for a tracing multi link of attach
// type at (path names it) in mode: the trampoline loader and the functions with
// their BTF ids. Entry-only functions get their own fentry link here
// (fexit.multi and fsession.multi would hook their exit too, which the
// verifier rejects on a noreturn function); a function without a BTF id
// is recorded in Failed. fs is empty when nothing is left for the link
// (err then says why when nothing attached at all).
func (t *Tracer) multiTargets(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options, mode string, at ebpf.AttachType, path Path) (ld *TrampolineLoader, fs []*symbols.Func, idOf map[*symbols.Func]btf.TypeID, err error) {
	if err := CheckAttachType(at); err != nil {
		return nil, nil, nil, opts.Kernel.Explain(string(path), describeFuncs(opts.Funcs), err)
	}
	ld, err = t.trampolineLoader(spec, repl, opts.BTF)
	if err != nil {
		return nil, nil, nil, opts.Kernel.Explain(string(path), describeFuncs(opts.Funcs), err)
	}
	var entryOnly []*symbols.Func
	idOf = map[*symbols.Func]btf.TypeID{}
	for _, f := range opts.Funcs {
		if f.EntryOnly != "" {
			entryOnly = append(entryOnly, f)
			continue
		}
		id, err := ld.IDs.ID(f.BTFName)
		if err != nil {
			t.Failed = append(t.Failed, Failure{f, fmt.Errorf("%s in %s mode: %w", f.Display(), mode, err)})
			continue
		}
		idOf[f] = id
		fs = append(fs, f)
	}
	if len(entryOnly) > 0 {
		eo := opts
		eo.Funcs, eo.Progress = entryOnly, nil
		err := t.perFunction(eo, func() func(*symbols.Func) ([]*ebpf.Program, []link.Link, error) {
			return fentryOnly(spec, repl, opts, &t.slots)
		})
		if len(fs) == 0 {
			return ld, nil, idOf, err
		}
	}
	if len(fs) == 0 {
		return ld, nil, idOf, t.Failed[0].Err
	}
	return ld, fs, idOf, nil
}

// tryMulti returns the attach of prog (a tracing multi program of type at)
// to a set of functions, for Bisect.
func tryMulti(prog *ebpf.Program, at ebpf.AttachType, idOf map[*symbols.Func]btf.TypeID, opts Options) func([]*symbols.Func) (link.Link, error) {
	return func(set []*symbols.Func) (link.Link, error) {
		tids := make([]btf.TypeID, len(set))
		cookies := make([]uint64, len(set))
		for i, f := range set {
			tids[i], cookies[i] = idOf[f], opts.cookie(f)
		}
		return AttachTracingMulti(prog, at, tids, cookies)
	}
}

// openFSessionMulti attaches all functions with one fsession.multi link
// (7.x): one program run at entry and at exit. A refused function is
// found by bisection, as for kprobe.multi.
func (t *Tracer) openFSessionMulti(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	ld, fs, idOf, err := t.multiTargets(spec, repl, opts, ModeFSessionMulti, AttachTraceFSessionMulti, PathFSessionMulti)
	if len(fs) == 0 {
		return err
	}
	prog, err := ld.Load(progFSessionMulti, AttachTraceFSessionMulti, MultiTarget)
	if err != nil {
		return opts.Kernel.Explain("fsession.multi", describeFuncs(fs), err)
	}
	t.progs = append(t.progs, prog)
	good, bad, l, err := Bisect(opts.ctx, fs, tryMulti(prog, AttachTraceFSessionMulti, idOf, opts))
	if err != nil {
		return opts.Kernel.Explain("fsession.multi", describeFuncs(fs), err)
	}
	t.links = append(t.links, l)
	t.addMultiResult(good, bad, "fsession.multi", opts)
	multiProgress(opts)
	return nil
}

// openFentryMulti attaches all functions with one fentry.multi and one
// fexit.multi link (7.x). A refused function is found by bisection, as
// for kprobe.multi.
func (t *Tracer) openFentryMulti(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	ld, fs, idOf, err := t.multiTargets(spec, repl, opts, ModeFentryMulti, AttachTraceFEntryMulti, PathFentryMulti)
	if len(fs) == 0 {
		return err
	}
	entry, err := ld.Load(progFEntryMulti, AttachTraceFEntryMulti, MultiTarget)
	if err != nil {
		return opts.Kernel.Explain("fentry.multi", describeFuncs(fs), err)
	}
	t.progs = append(t.progs, entry)
	exit, err := ld.Load(progFExitMulti, AttachTraceFExitMulti, MultiTarget)
	if err != nil {
		return opts.Kernel.Explain("fexit.multi", describeFuncs(fs), err)
	}
	t.progs = append(t.progs, exit)
	good, bad, el, err := Bisect(opts.ctx, fs, tryMulti(entry, AttachTraceFEntryMulti, idOf, opts))
	if err != nil {
		return opts.Kernel.Explain("fentry.multi", describeFuncs(fs), err)
	}
	t.links = append(t.links, el)
	xl, err := tryMulti(exit, AttachTraceFExitMulti, idOf, opts)(good)
	if err != nil {
		return opts.Kernel.Explain("fexit.multi", describeFuncs(good), err)
	}
	t.links = append(t.links, xl)
	t.addMultiResult(good, bad, "fentry.multi", opts)
	multiProgress(opts)
	return nil
}

// addMultiResult records the outcome of a bisected multi link (kprobe.multi,
// the tracing multi links): the refused functions explained, the rest attached.
func (t *Tracer) addMultiResult(good []*symbols.Func, bad []Failure, mode string, opts Options) {
	for _, b := range bad {
		t.Failed = append(t.Failed, Failure{b.Func, opts.Kernel.Explain(mode, b.Func.Display(), b.Err)})
	}
	t.Attached = append(t.Attached, good...)
	sort.Slice(t.Attached, func(i, j int) bool { return t.Attached[i].ID < t.Attached[j].ID })
}

// multiProgress reports a multi link's functions attached at once.
func multiProgress(opts Options) {
	if opts.Progress != nil {
		opts.Progress(len(opts.Funcs), len(opts.Funcs))
	}
}

// fentryOnly returns a worker that attaches the plain fentry program
// (ftp_fentry, event mode fentry) to one entry-only function: fsession and
// the tracing multi links run the function's exit too, which the verifier
// rejects on a noreturn function (kernel/bpf/verifier.c noreturn_deny).
func fentryOnly(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options, slots *SlotLoads) func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
	local := spec.Copy()
	return func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
		prog, err := loadForFunc(spec.Programs["ftp_fentry"], f, slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
			local.Programs["ftp_fentry"] = ps
			return opts.loadUnlessStopped(local, "ftp_fentry", repl)
		})
		if err != nil {
			return nil, nil, opts.Kernel.Explain("fentry", f.Display()+" (entry only: "+f.EntryOnly+")", err)
		}
		if err := opts.stopped(); err != nil {
			return []*ebpf.Program{prog}, nil, err
		}
		l, err := LinkFunc(prog, ebpf.AttachTraceFEntry, opts.cookie(f))
		if err != nil {
			return []*ebpf.Program{prog}, nil, opts.Kernel.Explain("fentry", f.Display()+" (entry only: "+f.EntryOnly+")", err)
		}
		return []*ebpf.Program{prog}, []link.Link{l}, nil
	}
}
