package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/features"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// modes.go: the mode names each command takes, from the registries
// (attach.TraceModes for trace and stat, bench.HitModes for compare,
// attach.Paths for features), and the one-line error for a name another
// command takes.

// traceModeNames are the names trace and stat --mode take: auto and the
// registry's trace modes.
func traceModeNames() []string {
	return append([]string{trace.ModeAuto}, trace.Modes...)
}

// checkTraceMode is nil when trace and stat take --mode name, else the
// bad-input error: for a name another command takes, what it is there and
// which trace modes do its job; for an unknown one, the modes.
func checkTraceMode(name string) error {
	valid := traceModeNames()
	if slices.Contains(valid, name) {
		return nil
	}
	list := strings.Join(valid, ", ")
	if p, ok := attach.PathByName(name); ok {
		where := "reported by features"
		if slices.Contains(bench.HitModeNames(), name) {
			where = "measured by compare --mode"
		}
		take := "trace and stat attach no mode through it"
		if ms := attach.ModesThrough(p.Path); len(ms) > 0 {
			take = "trace and stat take " + orList(ms)
		}
		return fmt.Errorf("--mode %s: %s is one attach path, %s; %s (modes: %s)", name, name, where, take, list)
	}
	if slices.Contains(bench.HitModeNames(), name) {
		return fmt.Errorf("--mode %s: %s is a compare --mode; trace and stat take %s", name, name, list)
	}
	return fmt.Errorf("--mode %q: want %s", name, list)
}

// checkCompareModes is nil when compare takes every --mode name, else the
// bad-input error for the first it does not: for a trace mode, what it is
// and what compare measures instead; for an unknown name, the modes.
func checkCompareModes(names []string) error {
	valid := bench.HitModeNames()
	list := strings.Join(valid, ", ")
	for _, name := range names {
		if slices.Contains(valid, name) {
			continue
		}
		if name == trace.ModeAuto {
			return fmt.Errorf("--mode auto: auto is a trace and stat mode (the kernel's best attach path); compare measures each attach path or pair by name (modes: %s)", list)
		}
		if m, ok := attach.TraceModeByName(name); ok {
			var paths []string
			for _, p := range m.Paths {
				paths = append(paths, string(p))
			}
			return fmt.Errorf("--mode %s: %s is a trace and stat mode; compare measures its attach paths one by one: %s (modes: %s)", name, name, strings.Join(paths, ", "), list)
		}
		if slices.Contains(features.Modes, name) {
			return fmt.Errorf("--mode %s: %s is one attach path, reported by features; compare does not measure it (modes: %s)", name, name, list)
		}
		return fmt.Errorf("--mode %q: want %s", name, list)
	}
	return nil
}
