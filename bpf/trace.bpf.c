//go:build ignore

/* ftprobe's trace programs: one entry and one exit record per traced call,
 * written to a ringbuf, with the call's duration computed here from a
 * per-thread stack of entry frames (correct under nesting, recursion,
 * sleeping and CPU migration, unlike a per-CPU slot).
 *
 * Attach paths:
 *   fentry / fexit            one program instance per function (BTF id),
 *                             function id in the attach cookie (>= 5.19)
 *   kprobe.multi / kretprobe.multi
 *                             one link for all functions, function id in
 *                             the per-address cookie (>= 5.18)
 *   fsession                  one program per function run at entry and at
 *                             exit (bpf_session_is_return), 7.0
 *   fentry.multi / fexit.multi / fsession.multi
 *                             one trampoline link for many functions (BTF
 *                             ids), function id in the per-id cookie, 7.x
 * The trampoline programs of the 7.x attach types are loaded by
 * internal/attach (tracingmulti.go), which sets the attach type and target
 * that cilium/ebpf v0.22 cannot; their sections here only name the family.
 */
#include "ftprobe.h"

char __license[] SEC("license") = "GPL";

enum ftp_kind {
	FTP_ENTRY = 1,
	FTP_EXIT = 2,
};

enum ftp_mode {
	FTP_MODE_FENTRY = 1,
	FTP_MODE_KPROBE_MULTI = 2,
	FTP_MODE_KPROBE = 3,
	FTP_MODE_FSESSION = 4,       /* fsession: one program, entry and exit */
	FTP_MODE_FENTRY_MULTI = 5,   /* fentry.multi + fexit.multi links */
	FTP_MODE_FSESSION_MULTI = 6, /* fsession.multi link */
};

enum ftp_flags {
	FTP_F_NO_ENTRY = 1,  /* exit without a recorded entry: duration unknown */
	FTP_F_HAS_ARGS = 2,  /* args[] hold the entry arguments */
	FTP_F_DEFERRED = 4,  /* entry was not emitted (duration/errors filter) */
	FTP_F_STRINGS = 8,   /* the tail's str_* fields are valid (--strings) */
	FTP_F_STACK = 16,    /* the tail's stack_len/kstack are valid (--stack) */
};

/* Indexes of the per-CPU loss and hit counters in `stats`. */
enum ftp_stat {
	FTP_STAT_RINGBUF_DROP = 0,  /* bpf_ringbuf_reserve failed */
	FTP_STAT_NO_ENTRY = 1,      /* exit with no matching entry frame */
	FTP_STAT_DEPTH_OVERFLOW = 2,/* entry deeper than FTP_MAX_DEPTH */
	FTP_STAT_UNWOUND = 3,       /* frames popped without their own exit */
	FTP_STAT_STACK_FULL = 4,    /* no per-thread stack could be created */
	FTP_STAT_ENTRY_HITS = 5,    /* entries that passed the filters */
	FTP_STAT_EXIT_HITS = 6,     /* exits that passed the filters, or whose entry did */
	FTP_STAT_STR_FAULT = 7,     /* --strings: a string read failed (<fault>) */
	FTP_STAT_STACK_FAIL = 8,    /* --stack: bpf_get_stack failed */
	FTP_STAT_TREE_FULL = 9,     /* a forked process not followed: tgids full */
	FTP_STAT_MAX = 10,
};

/* Per-function flags in `funcs`, filled from BTF in user space. Bits 8-15
 * hold the return type's size in bytes (0 = unknown: keep 64 bits). The ABI
 * leaves the upper bits of a narrower return register unspecified, so they
 * are masked or sign-extended here. */
enum ftp_func_flags {
	FTP_FN_RET_SIGNED = 1, /* signed integer return */
	FTP_FN_RET_PTR = 2,    /* pointer return (ERR_PTR aware) */
	FTP_FN_RET_VOID = 4,
};

/* --strings: bits 16-18 and 19-21 of a function's flags hold 1 + the
 * argument index of its first and second `char *` parameter (0 = none),
 * chosen from BTF in user space. */
