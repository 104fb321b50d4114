package attach

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// verifyOnly loads every program opts.Mode would attach, per function
// where the program is bound to one, and attaches nothing (DryRun).
func (t *Tracer) verifyOnly(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	keep := func(p *ebpf.Program) {
		t.progs = append(t.progs, p)
		t.Verified++
	}
	plain := func(mode string, fs []*symbols.Func, names ...string) error {
		for _, n := range names {
			p, err := loadWithMaps(spec, n, repl, opts.BTF)
			if err != nil {
				return opts.Kernel.Explain(mode, describeFuncs(fs), err)
			}
			keep(p)
		}
		return nil
	}
	fentry := func(fs []*symbols.Func) error {
		local := spec.Copy()
		cache := opts.BTF
		for _, f := range fs {
			for _, n := range []string{"ftp_fentry", "ftp_fexit"} {
				if n == "ftp_fexit" && f.EntryOnly != "" {
					break
				}
				p, err := loadForFunc(spec.Programs[n], f, &t.slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
					local.Programs[n] = ps
					return loadWithMaps(local, n, repl, cache)
				})
				if err != nil {
					return opts.Kernel.Explain(strings.TrimPrefix(n, "ftp_"), f.Display(), err)
				}
				keep(p)
			}
		}
		return nil
	}
	trampolines := func(mode string, fs []*symbols.Func) error {
		ld, err := t.trampolineLoader(spec, repl, opts.BTF)
		if err != nil {
			return opts.Kernel.Explain(mode, describeFuncs(fs), err)
		}
		load := func(name string, at ebpf.AttachType, target, what string) error {
			p, err := ld.Load(name, at, target)
			if err != nil {
				return opts.Kernel.Explain(mode, what, err)
			}
			keep(p)
			return nil
		}
		if mode == ModeFSession {
			if err := CheckAttachType(AttachTraceFSession); err != nil {
				return opts.Kernel.Explain("fsession", describeFuncs(fs), err)
			}
			for _, f := range fs {
				if f.EntryOnly != "" {
					if err := fentry([]*symbols.Func{f}); err != nil {
						return err
					}
					continue
				}
				p, err := ld.LoadFunc("ftp_fsession", AttachTraceFSession, f)
				if err != nil {
					return opts.Kernel.Explain(mode, f.Display(), err)
				}
				keep(p)
			}
			return nil
		}
		var eo []*symbols.Func
		for _, f := range fs {
			if f.EntryOnly != "" {
				eo = append(eo, f)
			}
		}
		if err := fentry(eo); err != nil {
			return err
		}
		if err := CheckAttachType(AttachTraceFEntryMulti); err != nil {
			return opts.Kernel.Explain("fentry.multi", describeFuncs(fs), err)
		}
		if mode == ModeFSessionMulti {
			if err := CheckAttachType(AttachTraceFSessionMulti); err != nil {
				return opts.Kernel.Explain("fsession.multi", describeFuncs(fs), err)
			}
			return load(progFSessionMulti, AttachTraceFSessionMulti, MultiTarget, describeFuncs(fs))
		}
		if err := load(progFEntryMulti, AttachTraceFEntryMulti, MultiTarget, describeFuncs(fs)); err != nil {
			return err
		}
		return load(progFExitMulti, AttachTraceFExitMulti, MultiTarget, describeFuncs(fs))
	}
	switch opts.Mode {
	case ModeFentryFexit:
		return fentry(opts.Funcs)
	case ModeKprobeSession:
		return plain("kprobe.session", opts.Funcs, "ftp_ksession")
	case ModeKprobeMulti:
		return plain("kprobe.multi", opts.Funcs, "ftp_kmulti", "ftp_kretmulti")
	case ModeKprobe:
		return plain("kprobe", opts.Funcs, "ftp_kprobe", "ftp_kretprobe")
	case ModeFSession, ModeFSessionMulti, ModeFentryMulti:
		return trampolines(opts.Mode, opts.Funcs)
	case ModeMixed:
		return t.verifyMixed(spec, repl, opts)
	}
	return fmt.Errorf("attach: unknown mode %q (want %s)", opts.Mode, strings.Join(symbols.Modes, ", "))
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
	if err := t.verifyOnly(spec, repl, o); err != nil || len(opts.MultiFuncs) == 0 {
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
