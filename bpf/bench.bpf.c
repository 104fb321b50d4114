//go:build ignore

/* ftprobe's counting programs: one per attach mode, each only counting its
 * hits (the attach path's own cost). `ftprobe features` loads and attaches
 * them to prove a mode works; `ftprobe compare` measures them. The driver
 * program is run with BPF_PROG_TEST_RUN and calls bpf_get_numa_node_id() in
 * a loop, the attach point of the kernel's batched trigger benchmarks
 * (tools/testing/selftests/bpf/progs/trigger_bench.c). */
#include "ftprobe.h"

char __license[] SEC("license") = "GPL";

/* Hits per CPU; user space sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

volatile const __u32 batch_iters = 100;
/* Count only this thread (0 = all): the benchmark's trigger thread, so
 * other threads' calls of the target do not pollute the exact count. */
volatile const __u32 filter_tid = 0;

static __always_inline int hit(void)
{
	if (filter_tid && (__u32)bpf_get_current_pid_tgid() != filter_tid)
		return 0;
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&hits, &zero);
	if (v)
		*v += 1;
	return 0;
}

SEC("fentry")
int count_fentry(void *ctx) { return hit(); }

SEC("fexit")
int count_fexit(void *ctx) { return hit(); }

SEC("kprobe.multi")
int count_kmulti(void *ctx) { return hit(); }

SEC("kretprobe.multi")
int count_kretmulti(void *ctx) { return hit(); }

/* kprobe.session: returning 0 at entry makes the same program run again at
 * return, so it counts two hits per call, like kprobe.multi+kretprobe.multi.
 * (No session kfunc is used: its prototype changed across kernels.) */
SEC("kprobe.session")
int count_ksession(void *ctx) { hit(); return 0; }

/* fsession (7.0) and fsession.multi: returning 0 at entry keeps the exit
 * run, so it counts two hits per call, like fentry+fexit. fentry.multi and
 * fexit.multi load count_fentry and count_fexit with the multi attach types
 * (internal/attach/tracingmulti.go). */
SEC("fsession")
int count_fsession(void *ctx) { hit(); return 0; }

SEC("kprobe")
int count_kprobe(void *ctx) { return hit(); }

SEC("kretprobe")
int count_kretprobe(void *ctx) { return hit(); }

SEC("tp_btf/sys_enter")
int count_tp_btf(void *ctx) { return hit(); }

/* raw_tp/sys_enter args: (struct pt_regs *regs, long id). */
volatile const __s64 filter_syscall_nr = -1;

SEC("raw_tp/sys_enter")
int count_raw_tp(__u64 *ctx)
{
	if (filter_syscall_nr >= 0 && (__s64)ctx[1] != filter_syscall_nr)
		return 0;
	return hit();
}

SEC("raw_tp")
int trigger_driver(void *ctx)
{
	for (__u32 i = 0; i < batch_iters && i < 100000; i++)
		(void)bpf_get_numa_node_id();
	return 0;
}
