package attach

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// verifier loads the programs a mode would attach and keeps them, so the
// kernel verifies each, attaching none (Options.DryRun). It stops between
// functions once Open's context is done.
type verifier struct {
	t    *Tracer
	spec *ebpf.CollectionSpec
	repl map[string]*ebpf.Map
	opts Options
}

// keep holds a verified program until Close.
func (v *verifier) keep(p *ebpf.Program) {
	v.t.progs = append(v.t.progs, p)
	v.t.Verified++
}

// verifyOnly loads every program opts.Mode would attach, per function
// where the program is bound to one, and attaches nothing (DryRun).
func (t *Tracer) verifyOnly(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	v := &verifier{t: t, spec: spec, repl: repl, opts: opts}
	switch opts.Mode {
	case ModeFentryFexit:
		return v.fentry(opts.Funcs)
	case ModeKprobeSession:
		return v.plain("kprobe.session", opts.Funcs, "ftp_ksession")
	case ModeKprobeMulti:
		return v.plain("kprobe.multi", opts.Funcs, "ftp_kmulti", "ftp_kretmulti")
	case ModeKprobe:
		return v.plain("kprobe", opts.Funcs, "ftp_kprobe", "ftp_kretprobe")
	case ModeFSession:
		return v.fsession(opts.Funcs)
	case ModeFSessionMulti, ModeFentryMulti:
		return v.tracingMulti(opts.Mode, opts.Funcs)
	case ModeMixed:
		return t.verifyMixed(spec, repl, opts)
	}
	return fmt.Errorf("attach: unknown mode %q (want %s)", opts.Mode, strings.Join(symbols.Modes, ", "))
}

// plain loads the programs names of a mode that attaches one program to
// every function of fs.
func (v *verifier) plain(mode string, fs []*symbols.Func, names ...string) error {
	for _, n := range names {
		p, err := loadWithMaps(v.spec, n, v.repl, v.opts.BTF)
		if err != nil {
			return v.opts.Kernel.Explain(mode, describeFuncs(fs), err)
		}
		v.keep(p)
	}
	v.t.verifiedFuncs += len(fs)
	return nil
}

// fentry loads ftp_fentry and ftp_fexit for every function of fs
// (ftp_fentry only for an entry-only one).
func (v *verifier) fentry(fs []*symbols.Func) error {
	local := v.spec.Copy()
	for _, f := range fs {
		if v.opts.done() {
			return nil
		}
		for _, n := range []string{"ftp_fentry", "ftp_fexit"} {
			if n == "ftp_fexit" && f.EntryOnly != "" {
				break
			}
			if v.opts.done() {
				return nil
			}
			p, err := loadForFunc(v.spec.Programs[n], f, &v.t.slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
				local.Programs[n] = ps
				return v.opts.loadUnlessStopped(local, n, v.repl)
			})
			if err != nil {
				return v.opts.Kernel.Explain(strings.TrimPrefix(n, "ftp_"), f.Display(), err)
			}
			v.keep(p)
		}
		v.t.verifiedFuncs++
	}
	return nil
}

// loader returns the trampoline loader of mode for fs.
func (v *verifier) loader(mode string, fs []*symbols.Func) (*TrampolineLoader, error) {
	ld, err := v.t.trampolineLoader(v.spec, v.repl, v.opts.BTF)
	if err != nil {
		return nil, v.opts.Kernel.Explain(mode, describeFuncs(fs), err)
	}
	return ld, nil
}

// fsession loads one ftp_fsession per function of fs, ftp_fentry for an
// entry-only one (openFSession).
func (v *verifier) fsession(fs []*symbols.Func) error {
	if err := CheckAttachType(AttachTraceFSession); err != nil {
		return v.opts.Kernel.Explain("fsession", describeFuncs(fs), err)
	}
	ld, err := v.loader(ModeFSession, fs)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if v.opts.done() {
			return nil
		}
		if f.EntryOnly != "" {
			if err := v.fentry([]*symbols.Func{f}); err != nil {
				return err
			}
			continue
		}
		p, err := ld.LoadFunc("ftp_fsession", AttachTraceFSession, f)
		if err != nil {
			return v.opts.Kernel.Explain(ModeFSession, f.Display(), err)
		}
		v.keep(p)
		v.t.verifiedFuncs++
	}
	return nil
}

// tracingMulti loads the programs of a tracing multi mode (fsession.multi,
// fentry.multi+fexit.multi) once for fs, and ftp_fentry for each
// entry-only function (multiTargets).
func (v *verifier) tracingMulti(mode string, fs []*symbols.Func) error {
	ld, err := v.loader(mode, fs)
	if err != nil {
		return err
	}
	load := func(name string, at ebpf.AttachType) error {
		p, err := ld.Load(name, at, MultiTarget)
		if err != nil {
			return v.opts.Kernel.Explain(mode, describeFuncs(fs), err)
		}
		v.keep(p)
		return nil
	}
	var eo []*symbols.Func
	for _, f := range fs {
		if f.EntryOnly != "" {
			eo = append(eo, f)
		}
	}
	if err := v.fentry(eo); err != nil || v.opts.done() {
		return err
	}
	if err := CheckAttachType(AttachTraceFEntryMulti); err != nil {
		return v.opts.Kernel.Explain("fentry.multi", describeFuncs(fs), err)
	}
	if mode == ModeFSessionMulti {
		if err := CheckAttachType(AttachTraceFSessionMulti); err != nil {
			return v.opts.Kernel.Explain("fsession.multi", describeFuncs(fs), err)
		}
		err = load(progFSessionMulti, AttachTraceFSessionMulti)
	} else if err = load(progFEntryMulti, AttachTraceFEntryMulti); err == nil {
		err = load(progFExitMulti, AttachTraceFExitMulti)
	}
	if err == nil {
		v.t.verifiedFuncs += len(fs) - len(eo)
	}
	return err
}

// verifyMixed is verifyOnly of ModeMixed: opts.Funcs in
// opts.MixedTrampoline, then opts.MultiFuncs as openMixed attaches them:
// kprobe.session where its program loads, else the kprobe.multi pair.
func (t *Tracer) verifyMixed(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	tramp := opts.MixedTrampoline
	if tramp == "" {
		tramp = ModeFentryFexit
	}
	t.Mode = tramp
	o := opts
	o.Mode = tramp
	if err := t.verifyOnly(spec, repl, o); err != nil || len(opts.MultiFuncs) == 0 || opts.done() {
		return err
	}
	mo := opts
	mo.Funcs, mo.Mode = opts.MultiFuncs, ModeKprobeSession
	if t.verifyOnly(spec, repl, mo) == nil {
		t.Mode += "+" + ModeKprobeSession
		return nil
	}
	t.Mode += "+" + ModeKprobeMulti
	mo.Mode = ModeKprobeMulti
	return t.verifyOnly(spec, repl, mo)
}
