package kfeat

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ErrUnsupported marks an attach mode this kernel lacks (exit code 3).
var ErrUnsupported = errors.New("unsupported on this kernel")

// ErrKernelPredates marks an attach type that the running kernel's BTF does
// not name (enum bpf_attach_type): the kernel is older than the feature.
var ErrKernelPredates = errors.New("attach type unknown to this kernel")

// ErrPrivilege marks missing privilege (exit code 2).
var ErrPrivilege = errors.New("missing privilege")

// enotsupp is the kernel-internal ENOTSUPP (524) that leaks to user space
// from trampoline and fprobe code; it has no libc name.
const enotsupp = unix.Errno(524)

// Reason turns an error from loading or attaching a program in mode
// ("fentry", "fexit", "kprobe.multi", "kretprobe.multi", "kprobe.session",
// "kprobe", "kretprobe", "tp_btf") into a sentence a kernel engineer acts
// on, and classifies it: ErrUnsupported, ErrPrivilege, or nil (a
// function-specific failure). The errno name is kept in parentheses.
func (in *Info) Reason(mode string, err error) (string, error) {
	var errno unix.Errno
	hasErrno := errors.As(err, &errno)
	name := ""
	if hasErrno {
		name = errnoName(errno)
	}
	fprobe := strings.HasPrefix(mode, "kprobe.") || strings.HasPrefix(mode, "kretprobe.")
	if reason := in.fprobeReason(mode, name); fprobe && reason != "" && !(hasErrno && errno == unix.EPERM) {
		return reason, ErrUnsupported
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) && !(hasErrno && errno == unix.EPERM) {
		if os.Getenv("FTPROBE_VERIFIER_LOG") != "" {
			fmt.Fprintf(os.Stderr, "%+v\n", ve)
		}
		last := ""
		if n := len(ve.Log); n > 0 {
			last = strings.TrimSpace(ve.Log[n-1])
			if n > 1 && strings.Contains(last, "processed") {
				last = strings.TrimSpace(ve.Log[n-2])
			}
		}
		if strings.Contains(last, "unknown func") || strings.Contains(last, "invalid func") {
			return "this kernel lacks a BPF helper ftprobe's " + mode + " program needs (" + last + ")", ErrUnsupported
		}
		return "the BPF verifier of this kernel rejected ftprobe's " + mode + " program (" + last + "); please report it with `ftprobe features --json`", nil
	}
	trampoline := strings.HasPrefix(mode, "fentry") || strings.HasPrefix(mode, "fexit") || strings.HasPrefix(mode, "fsession") || mode == "tp_btf"
	switch {
	case errors.Is(err, ErrKernelPredates):
		what := "the tracing multi links (BPF_TRACE_FENTRY_MULTI, FEXIT_MULTI, FSESSION_MULTI: one trampoline link for many functions, Linux 7.x)"
		if mode == "fsession" {
			what = "fsession (BPF_TRACE_FSESSION: one trampoline program at entry and exit, Linux 7.0)"
		}
		return fmt.Sprintf("this kernel (%d.%d) predates %s; its BTF enum bpf_attach_type lacks the attach type", in.Major, in.Minor, what), ErrUnsupported
	case hasErrno && errno == unix.EPERM:
		if !HasTracingCaps() {
			return "permission denied: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run as root (EPERM)", ErrPrivilege
		}
		if l := Lockdown(); l == "confidentiality" || l == "integrity" && mode != "tp_btf" {
			return "refused by kernel lockdown (" + l + ") (EPERM)", ErrUnsupported
		}
		return "program load refused by kernel policy (EPERM with CAP_BPF and CAP_PERFMON held; a sandboxed or hardened kernel)", ErrUnsupported
	case trampoline && mode != "tp_btf" && in.Arch == "arm64" && !in.AtLeast(6, 4):
		return fmt.Sprintf("no ftrace direct calls on this arm64 kernel (arm64 gained them in 6.4; this is %d.%d)%s", in.Major, in.Minor, paren(name)), ErrUnsupported
	case trampoline && in.Arch == "arm64" && in.ConfigValue("CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS") == "n":
		why := "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS not set"
		if in.ConfigValue("CONFIG_CFI_CLANG") == "y" && in.ConfigValue("CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS") != "y" {
			why += " (kCFI builds without CALL_OPS lose direct calls)"
		}
		return "no ftrace direct calls on this arm64 kernel: " + why + paren(name), ErrUnsupported
	case fprobe && errors.Is(err, ebpf.ErrNotSupported):
		return "kprobe.multi links are not available on this kernel (needs CONFIG_FPROBE, 5.18+; kprobe.session: 6.10+): " + err.Error(), ErrUnsupported
	case (mode == "kprobe" || mode == "kretprobe") && in.ConfigValue("CONFIG_KPROBES") == "n":
		return "CONFIG_KPROBES not set" + paren(name), ErrUnsupported
	case hasErrno && (errno == unix.EOPNOTSUPP || errno == enotsupp) && trampoline && strings.HasSuffix(mode, ".multi"):
		why := "this kernel refuses tracing multi links (" + name + ")"
		if in.ConfigValue("CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS") != "y" {
			// Measured in the lab: amd64 7.3 (=y) attaches them, arm64 7.3
			// (per-callsite ops, no single direct ops) returns EOPNOTSUPP.
			why += ": it lacks CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS, one direct ftrace_ops shared by many functions, which x86-64 has"
			if in.ConfigValue("CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS") == "y" {
				why += "; this kernel's ftrace uses per-callsite ops (DYNAMIC_FTRACE_WITH_CALL_OPS) instead"
			}
		}
		return why, ErrUnsupported
	case hasErrno && errno == enotsupp && trampoline:
		return "the kernel cannot build a BPF trampoline here (ENOTSUPP: no direct-call support for this function or architecture)", ErrUnsupported
	case hasErrno && (errno == unix.ENOENT || errno == unix.ESRCH):
		return "the kernel has no such attach point (" + name + ")", nil
	case hasErrno && errno == unix.EBUSY:
		return "another ftrace user owns this function with IPMODIFY or a direct call (livepatch, another trampoline) (EBUSY)", nil
	case hasErrno && errno == unix.E2BIG:
		return "too many arguments for the BPF trampoline (E2BIG)", nil
	case hasErrno && errno == unix.EINVAL:
		return "the kernel rejected the attach (EINVAL: not an ftrace location, or the prototype is unsupported)", nil
	case hasErrno && errno == unix.EMFILE:
		return "open-file limit reached (EMFILE): raise ulimit -n", nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return "not supported by this kernel: " + err.Error(), ErrUnsupported
	}
	if hasErrno {
		return fmt.Sprintf("%v (%s)", err, name), nil
	}
	return err.Error(), nil
}

