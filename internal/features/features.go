// Package features finds which attach modes work on the running kernel by
// really loading and attaching a trivial counting program to a safe
// function, and explains each failure.
package features

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
)

// Modes probed, in report order.
var Modes = []string{"fentry", "fexit", "fsession", "fentry.multi", "fexit.multi", "fsession.multi", "kprobe.multi", "kretprobe.multi", "kprobe.session", "kprobe", "kretprobe", "tp_btf"}

// Target is the function the probes attach to: present and traceable on
// every kernel ftprobe supports (5.6+), and not on a hot path.
const Target = "do_sys_openat2"

// Result is one mode's verdict.
type Result struct {
	Mode   string `json:"mode"`
	Works  bool   `json:"works"`
	Reason string `json:"reason,omitempty"` // why not, in words
	Class  string `json:"class,omitempty"`  // "unsupported", "privilege" or "error"
}

// Report is the whole `ftprobe features` answer.
type Report struct {
	Release      string            `json:"release"`
	Arch         string            `json:"arch"`
	Emulated     string            `json:"emulated,omitempty"`
	VmlinuxBTF   bool              `json:"vmlinux_btf"`
	ModuleBTF    int               `json:"module_btf"` // modules with BTF in /sys/kernel/btf
	Tracefs      bool              `json:"tracefs_mounted"`
	Lockdown     string            `json:"lockdown"`
	Capabilities []string          `json:"capabilities"`
	ConfigSource string            `json:"config_source,omitempty"`
	Config       map[string]string `json:"config"`
	Modes        []Result          `json:"modes"`
	Hint         string            `json:"hint,omitempty"`
}

// Probe builds the report. It attaches briefly to Target in each mode and
// detaches before returning.
func Probe(kin *kfeat.Info) *Report {
	r := &Report{Release: kin.Release, Arch: kin.Arch, Emulated: kin.Emulated, Tracefs: kfeat.TracefsMounted(),
		Lockdown: kfeat.Lockdown(), Capabilities: kfeat.CapNames(), ConfigSource: kin.ConfigAt, Config: map[string]string{}}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err == nil {
		r.VmlinuxBTF = true
	}
	if ents, err := os.ReadDir("/sys/kernel/btf"); err == nil {
		r.ModuleBTF = max(len(ents)-1, 0)
	}
	for _, k := range kfeat.ConfigKeys {
		r.Config[k] = kin.ConfigValue(k)
	}
	for _, m := range Modes {
		res := Result{Mode: m, Works: true}
		if err := probe(m); err != nil {
			reason, class := kin.Reason(m, err)
			res.Works, res.Reason = false, reason
			switch {
			case errors.Is(class, kfeat.ErrUnsupported):
				res.Class = "unsupported"
			case errors.Is(class, kfeat.ErrPrivilege):
				res.Class = "privilege"
			default:
				res.Class = "error"
			}
		}
		r.Modes = append(r.Modes, res)
	}
	if !r.Tracefs {
		r.Hint = "tracefs is not mounted: mount -t tracefs tracefs /sys/kernel/tracing"
	}
	if !r.Works("fentry") && !r.Works("kprobe.multi") && !r.Works("kprobe") {
		if r.Hint != "" {
			r.Hint += "; "
		}
		r.Hint += "no attach mode works on this kernel: run ftprobe in the lab, e.g. `ftprobe vm --kernel debian:7.3 --arch arm64 -- features`"
	}
	return r
}

// Works reports whether mode works.
func (r *Report) Works(mode string) bool {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m.Works
		}
	}
	return false
}

// Get returns mode's result.
func (r *Report) Get(mode string) Result {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m
		}
	}
	return Result{Mode: mode}
}

// trampoline7 are the Linux 7.x trampoline modes: program and attach type.
var trampoline7 = map[string]struct {
	prog string
	at   ebpf.AttachType
}{
	"fsession":       {"count_fsession", attach.AttachTraceFSession},
	"fentry.multi":   {"count_fentry", attach.AttachTraceFEntryMulti},
	"fexit.multi":    {"count_fexit", attach.AttachTraceFExitMulti},
	"fsession.multi": {"count_fsession", attach.AttachTraceFSessionMulti},
}

// probe7 loads and attaches a 7.x trampoline mode with ftprobe's own
// loader (internal/attach/tracingmulti.go).
func probe7(spec *ebpf.CollectionSpec, mode string) error {
	t := trampoline7[mode]
	if err := attach.CheckAttachType(t.at); err != nil {
		return err
	}
	ld, err := attach.NewTrampolineLoader(spec, nil)
	if err != nil {
		return err
	}
	defer ld.Close()
	target := attach.MultiTarget
	if mode == "fsession" {
		target = Target
	}
	p, err := ld.Load(t.prog, t.at, target)
	if err != nil {
		return err
	}
	defer p.Close()
	var l link.Link
	if mode == "fsession" {
		l, err = attach.AttachFSession(p, 0)
	} else {
		var id btf.TypeID
		if id, err = ld.IDs.ID(Target); err != nil {
			return err
		}
		l, err = attach.AttachTracingMulti(p, t.at, []btf.TypeID{id}, []uint64{0})
	}
	if err != nil {
		return err
	}
	return l.Close()
}

func probe(mode string) error {
	spec, err := bpfobj.LoadBench()
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	if _, ok := trampoline7[mode]; ok {
		return probe7(spec, mode)
	}
	prog := map[string]string{
		"fentry": "count_fentry", "fexit": "count_fexit", "kprobe.multi": "count_kmulti",
		"kretprobe.multi": "count_kretmulti", "kprobe.session": "count_ksession",
		"kprobe": "count_kprobe", "kretprobe": "count_kretprobe", "tp_btf": "count_tp_btf",
	}[mode]
	ps := spec.Programs[prog]
	if strings.HasPrefix(mode, "f") {
		ps.AttachTo = Target
	}
	coll := &ebpf.CollectionSpec{Maps: spec.Maps, Programs: map[string]*ebpf.ProgramSpec{prog: ps}, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder}
	c, err := ebpf.NewCollection(coll)
	if err != nil {
		return err
	}
	defer c.Close()
	p := c.Programs[prog]
	var l link.Link
	switch mode {
	case "fentry", "fexit", "tp_btf":
		l, err = link.AttachTracing(link.TracingOptions{Program: p})
	case "kprobe.multi":
		l, err = link.KprobeMulti(p, link.KprobeMultiOptions{Symbols: []string{Target}})
	case "kretprobe.multi":
		l, err = link.KretprobeMulti(p, link.KprobeMultiOptions{Symbols: []string{Target}})
	case "kprobe.session":
		l, err = link.KprobeMulti(p, link.KprobeMultiOptions{Symbols: []string{Target}, Session: true})
	case "kprobe":
		l, err = link.Kprobe(Target, p, nil)
	case "kretprobe":
		l, err = link.Kretprobe(Target, p, nil)
	}
	if err != nil {
		return err
	}
	return l.Close()
}
