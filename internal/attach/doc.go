// Package attach loads ftprobe's trace programs and attaches them to kernel
// functions, either through BPF trampolines (fentry/fexit: one program pair
// per function, reached by an ftrace direct call) or through fprobe
// (kprobe.multi/kretprobe.multi: one link pair for all functions).
package attach