#define FTP_FN_STR_SHIFT 16
#define FTP_MAX_STRS 2      /* strings read per event */
#define FTP_STR_LEN 128     /* bytes per string, NUL included */
#define FTP_STACK_DEPTH 32  /* kernel stack frames per event */

/* str_flags bits per string slot. */
enum ftp_str_flags {
	FTP_S_TRUNCATED = 1, /* the string is longer than FTP_STR_LEN - 1 */
	FTP_S_USER = 2,      /* read as a user pointer */
};

struct event {
	__u64 ts_ns;        /* bpf_ktime_get_ns() at this event */
	__u64 duration_ns;  /* exit only: time since the matching entry */
	__u64 args[FTP_MAX_ARGS];
	__s64 ret;          /* exit only: return value, sign-extended for int */
	__u32 tgid;
	__u32 tid;
	__u32 func_id;      /* index into user space's function table */
	__u32 cpu;
	__u16 depth;        /* call depth of this thread, 0 = outermost */
	__u8 kind;          /* enum ftp_kind */
	__u8 mode;          /* enum ftp_mode */
	__u8 flags;         /* enum ftp_flags */
	__u8 nargs;
	char comm[FTP_COMM_LEN];
	__u8 _pad[2];
	/* Tail, in the record only with --strings or --stack (FTP_F_STRINGS,
	 * FTP_F_STACK); without them the record ends at str_len
	 * (FTP_EVENT_HDR bytes). */
	__s16 str_len[FTP_MAX_STRS]; /* bytes read incl. NUL, -errno on a fault, 0 = none/NULL */
	__u8 str_arg[FTP_MAX_STRS];  /* argument index of each string */
	__u8 str_flags[FTP_MAX_STRS];/* enum ftp_str_flags */
	__s32 stack_len;             /* bytes in kstack, or -errno from bpf_get_stack */
	__u32 _pad2;
	char str[FTP_MAX_STRS][FTP_STR_LEN];
	__u64 kstack[FTP_STACK_DEPTH]; /* return addresses, innermost first */
};

#define FTP_EVENT_HDR __builtin_offsetof(struct event, str_len)

struct frame {
	__u64 ts_ns;
	__u64 args[FTP_MAX_ARGS];
	__u32 func_id;
	__u8 nargs;
	__u8 _pad[3];
};

struct tstack {
	__u32 depth;     /* frames in use */
	__u32 overflow;  /* entries beyond FTP_MAX_DEPTH not recorded */
	struct frame f[FTP_MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* Per-thread stacks. A plain (preallocated) hash, not an LRU: an LRU may
 * evict a live thread's frames. The entry is deleted when the thread's
 * outermost traced call returns, so only threads inside traced calls hold
 * one; when it is full, new threads are counted in FTP_STAT_STACK_FULL. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tid */
	__type(value, struct tstack);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tstack);
} zero_stack SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FTP_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);  /* func id */
	__type(value, __u32);/* enum ftp_func_flags */
} funcs SEC(".maps");

/* Process tree filter: tgids to trace when filter_tree is set, with their
 * state: traced, or waiting for their exec (trace -- COMMAND adds its
 * launcher so; the launcher's own calls before it execs the command are
 * not the command's). */
enum ftp_tree_state {
	FTP_TREE_TRACED = 1,
	FTP_TREE_AT_EXEC = 2,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8); /* enum ftp_tree_state */
} tgids SEC(".maps");

/* Armed by user space once every link is attached, disarmed before the
 * first is detached: while links come and go one by one (an fentry link
 * attaches before its fexit link; fentry mode attaches functions one at a
 * time), entries whose exits cannot be seen would pile up on the frame
 * stacks. Calls that straddle arming are counted as in flight. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} armed SEC(".maps");

static __always_inline int is_armed(void)
{
	__u32 zero = 0;
	__u32 *a = bpf_map_lookup_elem(&armed, &zero);
	return a && *a;
}

/* Filters, set by user space before load (frozen .rodata). */
volatile const __u32 filter_tgid = 0;
volatile const __u32 filter_tid = 0;
volatile const __u8 filter_tree = 0;
volatile const __u8 filter_comm_len = 0;
volatile const char filter_comm[FTP_COMM_LEN] = {};
volatile const __u64 min_duration_ns = 0;
volatile const __u8 errors_only = 0;
volatile const __u8 want_strings = 0; /* --strings */
volatile const __u8 want_stack = 0;   /* --stack */

