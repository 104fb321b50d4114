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

/* mine: the current thread is the measured one. */
static __always_inline int mine(void)
{
	return !filter_tid || (__u32)bpf_get_current_pid_tgid() == filter_tid;
}

static __always_inline void count_hit(void)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&hits, &zero);
	if (v)
		*v += 1;
}

/* hit counts one hit of the measured thread: 1 when counted. */
static __always_inline int hit(void)
{
	if (!mine())
		return 0;
	count_hit();
	return 1;
}

SEC("fentry")
int count_fentry(void *ctx) { hit(); return 0; }

SEC("fexit")
int count_fexit(void *ctx) { hit(); return 0; }

SEC("kprobe.multi")
int count_kmulti(void *ctx) { hit(); return 0; }

SEC("kretprobe.multi")
int count_kretmulti(void *ctx) { hit(); return 0; }

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
int count_kprobe(void *ctx) { hit(); return 0; }

SEC("kretprobe")
int count_kretprobe(void *ctx) { hit(); return 0; }

/* The timed programs: compare's timed body, the floor under every body
 * that measures a duration (trace, exit-only, agg). Each counts its hits
 * like the counting program of its path and also takes the two
 * bpf_ktime_get_ns() a duration needs, handing the entry's to the exit the
 * cheapest way the path allows: the session cookie (fsession, 7.0;
 * kprobe.session, 6.10, with the kfuncs' ctx prototype of 7.0) or
 * task-local storage (5.11; fentry+fexit and the probe pairs). An exit
 * counts its hit only when it finds its entry's timestamp, so hits equal
 * two per call only when every duration was taken; nsum adds the
 * durations (ns). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nsum SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} tstart SEC(".maps");

extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

static __always_inline void add_ns(__u64 d)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&nsum, &zero);
	if (v)
		*v += d;
}

static __always_inline int timed_start(void)
{
	if (!hit())
		return 0;
	__u64 *s = bpf_task_storage_get(&tstart, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (s)
		*s = bpf_ktime_get_ns();
	return 0;
}

/* timed_stop: the thread filter once, as the counting exit programs. */
static __always_inline int timed_stop(void)
{
	if (!mine())
		return 0;
	__u64 *s = bpf_task_storage_get(&tstart, bpf_get_current_task_btf(), 0, 0);
	if (!s || !*s)
		return 0;
	add_ns(bpf_ktime_get_ns() - *s);
	*s = 0;
	count_hit();
	return 0;
}

/* timed_session: the cookie holds the entry's timestamp (0: not the
 * measured thread, so the exit asks no filter); returning 0 at entry
 * keeps the exit run. */
static __always_inline int timed_session(void *ctx)
{
	__u64 *c = bpf_session_cookie(ctx);
	if (!c)
		return 0;
	if (!bpf_session_is_return(ctx)) {
		*c = hit() ? bpf_ktime_get_ns() : 0;
		return 0;
	}
	if (*c) {
		add_ns(bpf_ktime_get_ns() - *c);
		count_hit();
	}
	return 0;
}

SEC("fentry")
int timed_fentry(void *ctx) { return timed_start(); }

SEC("fexit")
int timed_fexit(void *ctx) { return timed_stop(); }

SEC("fsession")
int timed_fsession(void *ctx) { return timed_session(ctx); }

SEC("kprobe.multi")
int timed_kmulti(void *ctx) { return timed_start(); }

SEC("kretprobe.multi")
int timed_kretmulti(void *ctx) { return timed_stop(); }

SEC("kprobe.session")
int timed_ksession(void *ctx) { return timed_session(ctx); }

SEC("kprobe")
int timed_kprobe(void *ctx) { return timed_start(); }

SEC("kretprobe")
int timed_kretprobe(void *ctx) { return timed_stop(); }

SEC("tp_btf/sys_enter")
int count_tp_btf(void *ctx) { hit(); return 0; }

/* raw_tp/sys_enter args: (struct pt_regs *regs, long id). */
volatile const __s64 filter_syscall_nr = -1;

SEC("raw_tp/sys_enter")
int count_raw_tp(__u64 *ctx)
{
	if (filter_syscall_nr >= 0 && (__s64)ctx[1] != filter_syscall_nr)
		return 0;
	hit();
	return 0;
}

SEC("raw_tp")
int trigger_driver(void *ctx)
{
	for (__u32 i = 0; i < batch_iters && i < 100000; i++)
		(void)bpf_get_numa_node_id();
	return 0;
}
