package attach

// path.go: the one place below cmd/ that creates links. Every attach path
// ftprobe uses has one constructor here (LinkFunc, LinkKprobeMulti,
// LinkKprobe, LinkRawTracepoint, plus AttachFSession and
// AttachTracingMulti in tracingmulti.go), and OpenPath puts a program of
// one path on a set of functions in phases (load, then attach, then
// close). `trace` (Open), `compare` (internal/bench) and `features` all go
// through them, so the benchmark measures the links trace makes.

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Path is one kernel attach path, spelled as the kernel's documentation
// and `ftprobe features` spell it ("kprobe.multi"); a trace mode is one
// path or two joined by '+' ("kprobe.multi+kretprobe.multi").
type Path string

// The attach paths. Minimum kernels from the merge that added each:
// fentry/fexit 5.5 (commit fec56f5890d9), tp_btf 5.5, raw_tp 4.17,
// kprobe.multi/kretprobe.multi 5.18 (commit 0dcac2725406), kprobe.session
// 6.10 (commit 535a3692ba72), fsession 7.0 and the tracing multi types 7.x
// (tracingmulti.go), kprobe/kretprobe through perf_event_open (4.1 for
// BPF programs).
const (
	PathFentry         Path = "fentry"
	PathFexit          Path = "fexit"
	PathFSession       Path = "fsession"
	PathFentryMulti    Path = "fentry.multi"
	PathFexitMulti     Path = "fexit.multi"
	PathFSessionMulti  Path = "fsession.multi"
	PathKprobeMulti    Path = "kprobe.multi"
	PathKretprobeMulti Path = "kretprobe.multi"
	PathKprobeSession  Path = "kprobe.session"
	PathKprobe         Path = "kprobe"
	PathKretprobe      Path = "kretprobe"
	PathTPBTF          Path = "tp_btf"
	PathRawTP          Path = "raw_tp"
)

// PathInfo describes one attach path: what the kernel calls it, how the
// program is loaded and linked, and since when.
type PathInfo struct {
	Path Path
	// AttachType is the program's expected attach type (0 for the
	// kprobe family, whose type is chosen by the link).
	AttachType ebpf.AttachType
	// Trampoline is true for the paths reached through a BPF trampoline
	// (an ftrace direct call); false for fprobe, kprobes and tracepoints.
	Trampoline bool
	// Multi is true when one link covers many functions.
	Multi bool
	// MinKernel is the first release with the path (see the constants).
	MinKernel string
}

// Paths lists every attach path in `ftprobe features` report order.
var Paths = []PathInfo{
	{PathFentry, ebpf.AttachTraceFEntry, true, false, "5.5"},
	{PathFexit, ebpf.AttachTraceFExit, true, false, "5.5"},
	{PathFSession, AttachTraceFSession, true, false, "7.0"},
	{PathFentryMulti, AttachTraceFEntryMulti, true, true, "7.x"},
	{PathFexitMulti, AttachTraceFExitMulti, true, true, "7.x"},
	{PathFSessionMulti, AttachTraceFSessionMulti, true, true, "7.x"},
	{PathKprobeMulti, ebpf.AttachTraceKprobeMulti, false, true, "5.18"},
	{PathKretprobeMulti, ebpf.AttachTraceKprobeMulti, false, true, "5.18"},
	{PathKprobeSession, ebpf.AttachTraceKprobeSession, false, true, "6.10"},
	{PathKprobe, 0, false, false, "4.1"},
	{PathKretprobe, 0, false, false, "4.1"},
	{PathTPBTF, ebpf.AttachTraceRawTp, false, false, "5.5"},
	{PathRawTP, 0, false, false, "4.17"},
}

// PathByName returns the attach path spelled s, ok false when there is
// none.
func PathByName(s string) (PathInfo, bool) {
	for _, p := range Paths {
		if string(p.Path) == s {
			return p, true
		}
	}
	return PathInfo{}, false
}

