package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bench"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// modes.go: the mode names each command takes, from the registries
// (attach.TraceModes for trace and stat, bench.HitModes for compare,
// attach.Paths for features), and trace's one-line error for a name
// another command takes (compare's is bench.ValidModes).

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