// fprobeReason is what the kernel lacks for the fprobe path mode,
// whatever failed (the program's session kfuncs too): fprobe itself, or
// for kprobe.session the 7.0 session kfuncs ftprobe's program calls on
// ctx; "" when neither. name is the errno's name, if any.
func (in *Info) fprobeReason(mode, name string) string {
	switch {
	case in.ConfigValue("CONFIG_FPROBE") == "n":
		extra := ""
		if in.Arch == "arm64" && !in.AtLeast(6, 14) {
			extra = "; arm64 fprobe came with function-graph-based fprobe, 6.14"
		}
		return "CONFIG_FPROBE not set: kprobe.multi and kprobe.session need fprobe" + extra + paren(name)
	case mode == "kprobe.session" && in.Major > 0 && !in.AtLeast(7, 0):
		// The link type is 6.10's, but ftprobe's program reads the
		// session through bpf_session_is_return(ctx) and
		// bpf_session_cookie(ctx), the 7.0 prototypes.
		return fmt.Sprintf("ftprobe's kprobe.session program needs Linux 7.0's session kfuncs on ctx (bpf_session_is_return, bpf_session_cookie); this is %d.%d (kprobe.multi+kretprobe.multi works from 5.18)", in.Major, in.Minor)
	}
	return ""
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// ErrnoName is the errno's symbolic name ("EINVAL", "ENOTSUPP" for the
// kernel-internal 524), or "errno N".
func ErrnoName(e unix.Errno) string { return errnoName(e) }

func errnoName(e unix.Errno) string {
	if e == enotsupp {
		return "ENOTSUPP"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

// ReasonError is a kernel error explained: Error() is "WHAT: REASON";
// errors.Is sees both the class (ErrUnsupported, ErrPrivilege) and the
// original error.
type ReasonError struct {
	What, Reason string
	Class, Err   error
}

func (e *ReasonError) Error() string { return e.What + ": " + e.Reason }

// Unwrap returns the class and the cause.
func (e *ReasonError) Unwrap() []error {
	if e.Class == nil {
		return []error{e.Err}
	}
	return []error{e.Class, e.Err}
}

// Explain wraps err as "FUNC in MODE mode: REASON" and classifies it.
func (in *Info) Explain(mode, fn string, err error) error {
	reason, class := in.Reason(mode, err)
	what := mode
	if fn != "" {
		what = fn + " in " + mode + " mode"
	}
	return &ReasonError{What: what, Reason: reason, Class: class, Err: err}
}