// LoadProgram loads the program name of spec alone, with its target
// (fentry, fexit, tp_btf) set to attachTo when that is not "", the maps
// of repl used instead of new ones, and kernel BTF from cache (nil: read
// it). The caller must Close the program. Errors are the verifier's or
// the kernel's, wrapped.
func LoadProgram(spec *ebpf.CollectionSpec, name, attachTo string, repl map[string]*ebpf.Map, cache *btf.Cache) (*ebpf.Program, error) {
	ps, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("load %s: no such program in the BPF object", name)
	}
	if attachTo != "" {
		ps = ps.Copy()
		ps.AttachTo = attachTo
	}
	maps := programMaps(spec, ps)
	used := map[string]*ebpf.Map{}
	for k, m := range repl {
		if maps[k] != nil {
			used[k] = m
		}
	}
	coll := &ebpf.CollectionSpec{Maps: maps, Programs: map[string]*ebpf.ProgramSpec{name: ps}, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder}
	c, err := ebpf.NewCollectionWithOptions(coll, ebpf.CollectionOptions{MapReplacements: used, Cache: cache})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p := c.DetachProgram(name)
	if p == nil {
		return nil, fmt.Errorf("load %s: program missing after load", name)
	}
	return p, nil
}

// programMaps returns the maps of spec that ps references (its map loads;
// cilium/ebpf flattens BPF-to-BPF callees into ps at ELF load) and the
// data sections holding spec's variables: what loading ps alone needs.
// The others (another program's maps: the bench object's timed body's
// task storage, say) are neither created nor freed for it.
func programMaps(spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec) map[string]*ebpf.MapSpec {
	out := map[string]*ebpf.MapSpec{}
	for _, ins := range ps.Instructions {
		if ref := ins.Reference(); ref != "" && spec.Maps[ref] != nil {
			out[ref] = spec.Maps[ref]
		}
	}
	for _, v := range spec.Variables {
		if m := spec.Maps[v.SectionName]; m != nil {
			out[v.SectionName] = m
		}
	}
	return out
}

// LinkFunc links a loaded fentry, fexit or tp_btf program to the function
// (or tracepoint) it was loaded for, with cookie (bpf_get_attach_cookie;
// 0 for none). With at set the link is a BPF_LINK_CREATE tracing link
// (cookies need it, 6.0+), falling back to BPF_RAW_TRACEPOINT_OPEN on
// EINVAL; with ebpf.AttachNone it is BPF_RAW_TRACEPOINT_OPEN (5.5+). The
// caller must Close the link.
func LinkFunc(p *ebpf.Program, at ebpf.AttachType, cookie uint64) (link.Link, error) {
	return link.AttachTracing(link.TracingOptions{Program: p, AttachType: at, Cookie: cookie})
}

// LinkKprobeMulti links a kprobe.multi program to fs through one fprobe:
// at entry, at return (ret, kretprobe.multi) or both (session,
// kprobe.session, 6.10+). Functions are given by address when every one
// has one (duplicate names resolved by the caller), by name otherwise;
// cookies, when not nil, go one per function. The caller must Close the
// link. Minimum kernel 5.18.
func LinkKprobeMulti(p *ebpf.Program, fs []*symbols.Func, cookies []uint64, ret, session bool) (link.Link, error) {
	o := link.KprobeMultiOptions{Cookies: cookies, Session: session}
	byAddr := true
	for _, f := range fs {
		if f.Addr == 0 {
			byAddr = false
		}
	}
	for _, f := range fs {
		if byAddr {
			o.Addresses = append(o.Addresses, uintptr(f.Addr))
		} else {
			o.Symbols = append(o.Symbols, f.Name)
		}
	}
	return linkMulti(p, o, ret)
}

// linkMulti is LinkKprobeMulti with the options built: the one call of
// link.KprobeMulti and link.KretprobeMulti in ftprobe.
func linkMulti(p *ebpf.Program, o link.KprobeMultiOptions, ret bool) (link.Link, error) {
	if ret {
		return link.KretprobeMulti(p, o)
	}
	return link.KprobeMulti(p, o)
}

