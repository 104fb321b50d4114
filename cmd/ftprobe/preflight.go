package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// needPrivilege checks, before trace or compare touch the kernel, that the
// tracing capabilities are held, and names every missing one together with
// the missing mounts: an unprivileged container lacks both, and a tracefs
// that is mounted but unreadable without privilege looks unmounted. It
// returns an exit-code-2 error wrapping kfeat.ErrPrivilege, or nil (a
// missing tracefs with privilege is reported later as unsupported, 3).
func needPrivilege(what string) error {
	if kfeat.HasTracingCaps() {
		return nil
	}
	held := kfeat.CapNames()
	has := "none of them"
	if len(held) > 0 {
		has = "only " + strings.Join(held, ", ")
	}
	msg := fmt.Sprintf("needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), has %s; run as root, or the container with --privileged", has)
	if !tracefsMounted() {
		msg += "; tracefs is not mounted either (mount -t tracefs tracefs " + symbols.TracefsPath + ", or -v " + symbols.TracefsPath + ":" + symbols.TracefsPath + " for a container)"
	}
	return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w: %s", what, kfeat.ErrPrivilege, msg))
}

// tracefsMounted reports whether /proc/self/mounts lists a tracefs at
// TracefsPath; unlike kfeat.TracefsMounted it needs no privilege.
func tracefsMounted() bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return kfeat.TracefsMounted()
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == symbols.TracefsPath && f[2] == "tracefs" {
			return true
		}
	}
	return false
}

// symbolsError maps an error of symbols.LoadKernel to its exit code:
// hidden kallsyms addresses are a missing privilege (2), anything else
// (tracefs not mounted, unreadable kallsyms) unsupported here (3).
func symbolsError(what string, err error) error {
	if errors.Is(err, symbols.ErrHiddenAddresses) {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w: %w", what, kfeat.ErrPrivilege, err))
	}
	return exitcode.Wrap(exitcode.Unsupported, err)
}

// checkOutPath checks, before any work, that an output file named by flag
// can be created: its directory exists and is a directory, and path is not
// one ("" and "-" are stdout). The file itself is created only when there
// is something to write.
func checkOutPath(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory", flag, path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// objectEnv is the environment variable that makes compare's trace bodies
// load the general trace object whatever their settings (attach's
// variants measured against it).
const objectEnv = "FTPROBE_OBJECT"

// generalObject reads FTPROBE_OBJECT: "general" loads the general trace
// object, "" or "variant" the variant the settings select; anything else
// is bad input.
func generalObject() (bool, error) {
	switch v := os.Getenv(objectEnv); v {
	case "", "variant":
		return false, nil
	case "general":
		return true, nil
	default:
		return false, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s=%q: want variant or general", objectEnv, v))
	}
}

// specializeEnv is the environment variable that turns the load-time
// specializer off for a run (package specialize).
const specializeEnv = "FTPROBE_SPECIALIZE"

// noSpecialize reads FTPROBE_SPECIALIZE: "off" loads the BPF programs as
// compiled (trace.Options.NoSpecialize), "" or "on" specializes them;
// anything else is bad input.
func noSpecialize() (bool, error) {
	switch v := os.Getenv(specializeEnv); v {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	default:
		return false, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s=%q: want on or off", specializeEnv, v))
	}
}
