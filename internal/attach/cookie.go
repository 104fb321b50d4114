package attach

import (
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// FlagEntryOnly is FuncFlags' bit for a function traced at entry only
// (symbols.Func.EntryOnly): its entry pushes no frame on the thread's
// stack, since no exit would pop it, and skips the exit run in the
// session modes (FTP_FN_ENTRY_ONLY in bpf/trace.bpf.c).
const FlagEntryOnly = uint32(bpfobj.TraceFtpFuncFlagsFTP_FN_ENTRY_ONLY)

// FuncFlags encodes a function's return type for the BPF side (enum
// ftp_func_flags in bpf/trace.bpf.c): bit 0 signed, bit 1 pointer, bit 2
// void, bit 3 entry only (FlagEntryOnly), bits 8-15 size in bytes (0 =
// unknown, keep 64 bits).
func FuncFlags(f *symbols.Func) uint32 {
	var fl uint32
	if f.EntryOnly != "" {
		fl = FlagEntryOnly
	}
	if f.Proto == nil {
		return fl
	}
	p := f.Proto
	switch {
	case p.RetKind == symbols.RetVoid:
		return fl | 4
	case p.RetKind == symbols.RetPtr:
		return fl | 2
	}
	fl |= p.RetSize << 8
	if p.RetSigned {
		fl |= 1
	}
	return fl
}

// MaxArgs is the number of arguments a record carries at most
// (FTP_MAX_ARGS in bpf/trace.bpf.c).
const MaxArgs = 6

// Cookie is the attach cookie of f (bpf_get_attach_cookie): bits 0-31
// the function id, bits 32-63 its flags: FuncFlags, StringFlags, and in
// bits 24-27 of the flags the number of arguments the kprobe modes read
// from the registers (BTF's count, at most MaxArgs; MaxArgs without BTF).
func Cookie(f *symbols.Func) uint64 {
	n := uint32(MaxArgs)
	if f.Proto != nil && f.ProtoErr == "" {
		n = uint32(min(len(f.Proto.Params), MaxArgs))
	}
	fl := FuncFlags(f) | StringFlags(f) | n<<24
	return uint64(f.ID) | uint64(fl)<<32
}

// FlagWindowEntry is FuncFlags' bit for an --entry function
// (Options.Entries): its calls open the thread's window
// (FTP_FN_WINDOW_ENTRY in bpf/trace.bpf.c).
const FlagWindowEntry = uint32(bpfobj.TraceFtpFuncFlagsFTP_FN_WINDOW_ENTRY)

// PredCookie returns the cookie bits (bits 32-63 already shifted) that
// carry x's entry predicate to the fentry and session programs: its
// xpred program number and pred_nargs, when it reads argument registers
// only and its number fits (ftp_func_pred in bpf/trace.bpf.c); 0
// otherwise, and the programs look it up in xprogs. A rejected fentry+fexit
// call costs 20-45 instructions less with it (arm64 7.3, compare --body
// predicate under icount; docs/benchmarks.md).
func PredCookie(x bpfobj.TraceXprog) uint64 {
	if x.Pentry == 0 || x.EntryRegs == 0 || x.Pentry > uint16(bpfobj.TraceFtpFuncPredFTP_FN_PRED_MAX) || x.PredNargs > MaxArgs {
		return 0
	}
	fl := uint64(x.Pentry)<<bpfobj.TraceFtpFuncPredFTP_FN_PRED_SHIFT | uint64(x.PredNargs)<<bpfobj.TraceFtpFuncPredFTP_FN_PRED_NARGS_SHIFT
	return fl << 32
}

// cookie is Cookie(f) with FlagWindowEntry for the functions of
// o.Entries and the entry predicate's bits (PredCookie).
func (o Options) cookie(f *symbols.Func) uint64 {
	c := Cookie(f) | o.predCookie[f.ID]
	if o.Entries[f.ID] {
		c |= uint64(FlagWindowEntry) << 32
	}
	return c
}

// onlyCookie is the attach cookie of the trace's one function (all), or
// 0 when it has several: bpf/trace.bpf.c's only_cookie, folded into the
// programs before load, so that they do not call bpf_get_attach_cookie
// (in the kprobe modes a bsearch of the link's addresses,
// kernel/trace/bpf_trace.c). Every program of the trace is attached to
// that function only, with this cookie.
func (o Options) onlyCookie(all []*symbols.Func) uint64 {
	if len(all) != 1 {
		return 0
	}
	return o.cookie(all[0])
}

// onlyNargs is bpf/trace.bpf.c's only_nargs (a __u32): the argument
// registers of the trace's one function (all), at most MaxArgs, when its
// BTF prototype maps each parameter to one register (protoRegs), else
// FTP_NARGS_UNKNOWN (bpf_get_func_arg_cnt decides). The trampoline
// programs count the arguments they fetch with it where they may not
// read them from ctx (the multi programs: the kernel checks their ctx
// reads against bpf_multi_func, which has no parameters, 7.3).
func onlyNargs(all []*symbols.Func) uint32 {
	if len(all) != 1 {
		return uint32(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)
	}
	n, ok := protoRegs(all[0])
	if !ok {
		return uint32(bpfobj.TraceFtpNargsFTP_NARGS_UNKNOWN)
	}
	return uint32(n)
}

// anyEntryOnly reports whether fs holds a function traced at entry only
// (symbols.Func.EntryOnly).
func anyEntryOnly(fs []*symbols.Func) bool {
	for _, f := range fs {
		if f.EntryOnly != "" {
			return true
		}
	}
	return false
}

// exitFuncs returns the functions of fs whose exit is hooked: all but the
// entry-only ones (symbols.Func.EntryOnly).
func exitFuncs(fs []*symbols.Func) []*symbols.Func {
	var out []*symbols.Func
	for _, f := range fs {
		if f.EntryOnly == "" {
			out = append(out, f)
		}
	}
	return out
}

// StringArgs returns the indexes of the parameters of f that --strings
// reads: `char *` (any qualifiers) among the first 6, at most StrMax. None
// without a prototype that describes the registers (symbols.Func.ProtoErr:
// no BTF, a struct passed by value, a compiler copy).
func StringArgs(f *symbols.Func) []int {
	if f.Proto == nil || f.ProtoErr != "" {
		return nil
	}
	var out []int
	for i, p := range f.Proto.Params {
		if i >= 6 || len(out) == StrMax {
			break
		}
		if p.Kind == symbols.ArgCharPtr {
			out = append(out, i)
		}
	}
	return out
}

// StringFlags encodes StringArgs for the BPF side: bits 16-18 and 19-21
// hold 1 + the argument index of the first and second string (0 = none).
func StringFlags(f *symbols.Func) uint32 {
	var fl uint32
	for s, i := range StringArgs(f) {
		fl |= uint32(i+1) << (16 + 3*s)
	}
	return fl
}