// LinkKprobe links a kprobe program to the function named sym through
// perf_event_open, at entry or, with ret, at return (a kretprobe), with
// cookie. The caller must Close the link. Minimum kernel 4.1; a cookie
// needs 5.15.
func LinkKprobe(p *ebpf.Program, sym string, ret bool, cookie uint64) (link.Link, error) {
	ko := &link.KprobeOptions{Cookie: cookie}
	if ret {
		return link.Kretprobe(sym, p, ko)
	}
	return link.Kprobe(sym, p, ko)
}

// LinkRawTracepoint links a raw_tp program to the tracepoint name
// (e.g. "sys_enter"). The caller must Close the link. Minimum kernel
// 4.17.
func LinkRawTracepoint(p *ebpf.Program, name string) (link.Link, error) {
	return link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: p})
}

// PathOptions says what OpenPath loads and where it attaches it.
type PathOptions struct {
	// Spec holds Program, a program of the path's type.
	Spec    *ebpf.CollectionSpec
	Program string
	// Funcs are the functions to attach to; for tp_btf and raw_tp,
	// Tracepoint is the target instead (tp_btf: "" keeps the program's
	// own section target).
	Funcs      []*symbols.Func
	Tracepoint string
	// Maps replace the spec's maps of the same name (e.g. a shared
	// counter).
	Maps map[string]*ebpf.Map
	// BTF is the kernel BTF cache (nil: read it per load).
	BTF *btf.Cache
}

// PathProbe is one program of one attach path on a set of functions,
// opened by OpenPath: loaded (LoadTime), attached (AttachTime). Close
// detaches and unloads it.
type PathProbe struct {
	Path       Path
	LoadTime   time.Duration
	AttachTime time.Duration
	// Trampolines is the number of BPF trampolines it made (the
	// trampoline paths: one per function).
	Trampolines int
	progs       []*ebpf.Program
	links       []link.Link
	loaders     []*TrampolineLoader
}

// OpenPath loads o.Program and attaches it by path to o.Funcs (or
// o.Tracepoint) in two timed phases: every program is loaded before the
// first link is made. ctx is checked between functions: a cancelled
// attach returns ctx's error. On any error nothing stays attached or
// loaded; the error names the path and the function. The caller must
// Close the probe.
func OpenPath(ctx context.Context, path Path, o PathOptions) (*PathProbe, error) {
	info, ok := PathByName(string(path))
	if !ok {
		return nil, fmt.Errorf("attach path %q: unknown", path)
	}
	pp := &PathProbe{Path: path}
	var err error
	switch path {
	case PathFentry, PathFexit, PathTPBTF:
		err = pp.openPerTarget(ctx, o)
	case PathFSession, PathFentryMulti, PathFexitMulti, PathFSessionMulti:
		err = pp.openTrampolines(ctx, info, o)
	case PathKprobeMulti, PathKretprobeMulti, PathKprobeSession, PathKprobe, PathKretprobe, PathRawTP:
		err = pp.openOneProgram(ctx, o)
	}
	if err != nil {
		pp.Close()
		return nil, err
	}
	return pp, nil
}

// pathError names the phase ("load" or "attach"), the path and the
// target: trial tells an attach refusal from a load refusal by it.
func (pp *PathProbe) pathError(phase, target string, err error) error {
	if target != "" {
		return fmt.Errorf("%s %s on %s: %w", phase, pp.Path, target, err)
	}
	return fmt.Errorf("%s %s: %w", phase, pp.Path, err)
}

// describe names o's functions for an error of one link on all of them.
func (o PathOptions) describe() string {
	if len(o.Funcs) == 1 {
		return o.Funcs[0].Display()
	}
	return fmt.Sprintf("%d functions", len(o.Funcs))
}

