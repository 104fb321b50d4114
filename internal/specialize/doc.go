// Package specialize rewrites the trace programs of bpf/trace.bpf.c
// before they load, for the settings, predicates and function they are
// loaded with: pure instruction rewriting on cilium/ebpf's
// asm.Instructions, ProgramSpec and CollectionSpec, without the kernel
// (no program loads, no /sys reads). The verifier checks the result's
// safety, not that it computes what the original did: a wrong rewrite
// loads and then filters or counts wrongly. fold_diff_test.go checks
// every pass against an interpreter.
//
// The passes, in the order internal/attach runs them:
//
//   - InlineRodata: a load of a frozen .rodata variable becomes its
//     value (an immediate), the address load a nop once nothing reads it.
//   - PatchPredicates: the compiled --filter predicates replace the body
//     of the xpred stub, or are spliced into each caller in place of the
//     call (InlinePredicates) when the predicate reads no memory.
//   - SimplifyPrograms, Simplify: conditional jumps on known constants
//     are decided, unreachable instructions deleted, register writes no
//     path reads made nops.
//   - ForFunc, per function at load: the fn_slots() and fn_scalars()
//     immediates get the function's argument count and scalar mask, then
//     Simplify runs again.
//
// What it assumes of its input (clang's output, as cilium/ebpf reads
// it): each function starts at an instruction with a symbol, and jumps
// stay within their function, by offset (a jump by symbol or a call by
// raw offset leaves the whole program as compiled); no jump lands in a
// 64-bit immediate's second slot (such a program is left as compiled);
// no indirect jump (clang 14 emits none); .rodata is read as
// `rX = map_value(.rodata + off)` then loads through rX, its
// contents are final (the map is frozen at load) and are read in
// spec.ByteOrder; helpers follow the BPF calling convention (r1-r5
// arguments, r0-r5 clobbered, r6-r10 kept) and write the stack only
// through their pointer arguments; the helpers of noArgHelper read no
// register; bpf_get_func_arg and bpf_get_func_ret write 8 bytes at r3 and
// r2. The fn_slots() and fn_scalars() immediates (FnSlotsAny,
// FnScalarsAny) are plain 64-bit immediates, correct when left as they
// are (the program then reads its arguments through bpf_get_func_arg).
//
// What it never changes on a path that runs (only unreachable
// instructions are deleted): an instruction with a CO-RE relocation (its
// value is only known once cilium/ebpf relocates it at load; Simplify
// treats what it computes as unknown, InlineRodata leaves a relocated
// load alone); a store, an atomic or a call (helper, kfunc or
// BPF-to-BPF);
// a load from memory other than the stack at r10 + a constant or frozen
// .rodata (a map value, ctx, a probe read's target). What it assumes it does not know:
// the registers after a call (r0-r5), the stack after a call that may
// write it, after an atomic, or after a store through a pointer that is
// not a known stack address (any pointer that escaped may have been
// written through); the registers at a function's first instruction and
// where paths meet with different values.
//
// FTPROBE_SPECIALIZE=off (read by cmd/ftprobe only, passed down as
// trace.Options.NoSpecialize and attach.Options.NoSpecialize) turns the
// package off for a run: the programs load as clang compiled them,
// .rodata frozen by cilium/ebpf's usual path and the arguments read
// through bpf_get_func_arg; only PatchPredicates still runs, putting the
// --filter predicates in as the called subprogram (they are code the
// programs need, not a specialization). Results must not change; the
// kernel-test matrix runs its fast tier once that way
// (amd64:7.3:fast:nospecialize).
package specialize
