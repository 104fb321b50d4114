package symbols

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/btf"
)

// Fixture file names inside a recorded directory.
const (
	FixtureKallsyms = "kallsyms"
	FixtureFilter   = "available_filter_functions"
	FixtureMeta     = "meta.json"
	// FixtureBTFDir holds one BTF blob per object: "vmlinux" and one per
	// module, each standalone (structs reduced to name and size).
	FixtureBTFDir = "btf"
)

// RecordedMeta describes a recorded fixture set.
type RecordedMeta struct {
	Arch    string `json:"arch"`
	Release string `json:"release"`
	MaxArgs int    `json:"max_args"`
	// MaxStruct is the largest struct by value the recorded rule let
	// trampolines take (0: none, what fixtures recorded before trials).
	MaxStruct uint32              `json:"max_struct,omitempty"`
	Rules     map[string][]string `json:"rules"` // rule -> selected base names (documentation)
}

// LoadRecorded builds a Kernel from a fixture set written by RecordSymbols:
// its kallsyms, available_filter_functions and a BTF lookup over its blobs,
// with the recorded architecture and trampoline argument limit.
func LoadRecorded(dir string) (*Kernel, *RecordedMeta, error) {
	mj, err := os.ReadFile(filepath.Join(dir, FixtureMeta))
	if err != nil {
		return nil, nil, fmt.Errorf("fixture meta: %w", err)
	}
	meta := &RecordedMeta{}
	if err := json.Unmarshal(mj, meta); err != nil {
		return nil, nil, fmt.Errorf("fixture meta %s: %w", dir, err)
	}
	ks, err := os.Open(filepath.Join(dir, FixtureKallsyms))
	if err != nil {
		return nil, nil, fmt.Errorf("fixture kallsyms: %w", err)
	}
	defer ks.Close()
	syms, err := ParseKallsyms(ks)
	if err != nil {
		return nil, nil, err
	}
	ff, err := os.Open(filepath.Join(dir, FixtureFilter))
	if err != nil {
		return nil, nil, fmt.Errorf("fixture available_filter_functions: %w", err)
	}
	defer ff.Close()
	filter, err := ParseFilterFunctions(ff)
	if err != nil {
		return nil, nil, err
	}
	specs := map[string]*btf.Spec{}
	ents, err := os.ReadDir(filepath.Join(dir, FixtureBTFDir))
	if err != nil {
		return nil, nil, fmt.Errorf("fixture BTF: %w", err)
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, FixtureBTFDir, e.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("fixture BTF: %w", err)
		}
		spec, err := btf.LoadSpecFromReader(f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("fixture BTF %s: %w", e.Name(), err)
		}
		mod := e.Name()
		if mod == "vmlinux" {
			mod = ""
		}
		specs[mod] = spec
	}
	lookup := func(name, module string) (*btf.Func, error) {
		spec := specs[module]
		if spec == nil {
			return nil, fmt.Errorf("no BTF for module %q: %w", module, btf.ErrNotFound)
		}
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err != nil {
			return nil, err
		}
		return fn, nil
	}
	lim := RuleLimits{MaxArgs: meta.MaxArgs, MaxStruct: meta.MaxStruct, Rule: "the rule recorded with the fixture (" + meta.Arch + " " + meta.Release + ")"}
	k := NewKernel(syms, filter, lookup, meta.Arch, lim)
	k.Spec = func(module string) (*btf.Spec, error) {
		if spec := specs[module]; spec != nil {
			return spec, nil
		}
		return nil, fmt.Errorf("no BTF for module %q: %w", module, btf.ErrNotFound)
	}
	return k, meta, nil
}
