package attach

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// openKprobeMulti attaches opts.Funcs with one kprobe.multi and one
// kretprobe.multi link, the functions the kernel refuses found by
// bisection.
func (t *Tracer) openKprobeMulti(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kmulti"`
		Exit  *ebpf.Program `ebpf:"ftp_kretmulti"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.progs = append(t.progs, p.Entry, p.Exit)
	attach := opts.AttachMulti
	if attach == nil {
		attach = linkMulti
	}
	// Find the functions the kernel refuses, by bisection, on the entry link.
	tryEntry := func(fs []*symbols.Func) (link.Link, error) {
		return attach(p.Entry, opts.multiOpts(fs), false)
	}
	good, bad, entry, err := Bisect(opts.ctx, opts.Funcs, tryEntry)
	if err != nil && len(good) == 0 {
		return opts.Kernel.Explain("kprobe.multi", describeFuncs(opts.Funcs), err)
	}
	t.multi = append(t.multi, entry)
	// Entry-only functions keep the entry link only: a return probe on a
	// function that never returns would never fire.
	if ex := exitFuncs(good); len(ex) > 0 {
		exit, err := attach(p.Exit, opts.multiOpts(ex), true)
		if err != nil {
			return opts.Kernel.Explain("kretprobe.multi", describeFuncs(ex), err)
		}
		t.multi = append(t.multi, exit)
	}
	t.addMultiResult(good, bad, "kprobe.multi", opts)
	return nil
}

// openKprobeSession attaches one kprobe.session link for opts.Funcs (6.10;
// the program needs the 7.0 bpf_session_is_return(ctx)): one program run
// at entry and at return, and a call rejected at entry has no return run
// at all. It fails leaving nothing attached, with the kernel's error
// unexplained (the caller explains it, or uses the pair).
func (t *Tracer) openKprobeSession(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Prog *ebpf.Program `ebpf:"ftp_ksession"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return err
	}
	try := func(fs []*symbols.Func) (link.Link, error) {
		o := opts.multiOpts(fs)
		o.Session = true
		return linkMulti(p.Prog, o, false)
	}
	good, bad, l, err := Bisect(opts.ctx, opts.Funcs, try)
	if err != nil && len(good) == 0 {
		p.Prog.Close()
		return err
	}
	t.progs = append(t.progs, p.Prog)
	t.multi = append(t.multi, l)
	t.addMultiResult(good, bad, "kprobe.session", opts)
	return nil
}

func (t *Tracer) openKprobe(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	var p struct {
		Entry *ebpf.Program `ebpf:"ftp_kprobe"`
		Exit  *ebpf.Program `ebpf:"ftp_kretprobe"`
	}
	if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl, Cache: opts.BTF}); err != nil {
		return opts.Kernel.Explain("kprobe", describeFuncs(opts.Funcs), err)
	}
	t.progs = append(t.progs, p.Entry, p.Exit)
	raiseNofile(2*len(opts.Funcs) + 256)
	var firstUnsupported error
	for i, f := range opts.Funcs {
		if opts.done() {
			break // Open closes what is attached
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(opts.Funcs))
		}
		if f.Copies > 1 {
			t.Failed = append(t.Failed, Failure{f, fmt.Errorf("%s in %s mode: one of %d copies; a kprobe by name reaches only the first (use %s or %s)", f.Display(), ModeKprobe, f.Copies, ModeKprobeSession, ModeKprobeMulti)})
			continue
		}
		in, err := LinkKprobe(p.Entry, f.Name, false, opts.cookie(f))
		if err != nil {
			e := opts.Kernel.Explain("kprobe", f.Display(), err)
			t.Failed = append(t.Failed, Failure{f, e})
			if firstUnsupported == nil && (errors.Is(e, kfeat.ErrUnsupported) || errors.Is(e, kfeat.ErrPrivilege)) {
				firstUnsupported = e
				break
			}
			continue
		}
		t.links = append(t.links, in)
		if f.EntryOnly == "" {
			out, err := LinkKprobe(p.Exit, f.Name, true, opts.cookie(f))
			if err != nil {
				in.Close()
				t.links = t.links[:len(t.links)-1]
				t.Failed = append(t.Failed, Failure{f, opts.Kernel.Explain("kretprobe", f.Display(), err)})
				continue
			}
			t.links = append(t.links, out)
		}
		t.Attached = append(t.Attached, f)
	}
	if len(t.Attached) == 0 {
		if firstUnsupported != nil {
			return firstUnsupported
		}
		if len(t.Failed) > 0 {
			return t.Failed[0].Err
		}
	}
	return nil
}

func describeFuncs(fs []*symbols.Func) string {
	if len(fs) == 1 {
		return fs[0].Display()
	}
	return fmt.Sprintf("%d functions", len(fs))
}

func (opts Options) multiOpts(fs []*symbols.Func) link.KprobeMultiOptions {
	o := link.KprobeMultiOptions{}
	for _, f := range fs {
		o.Addresses = append(o.Addresses, uintptr(f.Addr))
		o.Cookies = append(o.Cookies, opts.cookie(f))
	}
	return o
}