// openPerTarget is OpenPath of fentry and fexit (one program per
// function) and tp_btf (one program on o.Tracepoint).
func (pp *PathProbe) openPerTarget(ctx context.Context, o PathOptions) error {
	t0 := time.Now()
	targets, names := []string{o.Tracepoint}, []string{o.Tracepoint}
	if pp.Path != PathTPBTF {
		targets, names = targets[:0], names[:0]
		for _, f := range o.Funcs {
			targets, names = append(targets, f.BTFName), append(names, f.Display())
		}
	}
	for i, tgt := range targets {
		if err := ctx.Err(); err != nil {
			return pp.pathError("load", "", err)
		}
		p, err := LoadProgram(o.Spec, o.Program, tgt, o.Maps, o.BTF)
		if err != nil {
			return pp.pathError("load", names[i], err)
		}
		pp.progs = append(pp.progs, p)
	}
	pp.LoadTime = time.Since(t0)
	t1 := time.Now()
	for i, p := range pp.progs {
		if err := ctx.Err(); err != nil {
			return pp.pathError("attach", "", err)
		}
		// No attach type: BPF_RAW_TRACEPOINT_OPEN, as before
		// tracing links took cookies (the verdicts of
		// `features` stay those of the oldest kernel's path).
		l, err := LinkFunc(p, ebpf.AttachNone, 0)
		if err != nil {
			return pp.pathError("attach", names[i], err)
		}
		pp.links = append(pp.links, l)
	}
	pp.AttachTime = time.Since(t1)
	if pp.Path != PathTPBTF {
		pp.Trampolines = len(pp.links)
	}
	return nil
}

// openTrampolines is OpenPath of the trampoline paths loaded by a
// TrampolineLoader: fsession (one program per function) and the tracing
// multi links (one program and one link for all functions).
func (pp *PathProbe) openTrampolines(ctx context.Context, info PathInfo, o PathOptions) error {
	t0 := time.Now()
	if err := CheckAttachType(info.AttachType); err != nil {
		return pp.pathError("load", "", err)
	}
	ld, err := NewTrampolineLoader(o.Spec, o.Maps, o.BTF)
	if err != nil {
		return pp.pathError("load", "", err)
	}
	pp.loaders = append(pp.loaders, ld)
	if pp.Path == PathFSession {
		for _, f := range o.Funcs {
			if err := ctx.Err(); err != nil {
				return pp.pathError("load", "", err)
			}
			p, err := ld.Load(o.Program, info.AttachType, f.BTFName)
			if err != nil {
				return pp.pathError("load", f.Display(), err)
			}
			pp.progs = append(pp.progs, p)
		}
		pp.LoadTime = time.Since(t0)
		t1 := time.Now()
		for i, p := range pp.progs {
			if err := ctx.Err(); err != nil {
				return pp.pathError("attach", "", err)
			}
			l, err := AttachFSession(p, 0)
			if err != nil {
				return pp.pathError("attach", o.Funcs[i].Display(), err)
			}
			pp.links = append(pp.links, l)
		}
		pp.AttachTime = time.Since(t1)
		pp.Trampolines = len(pp.links)
		return nil
	}
	p, err := ld.Load(o.Program, info.AttachType, MultiTarget)
	if err != nil {
		return pp.pathError("load", "", err)
	}
	pp.progs = append(pp.progs, p)
	ids := make([]btf.TypeID, len(o.Funcs))
	for i, f := range o.Funcs {
		if ids[i], err = ld.IDs.ID(f.BTFName); err != nil {
			return pp.pathError("load", f.Display(), err)
		}
	}
	pp.LoadTime = time.Since(t0)
	t1 := time.Now()
	l, err := AttachTracingMulti(p, info.AttachType, ids, make([]uint64, len(ids)))
	if err != nil {
		return pp.pathError("attach", o.describe(), err)
	}
	pp.links = append(pp.links, l)
	pp.AttachTime = time.Since(t1)
	pp.Trampolines = len(o.Funcs)
	return nil
}