/* Keeps struct event in BTF for bpf2go -type. */
const struct event *unused_event __attribute__((unused));

/* Index into a thread's frames, masked in a way clang cannot optimize
 * away: when it knows the value is in range it drops a C mask, and older
 * verifiers (6.12) then lose the bound across 32-bit arithmetic. */
#define FTP_SLOT(x) ({                                                   \
	__u64 __v = (__u64)(x);                                          \
	asm volatile("%[v] &= %[m]" : [v] "+r"(__v) : [m] "i"(FTP_MAX_DEPTH - 1)); \
	__v;                                                             \
})

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
}

/* The pid and tid filters: fixed for a call's lifetime, except across a
 * non-leader thread's exec, which takes the leader's tid in de_thread: the
 * frames it pushed under its old tid stay open, and user space counts them
 * as open at the end (Losses.OpenAtExit). */
static __always_inline int pass_ids(__u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;
	__u32 tid = (__u32)pid_tgid;

	if (filter_tgid && tgid != filter_tgid)
		return 0;
	if (filter_tid && tid != filter_tid)
		return 0;
	return 1;
}

/* The tree and comm filters: they can change during a call (exec renames
 * the task in begin_new_exec; a process leaves the tree as it exits). */
static __always_inline int pass_mutable(__u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;

	if (filter_tree) {
		__u8 *st = bpf_map_lookup_elem(&tgids, &tgid);
		if (!st || *st != FTP_TREE_TRACED)
			return 0;
	}
	if (filter_comm_len) {
		char comm[FTP_COMM_LEN];
		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < FTP_COMM_LEN; i++) {
			if (comm[i] != filter_comm[i])
				return 0;
			if (comm[i] == 0)
				break;
		}
	}
	return 1;
}

static __always_inline int pass_filters(__u64 pid_tgid)
{
	return pass_ids(pid_tgid) && pass_mutable(pid_tgid);
}

static __always_inline struct tstack *get_stack(__u32 tid)
{
	struct tstack *st = bpf_map_lookup_elem(&stacks, &tid);
	if (st)
		return st;
	__u32 zero = 0;
	struct tstack *z = bpf_map_lookup_elem(&zero_stack, &zero);
	if (!z)
		return 0;
	if (bpf_map_update_elem(&stacks, &tid, z, BPF_NOEXIST) == 0)
		return bpf_map_lookup_elem(&stacks, &tid);
	/* -EEXIST: a nested program on this thread created it meanwhile. */
	return bpf_map_lookup_elem(&stacks, &tid);
}

