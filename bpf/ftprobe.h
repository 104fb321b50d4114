/* Shared definitions of ftprobe's BPF programs.
 *
 * Types come from the uapi <linux/bpf.h> only; kernel structures that a
 * program touches are declared here with CO-RE (preserve_access_index) or,
 * for pt_regs, with their fixed per-architecture layout.
 */
#pragma once

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define FTP_MAX_ARGS 6
#define FTP_MAX_DEPTH 16
#define FTP_COMM_LEN 16

/* pt_regs as the kernel lays it out; kprobe.multi programs read it as ctx.
 * x86-64: arch/x86/include/asm/ptrace.h; arm64: struct user_pt_regs at the
 * head of arch/arm64/include/asm/ptrace.h's pt_regs. */
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define FTP_ARG0(r) ((r)->di)
#define FTP_ARG1(r) ((r)->si)
#define FTP_ARG2(r) ((r)->dx)
#define FTP_ARG3(r) ((r)->cx)
#define FTP_ARG4(r) ((r)->r8)
#define FTP_ARG5(r) ((r)->r9)
#define FTP_RET(r) ((r)->ax)
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs {
	unsigned long regs[31];
	unsigned long sp, pc, pstate;
};
#define FTP_ARG0(r) ((r)->regs[0])
#define FTP_ARG1(r) ((r)->regs[1])
#define FTP_ARG2(r) ((r)->regs[2])
#define FTP_ARG3(r) ((r)->regs[3])
#define FTP_ARG4(r) ((r)->regs[4])
#define FTP_ARG5(r) ((r)->regs[5])
#define FTP_RET(r) ((r)->regs[0])
#else
#error "ftprobe BPF programs support __TARGET_ARCH_x86 and __TARGET_ARCH_arm64"
#endif

/* CO-RE view of the few fields the fork and exit tracepoints read. */
struct signal_struct {
	struct {
		int counter;
	} live; /* atomic_t: threads of the group still alive */
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));