// openOneProgram is OpenPath of the paths that load one program for all
// functions: the fprobe links (one link), kprobe and kretprobe (one link
// per function) and raw_tp (one link on o.Tracepoint).
func (pp *PathProbe) openOneProgram(ctx context.Context, o PathOptions) error {
	t0 := time.Now()
	p, err := LoadProgram(o.Spec, o.Program, "", o.Maps, o.BTF)
	if err != nil {
		return pp.pathError("load", "", err)
	}
	pp.progs = append(pp.progs, p)
	pp.LoadTime = time.Since(t0)
	t1 := time.Now()
	switch pp.Path {
	case PathKprobeMulti, PathKretprobeMulti, PathKprobeSession:
		l, err := LinkKprobeMulti(p, o.Funcs, nil, pp.Path == PathKretprobeMulti, pp.Path == PathKprobeSession)
		if err != nil {
			return pp.pathError("attach", o.describe(), err)
		}
		pp.links = append(pp.links, l)
	case PathKprobe, PathKretprobe:
		for _, f := range o.Funcs {
			if err := ctx.Err(); err != nil {
				return pp.pathError("attach", "", err)
			}
			l, err := LinkKprobe(p, f.Name, pp.Path == PathKretprobe, 0)
			if err != nil {
				return pp.pathError("attach", f.Display(), err)
			}
			pp.links = append(pp.links, l)
		}
	case PathRawTP:
		l, err := LinkRawTracepoint(p, o.Tracepoint)
		if err != nil {
			return pp.pathError("attach", o.Tracepoint, err)
		}
		pp.links = append(pp.links, l)
	}
	pp.AttachTime = time.Since(t1)
	return nil
}

// Links is the number of links the probe holds.
func (pp *PathProbe) Links() int { return len(pp.links) }

// Programs is the number of programs the probe loaded.
func (pp *PathProbe) Programs() int { return len(pp.progs) }

// Memlock is the kernel memory its programs are charged (bytes, from
// bpf_prog_info; 0 where the kernel does not say).
func (pp *PathProbe) Memlock() uint64 {
	var n uint64
	for _, p := range pp.progs {
		if pi, err := p.Info(); err == nil {
			if m, ok := pi.Memlock(); ok {
				n += m
			}
		}
	}
	return n
}

// Detach closes the links (the programs stay loaded until Close) and
// returns how long that took. Safe to call more than once.
func (pp *PathProbe) Detach() time.Duration {
	t := time.Now()
	for _, l := range pp.links {
		l.Close()
	}
	pp.links = nil
	return time.Since(t)
}

// Close detaches and unloads everything the probe holds. Safe to call
// more than once and on a nil probe.
func (pp *PathProbe) Close() {
	if pp == nil {
		return
	}
	pp.Detach()
	for _, p := range pp.progs {
		p.Close()
	}
	pp.progs = nil
	for _, ld := range pp.loaders {
		ld.Close()
	}
	pp.loaders = nil
}

// CountingProgram is the program of the bench object (bpf/bench.bpf.c)
// that counts hits for each attach path: what `features` attaches to
// judge a path and `compare` measures as the empty body.
var CountingProgram = map[Path]string{
	PathFentry: bpfobj.BenchProgCountFentry, PathFexit: bpfobj.BenchProgCountFexit,
	PathFSession: bpfobj.BenchProgCountFsession, PathFentryMulti: bpfobj.BenchProgCountFentry,
	PathFexitMulti: bpfobj.BenchProgCountFexit, PathFSessionMulti: bpfobj.BenchProgCountFsession,
	PathKprobeMulti: bpfobj.BenchProgCountKmulti, PathKretprobeMulti: bpfobj.BenchProgCountKretmulti,
	PathKprobeSession: bpfobj.BenchProgCountKsession, PathKprobe: bpfobj.BenchProgCountKprobe,
	PathKretprobe: bpfobj.BenchProgCountKretprobe, PathTPBTF: bpfobj.BenchProgCountTpBtf,
	PathRawTP: bpfobj.BenchProgCountRawTp,
}