static __always_inline void fill_common(struct event *e, __u64 pid_tgid, __u32 func_id,
					__u8 kind, __u8 mode, __u16 depth)
{
	e->tgid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->func_id = func_id;
	e->cpu = bpf_get_smp_processor_id();
	e->kind = kind;
	e->mode = mode;
	e->depth = depth;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* reserve_event reserves a record with the tail when --strings or --stack
 * is on, the header only otherwise (want_* are frozen .rodata: the
 * verifier sees one branch). */
static __always_inline struct event *reserve_event(void)
{
	if (want_strings || want_stack)
		return bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	return bpf_ringbuf_reserve(&events, FTP_EVENT_HDR, 0);
}

static __always_inline __u64 pick_arg(__u64 *args, __u32 i)
{
	switch (i) {
	case 0: return args[0];
	case 1: return args[1];
	case 2: return args[2];
	case 3: return args[3];
	case 4: return args[4];
	case 5: return args[5];
	}
	return 0;
}

/* read_str reads the NUL-terminated string at ptr into dst.
 *
 * User or kernel pointer: BTF has lost __user (do_sys_openat2's filename is
 * a user pointer, getname's result a kernel one), so the address decides.
 * Both supported architectures split the address space by the top bit
 * (x86-64: canonical lower half = user, upper half = kernel; arm64: TTBR0
 * = user below 2^48/2^52, TTBR1 = kernel with the top bits set) and both
 * have CONFIG_ARCH_HAS_NON_OVERLAPPING_ADDRESS_SPACE, so a negative
 * address is a kernel one and any other a user one. This is exact and
 * costs one read, where "kernel first, then user" would pay a faulting
 * read for every user string. A read that faults (page not present: we
 * cannot sleep to page it in; a bad pointer) returns -errno and is counted
 * in FTP_STAT_STR_FAULT. */
static __always_inline long read_str(char *dst, __u64 ptr, __u8 *flags)
{
	long n;
	int user = (__s64)ptr >= 0;

	if (user) {
		*flags = FTP_S_USER;
		n = bpf_probe_read_user_str(dst, FTP_STR_LEN, (void *)ptr);
	} else {
		*flags = 0;
		n = bpf_probe_read_kernel_str(dst, FTP_STR_LEN, (void *)ptr);
	}
	if (n == FTP_STR_LEN) {
		/* Full buffer: truncated unless the string is exactly
		 * FTP_STR_LEN - 1 bytes long, which the byte at that index says. */
		char c = 0;
		void *last = (void *)(ptr + FTP_STR_LEN - 1);
		if (user)
			bpf_probe_read_user(&c, 1, last);
		else
			bpf_probe_read_kernel(&c, 1, last);
		if (c)
			*flags |= FTP_S_TRUNCATED;
	}
	return n;
}

/* fill_tail fills the tail of a full record: the string arguments the
 * funcs map names (--strings) and the kernel stack (--stack). */
static __always_inline void fill_tail(void *ctx, struct event *e, __u32 func_id, __u64 *args,
				      __u8 mode, int entry)
{
	e->str_len[0] = 0;
	e->str_len[1] = 0;
	e->stack_len = 0;
	if (want_strings) {
		__u32 *fl = bpf_map_lookup_elem(&funcs, &func_id);
		__u32 flags = fl ? *fl : 0;
		e->flags |= FTP_F_STRINGS;
#pragma clang loop unroll(full)
		for (int s = 0; s < FTP_MAX_STRS; s++) {
			__u32 a = (flags >> (FTP_FN_STR_SHIFT + 3 * s)) & 7;
			e->str_arg[s] = 0;
			e->str_flags[s] = 0;
			if (a == 0 || a > FTP_MAX_ARGS)
				continue;
			__u64 ptr = pick_arg(args, a - 1);
			e->str_arg[s] = a - 1;
			if (!ptr)
				continue; /* NULL: shown as such, no read */
			long n = read_str(e->str[s], ptr, &e->str_flags[s]);
			if (n < 0)
				count(FTP_STAT_STR_FAULT);
			e->str_len[s] = n;
		}
	}
	if (want_stack) {
		long n;
#if defined(__TARGET_ARCH_arm64)
		if (entry && (mode == FTP_MODE_KPROBE_MULTI || mode == FTP_MODE_KPROBE)) {
			/* A kprobe or fprobe at a function's entry runs before its
			 * prologue: the frame pointer is still the caller's, so the
			 * arm64 frame-record unwinder starts at the caller's caller
			 * and the direct caller, still in the link register,
			 * is missing (vfs_read, __arm64_sys_read without
			 * ksys_read). Put it back as the second frame. (fentry,
			 * fsession and the multi links run from the trampoline,
			 * which builds frame records for the traced function:
			 * nothing is missing there, and ctx is not pt_regs.) */
			n = bpf_get_stack(ctx, &e->kstack[1], sizeof(e->kstack) - 8, 0);
			if (n >= 8) {
				e->kstack[0] = e->kstack[1];
				e->kstack[1] = ((struct pt_regs *)ctx)->regs[30];
				n += 8;
			}
		} else
#endif
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (n < 0)
			count(FTP_STAT_STACK_FAIL);
		e->stack_len = n;
		e->flags |= FTP_F_STACK;
	}
}

static __always_inline int on_entry(void *ctx, __u32 func_id, __u64 *args, __u8 nargs, __u8 mode)
{
	if (!is_armed())
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!pass_filters(pid_tgid))
		return 0;
	count(FTP_STAT_ENTRY_HITS);

	__u64 now = bpf_ktime_get_ns();
	struct tstack *st = get_stack((__u32)pid_tgid);
	if (!st) {
		count(FTP_STAT_STACK_FULL); /* stacks map full: no duration for this call */
		return 0;
	}
	__u32 d = st->depth;
	if (d >= FTP_MAX_DEPTH || st->overflow) {
		st->overflow++;
		count(FTP_STAT_DEPTH_OVERFLOW);
		return 0;
	}
	/* Claim the slot before filling it, so a nested program (an IRQ on
	 * this thread running another function's fentry) pushes above it. */
	st->depth = d + 1;
	struct frame *f = &st->f[FTP_SLOT(d)];
	f->ts_ns = now;
	f->func_id = func_id;
	f->nargs = nargs;
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		f->args[i] = args[i];

	if (min_duration_ns || errors_only)
		return 0; /* decided at exit, which carries the arguments */

	struct event *e = reserve_event();
	if (!e) {
		count(FTP_STAT_RINGBUF_DROP);
		return 0;
	}
	fill_common(e, pid_tgid, func_id, FTP_ENTRY, mode, d);
	e->ts_ns = now;
	e->duration_ns = 0;
	e->ret = 0;
	e->nargs = nargs;
	e->flags = FTP_F_HAS_ARGS;
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		e->args[i] = args[i];
	if (want_strings || want_stack)
		fill_tail(ctx, e, func_id, args, mode, 1);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline __s64 normalize_ret(__u32 func_id, __u64 raw, int *is_err)
{
	__u32 *fl = bpf_map_lookup_elem(&funcs, &func_id);
	__u32 flags = fl ? *fl : 0;
	__u32 size = (flags >> 8) & 0xff;
	int sign = flags & FTP_FN_RET_SIGNED;
	__s64 ret = (__s64)raw;

	switch (size) {
	case 1:
		ret = sign ? (__s64)(__s8)raw : (__s64)(__u8)raw;
		break;
	case 2:
		ret = sign ? (__s64)(__s16)raw : (__s64)(__u16)raw;
		break;
	case 4:
		ret = sign ? (__s64)(__s32)raw : (__s64)(__u32)raw;
		break;
	}
	if (flags & FTP_FN_RET_VOID)
		*is_err = 0;
	else if (sign && size > 0 && size < 8)
		*is_err = ret < 0;
	else if (sign || (flags & FTP_FN_RET_PTR) || size == 0)
		*is_err = ret < 0 && ret >= -4095; /* IS_ERR_VALUE */
	else
		*is_err = 0; /* unsigned */
	return ret;
}

static __always_inline int on_exit(void *ctx, __u32 func_id, __u64 raw_ret, __u8 mode)
{
	if (!is_armed())
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!pass_ids(pid_tgid))
		return 0;
	/* A filter decides at entry: an exit whose entry was let in is taken
	 * even when the tree or comm filter now rejects the task (found on
	 * this thread's frame stack below), so no frame is stranded. */
	int pass = pass_mutable(pid_tgid);

	__u64 now = bpf_ktime_get_ns();
	struct tstack *st = bpf_map_lookup_elem(&stacks, &(__u32){(__u32)pid_tgid});
	if (!pass && !st)
		return 0;
	struct frame *f = 0;
	__u32 d = 0;
	int found = -1;
	if (st) {
		d = st->depth;
		if (d > FTP_MAX_DEPTH)
			d = FTP_MAX_DEPTH;
		if (st->overflow > 0) {
			/* Exits pair with the innermost entries first: those were
			 * beyond the stack and counted at entry, all let in by
			 * the filters then, whatever they say now. */
			count(FTP_STAT_EXIT_HITS);
			st->overflow--;
			return 0;
		}
		if (d > 0 && st->f[FTP_SLOT(d - 1)].func_id == func_id) {
			found = d - 1;
		} else {
			/* Unrolled with masked indexes: older verifiers (6.12)
			 * lose the loop variable's bounds otherwise. */
#pragma clang loop unroll(full)
			for (int i = FTP_MAX_DEPTH - 1; i >= 0; i--) {
				if (found < 0 && (__u32)i < d &&
				    st->f[FTP_SLOT(i)].func_id == func_id)
					found = i;
			}
		}
	}

	if (!pass && found < 0)
		return 0; /* not an exit of a call that was let in */
	count(FTP_STAT_EXIT_HITS);
	int is_err = 0;
	__s64 ret = normalize_ret(func_id, raw_ret, &is_err);

	if (found >= 0 && st) {
		f = &st->f[FTP_SLOT(found)];
		if (d - 1 > (__u32)found) {
			/* Inner frames whose exits were never seen (missed runs). */
			__u64 *v = bpf_map_lookup_elem(&stats, &(__u32){FTP_STAT_UNWOUND});
			if (v)
				*v += d - 1 - found;
		}
		st->depth = found;
	} else {
		count(FTP_STAT_NO_ENTRY);
	}

	__u64 dur = 0;
	__u64 fargs[FTP_MAX_ARGS] = {};
	__u8 fnargs = 0;
	if (f) {
		dur = now - f->ts_ns;
		fnargs = f->nargs;
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			fargs[i] = f->args[i];
	}
	if (st && found == 0 && st->overflow == 0) {
		/* Outermost call returned: free the thread's slot. */
		__u32 tid = (__u32)pid_tgid;
		bpf_map_delete_elem(&stacks, &tid);
	}
	if (min_duration_ns && (!f || dur < min_duration_ns))
		return 0;
	if (errors_only && !is_err)
		return 0;

	/* A deferred exit stands for its entry: it carries the tail too. */
	struct event *e = (min_duration_ns || errors_only) ? reserve_event() :
		bpf_ringbuf_reserve(&events, FTP_EVENT_HDR, 0);
	if (!e) {
		count(FTP_STAT_RINGBUF_DROP);
		return 0;
	}
	fill_common(e, pid_tgid, func_id, FTP_EXIT, mode, found >= 0 ? found : 0);
	e->ts_ns = now;
	e->duration_ns = dur;
	e->ret = ret;
	e->flags = 0;
	e->nargs = 0;
	if (f) {
		e->flags |= FTP_F_HAS_ARGS;
		e->nargs = fnargs;
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			e->args[i] = fargs[i];
	} else {
		e->flags |= FTP_F_NO_ENTRY;
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			e->args[i] = 0;
	}
	if (min_duration_ns || errors_only) {
		e->flags |= FTP_F_DEFERRED;
		/* Strings re-read now from the entry's pointers, the stack taken
		 * at exit (the same callers are on it). */
		if ((want_strings && f) || want_stack)
			fill_tail(ctx, e, func_id, fargs, mode, 0);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Entry and exit of every trampoline mode: arguments and return value
 * through the trampoline's ctx helpers, function id in the attach cookie. */
static __always_inline int tramp_entry(void *ctx, __u8 mode)
{
	__u64 args[FTP_MAX_ARGS] = {};
	__u64 n = bpf_get_func_arg_cnt(ctx);
	for (int i = 0; i < FTP_MAX_ARGS; i++) {
		if ((__u64)i < n)
			bpf_get_func_arg(ctx, i, &args[i]);
	}
	return on_entry(ctx, (__u32)bpf_get_attach_cookie(ctx), args,
			n > FTP_MAX_ARGS ? FTP_MAX_ARGS : n, mode);
}

static __always_inline int tramp_exit(void *ctx, __u8 mode)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	return on_exit(ctx, (__u32)bpf_get_attach_cookie(ctx), ret, mode);
}

SEC("fentry")
int ftp_fentry(void *ctx) { return tramp_entry(ctx, FTP_MODE_FENTRY); }

SEC("fexit")
int ftp_fexit(void *ctx) { return tramp_exit(ctx, FTP_MODE_FENTRY); }

/* fentry.multi / fexit.multi (BPF_TRACE_FENTRY_MULTI/FEXIT_MULTI, 7.x). */
SEC("fentry")
int ftp_fentry_multi(void *ctx) { return tramp_entry(ctx, FTP_MODE_FENTRY_MULTI); }

SEC("fexit")
int ftp_fexit_multi(void *ctx) { return tramp_exit(ctx, FTP_MODE_FENTRY_MULTI); }

/* fsession (BPF_TRACE_FSESSION, 7.0) and fsession.multi: the same program
 * runs at entry and at exit. Returning 0 at entry keeps the exit run. The
 * kfunc takes ctx since 7.0 (kernel commit "bpf: add fsession support"). */
extern _Bool bpf_session_is_return(void *ctx) __ksym;

static __always_inline int session(void *ctx, __u8 mode)
{
	if (bpf_session_is_return(ctx))
		return tramp_exit(ctx, mode);
	tramp_entry(ctx, mode);
	return 0;
}

SEC("fsession")
int ftp_fsession(void *ctx) { return session(ctx, FTP_MODE_FSESSION); }

SEC("fsession")
int ftp_fsession_multi(void *ctx) { return session(ctx, FTP_MODE_FSESSION_MULTI); }

/* Entry and exit of the kprobe modes: arguments and return value from the
 * registers (pt_regs), function id in the attach cookie. */
static __always_inline int regs_entry(struct pt_regs *ctx, __u8 mode)
{
	__u64 args[FTP_MAX_ARGS] = {
		FTP_ARG0(ctx), FTP_ARG1(ctx), FTP_ARG2(ctx),
		FTP_ARG3(ctx), FTP_ARG4(ctx), FTP_ARG5(ctx),
	};
	return on_entry(ctx, (__u32)bpf_get_attach_cookie(ctx), args, FTP_MAX_ARGS, mode);
}

static __always_inline int regs_exit(struct pt_regs *ctx, __u8 mode)
{
	return on_exit(ctx, (__u32)bpf_get_attach_cookie(ctx), FTP_RET(ctx), mode);
}

SEC("kprobe.multi")
int ftp_kmulti(struct pt_regs *ctx) { return regs_entry(ctx, FTP_MODE_KPROBE_MULTI); }

SEC("kretprobe.multi")
int ftp_kretmulti(struct pt_regs *ctx) { return regs_exit(ctx, FTP_MODE_KPROBE_MULTI); }

/* Single kprobes/kretprobes: the fallback where neither trampolines nor
 * fprobe exist (arm64 before 6.4). Function id in the perf-event cookie
 * (>= 5.15). */
SEC("kprobe")
int ftp_kprobe(struct pt_regs *ctx) { return regs_entry(ctx, FTP_MODE_KPROBE); }

SEC("kretprobe")
int ftp_kretprobe(struct pt_regs *ctx) { return regs_exit(ctx, FTP_MODE_KPROBE); }

/* Follow the traced command's process tree (filter_tree). */
SEC("tp_btf/sched_process_fork")
int ftp_fork(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 ptgid = parent->tgid;
	__u8 *st = bpf_map_lookup_elem(&tgids, &ptgid);
	if (!st)
		return 0;
	__u32 ctgid = child->tgid;
	__u8 state = *st; /* a child of a process waiting for exec waits too */
	if (bpf_map_update_elem(&tgids, &ctgid, &state, BPF_ANY))
		count(FTP_STAT_TREE_FULL);
	return 0;
}

/* A process waiting for its exec (FTP_TREE_AT_EXEC) is traced from the
 * moment the new program is in place: calls still open across the exec
 * (execve's own) show as exits without entry, counted as in flight. */
SEC("tp_btf/sched_process_exec")
int ftp_exec(__u64 *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *st = bpf_map_lookup_elem(&tgids, &tgid);
	if (st && *st == FTP_TREE_AT_EXEC)
		*st = FTP_TREE_TRACED;
	return 0;
}

/* Forget a process of the tree when its last thread exits, so tgids holds
 * only live processes (a long `-- make -j` forks far more than it holds).
 * do_exit() decrements signal->live before this tracepoint fires. */
SEC("tp_btf/sched_process_exit")
int ftp_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	if (p->signal->live.counter != 0)
		return 0;
	__u32 tgid = p->tgid;
	bpf_map_delete_elem(&tgids, &tgid);
	return 0;
}
