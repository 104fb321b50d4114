// Package features finds which attach paths work on the running kernel by
// really loading and attaching a trivial counting program to a safe
// function, and explains each failure.
package features

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Paths probed, in report order: every attach path of attach.Paths but
// raw_tp (a tracepoint on every syscall, not a function).
var Paths = func() []string {
	var ms []string
	for _, p := range attach.Paths {
		if p.Path != attach.PathRawTP {
			ms = append(ms, string(p.Path))
		}
	}
	return ms
}()

// Target is the function the probes attach to: present and traceable on
// every kernel ftprobe supports (5.6+), and not on a hot path.
const Target = "do_sys_openat2"

// Result is one attach path's verdict.
type Result struct {
	Path   string `json:"path"`
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
	Paths        []Result          `json:"paths"`
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
	for _, m := range Paths {
		res := Result{Path: m, Works: true}
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
		r.Paths = append(r.Paths, res)
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
	for _, m := range r.Paths {
		if m.Path == mode {
			return m.Works
		}
	}
	return false
}

// Get returns mode's result.
func (r *Report) Get(mode string) Result {
	for _, m := range r.Paths {
		if m.Path == mode {
			return m
		}
	}
	return Result{Path: mode}
}

// probe attaches the counting program of path to Target through the
// attach layer (attach.OpenPath, the constructors trace and compare use)
// and detaches it.
func probe(path string) error {
	spec, err := bpfobj.LoadBench()
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	p := attach.Path(path)
	o := attach.PathOptions{Spec: spec, Program: attach.CountingProgram[p]}
	if p != attach.PathTPBTF {
		o.Funcs = []*symbols.Func{{Name: Target, BTFName: Target}}
	}
	pp, err := attach.OpenPath(context.Background(), p, o)
	if err != nil {
		return errors.Unwrap(err) // the kernel's error, without OpenPath's "path on func" prefix (Reason names both)
	}
	pp.Close()
	return nil
}