// TimedProgram is the program of the bench object (bpf/bench.bpf.c) that
// counts hits and takes the two timestamps of a duration for each attach
// path of a timed pair or session: `compare`'s timed body, the floor
// under every body that measures durations. The session paths need the
// session kfuncs' ctx prototype (7.0).
var TimedProgram = map[Path]string{
	PathFentry: bpfobj.BenchProgTimedFentry, PathFexit: bpfobj.BenchProgTimedFexit,
	PathFSession: bpfobj.BenchProgTimedFsession, PathFSessionMulti: bpfobj.BenchProgTimedFsession,
	PathKprobeMulti: bpfobj.BenchProgTimedKmulti, PathKretprobeMulti: bpfobj.BenchProgTimedKretmulti,
	PathKprobeSession: bpfobj.BenchProgTimedKsession, PathKprobe: bpfobj.BenchProgTimedKprobe,
	PathKretprobe: bpfobj.BenchProgTimedKretprobe,
}

// TraceMode is one `trace --mode` (and `stat --mode`): its name, which
// is its kernel attach paths joined by '+', the paths it links, and the
// event code its records carry (enum ftp_mode, generated into bpfobj;
// events.ModeName gives it the mode's name). Each mode is one way of
// attaching: a kernel without it refuses the mode (auto then tries the
// next, trace.autoOrder).
type TraceMode struct {
	Name  string
	Paths []Path
	Event uint8
	// MinKernel is the first release where ftprobe's programs run in the
	// mode: its paths' newest, or later where the programs need more
	// (kprobe.session: the link is 6.10, the session kfuncs on ctx the
	// program calls are 7.0).
	MinKernel string
}

// TraceModes is the registry of trace modes, in `trace --mode` order
// (after auto; symbols.Modes holds the same names in the same order for
// the packages below this one). The two vocabularies meet here: a trace
// mode ("kprobe.multi+kretprobe.multi") is one or two kernel attach paths
// ("kprobe.multi" with "kretprobe.multi").
var TraceModes = []TraceMode{
	{ModeFentryFexit, []Path{PathFentry, PathFexit}, EventModeFentry, "5.5"},
	{ModeFSession, []Path{PathFSession}, EventModeFSession, "7.0"},
	{ModeFSessionMulti, []Path{PathFSessionMulti}, EventModeFSessionMulti, "7.x"},
	{ModeFentryMulti, []Path{PathFentryMulti, PathFexitMulti}, EventModeFentryMulti, "7.x"},
	{ModeKprobeSession, []Path{PathKprobeSession}, EventModeKprobeSession, "7.0"},
	{ModeKprobeMulti, []Path{PathKprobeMulti, PathKretprobeMulti}, EventModeKprobeMulti, "5.18"},
	{ModeKprobe, []Path{PathKprobe, PathKretprobe}, EventModeKprobe, "4.1"},
}

// TraceModeByName returns the trace mode called name, ok false when there
// is none.
func TraceModeByName(name string) (TraceMode, bool) {
	for _, m := range TraceModes {
		if m.Name == name {
			return m, true
		}
	}
	return TraceMode{}, false
}

// ModesThrough returns the trace modes that attach the way path p does:
// every mode whose first path has p's trampoline and multi kinds, when
// some mode links p itself (fentry: fentry+fexit and fsession;
// kprobe.multi: kprobe.session and kprobe.multi+kretprobe.multi); none for
// a path no mode links (tp_btf, raw_tp).
func ModesThrough(p Path) []string {
	info, ok := PathByName(string(p))
	if !ok {
		return nil
	}
	used := false
	for _, m := range TraceModes {
		for _, q := range m.Paths {
			used = used || q == p
		}
	}
	if !used {
		return nil
	}
	var out []string
	for _, m := range TraceModes {
		first, _ := PathByName(string(m.Paths[0]))
		if first.Trampoline == info.Trampoline && first.Multi == info.Multi {
			out = append(out, m.Name)
		}
	}
	return out
}
