//go:build ignore

/* ftprobe's trace programs: the per-call data path.
 *
 * For each traced call an entry and an exit program run. They keep a
 * per-thread stack of entry frames (task-local storage: no map insert or
 * delete per call), compute the call's duration there (correct under
 * nesting, recursion, sleeping and CPU migration, unlike a per-CPU slot),
 * and then, depending on what user space asked for (frozen .rodata):
 *   - stream compact records through the ringbuf of their CPU (want_events): a 32-byte
 *     header, the arguments only on entries (and on deferred exits), the
 *     duration and return value on exits, and the thread's comm only when
 *     user space has not seen it (first record of a thread, after an exec
 *     or a rename);
 *   - aggregate per function in BPF maps (want_agg): calls, errors by
 *     errno, sum, max and a log-linear duration histogram.
 * Wakeups are batched: records are committed without waking the reader,
 * which polls with a bounded delay, unless a quarter of the ring is
 * unread (asked every 64th record of a CPU).
 *
 * Attach paths (function id and return-type flags in the attach cookie):
 *   fentry / fexit            one program instance per function (>= 5.19)
 *   kprobe.multi / kretprobe.multi, or one kprobe.session link (6.10)
 *   fsession                  one program per function, entry and exit (7.0)
 *   fentry.multi / fexit.multi / fsession.multi   one link (7.x)
 *   kprobe / kretprobe        one perf-event link per function (>= 5.15)
 * In the session modes a call rejected at entry (filters, not armed) does
 * not run its exit program at all: the entry returns 1.
 * The trampoline programs of the 7.x attach types are loaded by
 * internal/attach (tracingmulti.go), which sets the attach type and target
 * that cilium/ebpf v0.22 cannot; their sections here only name the family.
 */
#include "ftprobe.h"

char __license[] SEC("license") = "GPL";

enum ftp_kind {
	FTP_ENTRY = 1,
	FTP_EXIT = 2,
	FTP_COMM = 3, /* a thread's tgid and comm, sent before its next event */
	FTP_CALL = 4, /* a leaf call's entry and exit in one record (leaf_records) */
};

enum ftp_mode {
	FTP_MODE_FENTRY = 1,
	FTP_MODE_KPROBE_MULTI = 2,
	FTP_MODE_KPROBE = 3,
	FTP_MODE_FSESSION = 4,       /* fsession: one program, entry and exit */
	FTP_MODE_FENTRY_MULTI = 5,   /* fentry.multi + fexit.multi links */
	FTP_MODE_FSESSION_MULTI = 6, /* fsession.multi link */
	FTP_MODE_KPROBE_SESSION = 7, /* one kprobe.session link */
};

enum ftp_flags {
	FTP_F_NO_ENTRY = 1,  /* exit without a recorded entry: duration unknown */
	FTP_F_HAS_ARGS = 2,  /* the record carries nargs arguments */
	FTP_F_DEFERRED = 4,  /* entry was not emitted (duration/errors filter) */
	FTP_F_STRINGS = 8,   /* the tail's str_* fields are valid (--strings) */
	FTP_F_STACK = 16,    /* the tail's stack_len/kstack are valid (--stack) */
	FTP_F_FULL = 32,     /* a struct rec_full (comm and tail included) */
	FTP_F_VALS = 64,     /* a struct rec_x: --arg values after the arguments */
};

/* Indexes of the loss and hit counters (global `ftp_stats`, one row per
 * CPU). */
enum ftp_stat {
	FTP_STAT_RINGBUF_DROP = 0,  /* the ringbuf was full */
	FTP_STAT_NO_ENTRY = 1,      /* exit with no matching entry frame */
	FTP_STAT_DEPTH_OVERFLOW = 2,/* entry deeper than FTP_MAX_DEPTH */
	FTP_STAT_UNWOUND = 3,       /* frames popped without their own exit */
	FTP_STAT_STACK_FULL = 4,    /* no frame storage for the thread */
	FTP_STAT_ENTRY_HITS = 5,    /* entries that passed the filters */
	FTP_STAT_EXIT_HITS = 6,     /* exits that passed the filters, or whose entry did */
	FTP_STAT_STR_FAULT = 7,     /* --strings: a string read failed (<fault>) */
	FTP_STAT_STACK_FAIL = 8,    /* --stack: bpf_get_stack failed */
	FTP_STAT_TREE_FULL = 9,     /* a forked process not followed: tgids full */
	FTP_STAT_AGG_FULL = 10,     /* an errno not counted: the errs map was full */
	FTP_STAT_ENTRY_ONLY = 11,   /* entries of entry-only functions (no frame pushed) */
	FTP_STAT_X_REJECT = 12,     /* calls a --filter rejected (at entry or at exit) */
	FTP_STAT_X_FAULT = 13,      /* --arg/--filter reads that faulted (<fault>, or the comparison false) */
	FTP_STAT_WINDOW_REJECT = 14,/* --entry: calls outside any entry function's window, returned early */
	FTP_STAT_MAX = 15,
	/* Frames still open = (ENTRY_HITS - STACK_FULL - ENTRY_ONLY) pushed
	 * - (EXIT_HITS - NO_ENTRY + UNWOUND) closed: one counter per event. */
};

/* Per-function flags in bits 32-63 of the attach cookie (bits 0-31 hold
 * the function id), filled from BTF in user space. Bits 8-15 hold the
 * return type's size in bytes (0 = unknown: keep 64 bits). The ABI leaves
 * the upper bits of a narrower return register unspecified, so they are
 * masked or sign-extended here. */
enum ftp_func_flags {
	FTP_FN_RET_SIGNED = 1, /* signed integer return */
	FTP_FN_RET_PTR = 2,    /* pointer return (ERR_PTR aware) */
	FTP_FN_RET_VOID = 4,
	FTP_FN_ENTRY_ONLY = 8, /* no exit probe (noreturn): the entry pushes no frame */
	FTP_FN_WINDOW_ENTRY = 16, /* --entry function: its calls open the thread's window */
};

/* --strings: bits 16-18 and 19-21 of a function's flags hold 1 + the
 * argument index of its first and second `char *` parameter (0 = none),
 * chosen from BTF in user space. Bits 24-27 hold the number of arguments
 * the function has (at most FTP_MAX_ARGS are recorded). */
#define FTP_FN_STR_SHIFT 16
#define FTP_FN_NARGS_SHIFT 24

/* An entry predicate that reads argument registers only (xprog.entry_regs)
 * in the cookie's flags, for the fentry and session programs (fentry,
 * fentry.multi, fsession, fsession.multi, kprobe.session): its xpred
 * program number (1 .. FTP_FN_PRED_MAX; 0: none here, look up xprogs) in
 * bits 28-31 and its pred_nargs in bits 5-7. A call it rejects is decided
 * without the xprogs lookup at entry (and again at the fexit in the
 * fentry modes): 20-45 instructions fewer per rejected fentry+fexit call
 * on arm64 7.3 (compare --body predicate under icount, docs/benchmarks.md).
 * The session programs decide the same way at their entry run, from the
 * same bits. */
enum ftp_func_pred {
	FTP_FN_PRED_NARGS_SHIFT = 5,
	FTP_FN_PRED_SHIFT = 28,
	FTP_FN_PRED_MAX = 15,
};
/* only_nargs's value when the trace's one function's argument registers
 * are not known (several functions, no BTF prototype, a struct passed by
 * value, variadic): fn_nargs asks bpf_get_func_arg_cnt. Also the fn_slots()
 * immediate user space gives multi programs (attach.simplifyPrograms). */
enum ftp_nargs {
	FTP_NARGS_UNKNOWN = 0xff,
};
#define FTP_MAX_STRS 2      /* strings read per event */
#define FTP_STR_LEN 128     /* bytes per string, NUL included */
#define FTP_STACK_DEPTH 32  /* kernel stack frames per event */

/* str_flags bits per string slot. */
enum ftp_str_flags {
	FTP_S_TRUNCATED = 1, /* the string is longer than FTP_STR_LEN - 1 */
	FTP_S_USER = 2,      /* read as a user pointer */
};

/* Every ringbuf record starts with this header (32 bytes). What follows
 * depends on kind and flags:
 *   FTP_ENTRY               args[nargs]
 *   FTP_EXIT                duration_ns, ret, then args[nargs] if HAS_ARGS
 *   FTP_CALL                as FTP_EXIT, args[nargs] always: the entry is at
 *                           ts_ns - duration_ns (leaf_records)
 *   FTP_COMM                struct rec_comm
 *   flags & FTP_F_FULL      struct rec_full (--strings, --stack) */
struct rec_hdr {
	__u64 ts_ns;     /* bpf_ktime_get_ns() at this event */
	__u32 tgid;
	__u32 tid;
	__u32 func_id;   /* index into user space's function table */
	__u16 depth;     /* call depth of this thread, 0 = outermost */
	__u16 cpu;
	__u8 kind;       /* enum ftp_kind */
	__u8 mode;       /* enum ftp_mode */
	__u8 flags;      /* enum ftp_flags */
	__u8 nargs;      /* arguments carried (compact records) or valid (full) */
	__u16 entry_cpu; /* FTP_CALL: the CPU the call entered on (cpu: where it returned) */
	__u16 _pad;
};

struct rec_entry {
	struct rec_hdr h;
	__u64 args[FTP_MAX_ARGS];
};

struct rec_exit {
	struct rec_hdr h;
	__u64 duration_ns; /* time since the matching entry */
	__s64 ret;         /* return value, sign-extended for int */
	__u64 args[FTP_MAX_ARGS];
};

struct rec_comm {
	struct rec_hdr h;
	char comm[FTP_COMM_LEN];
};

struct rec_full {
	struct rec_hdr h;
	__u64 duration_ns;
	__s64 ret;
	__u64 args[FTP_MAX_ARGS];
	char comm[FTP_COMM_LEN];
	__s16 str_len[FTP_MAX_STRS]; /* bytes read incl. NUL, -errno on a fault, 0 = none/NULL */
	__u8 str_arg[FTP_MAX_STRS];  /* argument index of each string */
	__u8 str_flags[FTP_MAX_STRS];/* enum ftp_str_flags */
	__s32 stack_len;             /* bytes in kstack, or -errno from bpf_get_stack */
	__u32 _pad2;
	char str[FTP_MAX_STRS][FTP_STR_LEN];
	__u64 kstack[FTP_STACK_DEPTH]; /* return addresses, innermost first */
};

/* --arg / --filter (internal/expr). The --filter predicates are BPF
 * instructions generated per trace (xpred). The --arg values are a
 * bounded fetch program per function, in the xprogs array by function id,
 * interpreted here (xvals). A fetch starts from an argument register
 * (0-5) or the return value (6), reads nload times (8 bytes at value +
 * off[i], the last read `size` bytes), adds tail (or, for a bitfield,
 * shifts it down and cuts it to its width) and applies mask. Every
 * read is a probe read, kernel or user chosen by the address's sign; a
 * fault ends the fetch. */
#define FTP_X_LOADS 4  /* memory reads per fetch */
#define FTP_X_VALS 4   /* --arg values per function */
#define FTP_X_STR 64   /* string bytes, NUL included */
#define FTP_X_RET 6    /* xfetch.src of the return value */
/* Whole structs (--arg '*file'): up to FTP_X_BYTES bytes per event, shared
 * in order by the function's struct values, each read with one probe read
 * into rec_x.b at its offset there. 512 keeps a record under 1 KiB; the
 * buffer is twice that so that the verifier can prove a read of up to 512
 * bytes at any offset below 512 in bounds. Only the bytes used are sent. */
#define FTP_X_BYTES 512

enum ftp_xflags {
	FTP_XF_SIGNED = 1, /* sign-extend the value from size bytes */
	FTP_XF_STR = 2,    /* the value is a string's address */
	FTP_XF_MASK = 4,   /* value &= mask */
	FTP_XF_BYTES = 8,  /* the value is a struct's address: read its bytes (xprog.boff/blen) */
	FTP_XF_BITS = 16,  /* a bitfield: tail holds its shift (bits 0-7) and width (bits 8-15) in the size bytes read */
};

struct xfetch {
	__u8 src;
	__u8 nload;
	__u8 size;  /* bytes of the value: 1, 2, 4 or 8 */
	__u8 flags; /* enum ftp_xflags */
	__s32 tail;
	__s32 off[FTP_X_LOADS];
	__u64 mask;
};

struct xprog {
	__u8 nvals;
	__u8 exit_args;  /* the exit predicate reads arguments: undecidable without an entry */
	__u8 entry_regs; /* the entry predicate reads argument registers only: an fexit decides it again */
	__u8 pred_nargs; /* the entry predicate reads arguments 0 .. pred_nargs - 1 */
	__u16 pentry;    /* xpred's program deciding at entry (0: none) */
	__u16 pexit;     /* xpred's program deciding at exit, on ret (0: none) */
	struct xfetch v[FTP_X_VALS];
	__u16 boff[FTP_X_VALS]; /* FTP_XF_BYTES: offset in rec_x.b, < FTP_X_BYTES */
	__u16 blen[FTP_X_VALS]; /* FTP_XF_BYTES: bytes to read, 1..FTP_X_BYTES */
	__u16 nbytes;           /* bytes of rec_x.b used (sent), <= FTP_X_BYTES */
	__u16 _pad2[3];
};

/* enum ftp_xval_flags per --arg value. */
enum ftp_xval_flags {
	FTP_XV_TRUNCATED = 1, /* string longer than FTP_X_STR - 1 */
	FTP_XV_STR = 4,       /* a string value (v = its address) */
	FTP_XV_BYTES = 8,     /* a struct's bytes (v = its address), in rec_x.b */
};

/* --arg values of one event. len: 0 = the value is v (or a NULL string),
 * > 0 = string bytes in s incl. NUL, or struct bytes read into rec_x.b,
 * < 0 = -errno of a faulted read. */
struct xvals {
	__u64 v[FTP_X_VALS];
	__s16 len[FTP_X_VALS];
	__u8 flags[FTP_X_VALS];
	__u32 _pad;
	char s[FTP_X_VALS][FTP_X_STR];
};

/* A record with --arg values (FTP_F_VALS): an entry, or a deferred exit. */
struct rec_x {
	struct rec_hdr h;
	__u64 duration_ns;
	__s64 ret;
	__u64 args[FTP_MAX_ARGS];
	struct xvals x;
	/* Struct bytes (FTP_XF_BYTES): only the first xprog.nbytes are sent. */
	__u8 b[2 * FTP_X_BYTES];
};

struct xctx {
	__u64 args[FTP_MAX_ARGS];
	__s64 ret;
};

/* The decoded event as user space keeps it (internal/events): every
 * record kind decodes into one of these; never written here. */
struct event {
	__u64 ts_ns;
	__u64 duration_ns;
	__u64 args[FTP_MAX_ARGS];
	__s64 ret;
	__u32 tgid;
	__u32 tid;
	__u32 func_id;
	__u32 cpu;
	__u16 depth;
	__u8 kind;
	__u8 mode;
	__u8 flags;
	__u8 nargs;
	char comm[FTP_COMM_LEN];
	__u8 _pad[2];
	__s16 str_len[FTP_MAX_STRS];
	__u8 str_arg[FTP_MAX_STRS];
	__u8 str_flags[FTP_MAX_STRS];
	__s32 stack_len;
	__u32 _pad2;
	char str[FTP_MAX_STRS][FTP_STR_LEN];
	__u64 kstack[FTP_STACK_DEPTH];
	struct xvals x; /* FTP_F_VALS */
	__u8 xb[FTP_X_BYTES]; /* FTP_F_VALS: the struct bytes */
};

struct frame {
	__u64 ts_ns;
	/* leaf_records: the entry is not sent yet (args hold its arguments).
	 * Taken with an atomic exchange (64 bits: clang's -mcpu=v1 has no
	 * 32-bit one): a program nested on this thread (an interrupt's fentry)
	 * and this call's own exit may both want to send it, and exactly one
	 * does. */
	__u64 pending;
	__u32 func_id;
	__u16 cpu;     /* leaf_records: the CPU the call entered on */
	__u8 nargs;
	__u8 rejected; /* --filter rejected the call at entry: its exit is dropped */
	__u8 win;      /* the thread's window depth before this call (--entry) */
	__u8 _pad[3];
	__u32 comm_gen; /* leaf_records: the thread's comm_gen at entry */
	__u64 args[FTP_MAX_ARGS]; /* written only when the exit carries them (deferred, pending) */
};

struct tstack {
	__u32 depth;     /* frames in use */
	__u32 overflow;  /* entries beyond FTP_MAX_DEPTH not recorded */
	__u32 comm_sent; /* user space has this thread's current comm */
	/* Bumped at every comm change (exec, rename): a pending entry whose
	 * comm_gen differs was entered under the comm user space has, and is
	 * sent before the new one (leaf_records). */
	__u32 comm_gen;
	__u32 window;    /* --entry: entry-function calls open on this thread */
	struct frame f[FTP_MAX_DEPTH];
};

/* In-kernel aggregation (want_agg): durations in a log-linear histogram.
 * Below 16 ns one bucket per ns; above, 8 buckets per power of two
 * (bucket = 16 + (msb - 4) * 8 + the 3 bits below the msb), up to 2^41 ns;
 * the last bucket holds longer calls. A bucket [lo, lo + w) has w <= lo/8,
 * so its midpoint is within 1/16 (6.25%) of any value in it. */
#define FTP_HIST_MAXLOG 40
#define FTP_HIST_BUCKETS (16 + (FTP_HIST_MAXLOG - 4 + 1) * 8 + 1)

/* calls = untimed + the histogram's total (timed calls): two atomic adds
 * per timed call (sum, bucket). */
struct agg {
	__u64 untimed; /* exits counted without a recorded entry (no duration) */
	__u64 errors;  /* calls that returned an error */
	__u64 sum_ns;  /* sum of the durations */
	__u64 max_ns;
	__u64 hist[FTP_HIST_BUCKETS];
};

struct errkey {
	__u32 func_id;
	__s32 err; /* negative errno */
};


/* Keeps the record types in BTF for bpf2go -type. */
const struct event *unused_event __attribute__((unused));
const struct rec_entry *unused_rec_entry __attribute__((unused));
const struct rec_exit *unused_rec_exit __attribute__((unused));
const struct rec_comm *unused_rec_comm __attribute__((unused));
const struct rec_full *unused_rec_full __attribute__((unused));
const struct agg *unused_agg __attribute__((unused));
const struct errkey *unused_errkey __attribute__((unused));
const struct xprog *unused_xprog __attribute__((unused));
const struct rec_x *unused_rec_x __attribute__((unused));
const enum ftp_xflags *unused_xflags __attribute__((unused));
const enum ftp_xval_flags *unused_xval_flags __attribute__((unused));
const enum ftp_stat *unused_stat __attribute__((unused));
const enum ftp_kind *unused_kind __attribute__((unused));
const enum ftp_mode *unused_mode __attribute__((unused));
const enum ftp_flags *unused_flags __attribute__((unused));
const enum ftp_func_flags *unused_func_flags __attribute__((unused));
const enum ftp_func_pred *unused_func_pred __attribute__((unused));
const enum ftp_nargs *unused_nargs __attribute__((unused));

/* Records are written in place into the memory of the CPU they run on:
 * `areas`, a BPF_F_MMAPABLE array that user space maps (arraymap.c
 * array_map_mmap, 5.5). CPU c owns the elements [c * area_stride,
 * (c + 1) * area_stride): the first holds its head, advanced by that
 * CPU's programs with a compare-and-swap (a program nested on the CPU
 * reserves after the one it interrupted), and its tail, advanced by the
 * reader; the others hold the records. A record at position pos of the
 * CPU's stream lives in element 1 + ((pos >> FTP_AREA_SHIFT) & area_mask)
 * at offset pos & (FTP_AREA_CHUNK - 1) and may run into that element's
 * FTP_AREA_SLACK bytes past the chunk, so no record is ever split. An
 * 8-byte word before each record holds its length, stored last with an
 * exchange (every byte of the record visible before it), 0 until then;
 * the reader zeroes what it consumed before it advances the tail. No lock,
 * no helper call, no wakeup: the reader polls with a bounded delay. */
enum ftp_area {
	FTP_AREA_SHIFT = 16,
	FTP_AREA_CHUNK = 1 << FTP_AREA_SHIFT, /* record bytes per element */
	FTP_AREA_SLACK = 2048,                /* > 8 + the largest record (rec_x) */
};
#define FTP_MAX_COMPACT 96 /* largest compact record: an exit with its arguments */
_Static_assert(sizeof(struct rec_x) + 8 <= FTP_AREA_SLACK && sizeof(struct rec_full) + 8 <= FTP_AREA_SLACK, "a record fits in the slack");
_Static_assert(sizeof(struct rec_exit) <= FTP_MAX_COMPACT, "compact records fit output");

struct area_ctl {
	__u64 head; /* bytes reserved since the start, by the CPU's programs */
	__u64 _pad[7];
	__u64 tail; /* bytes consumed, by the reader */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, FTP_AREA_CHUNK + FTP_AREA_SLACK);
} areas SEC(".maps");

volatile const __u32 area_cpus = 0;   /* CPUs 0 .. area_cpus-1 have an area */
volatile const __u32 area_stride = 1; /* elements per CPU: 1 + area_mask + 1 */
volatile const __u32 area_mask = 0;   /* record elements per CPU - 1 (a power of two - 1) */

const struct area_ctl *unused_area_ctl __attribute__((unused));
const enum ftp_area *unused_area __attribute__((unused));

/* Per-thread frame stacks in task-local storage (5.11; freed with the
 * task, no per-call insert/delete). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstack);
} tframes SEC(".maps");

/* Fallback (frames_in_hash) where a program type cannot use task storage:
 * a plain preallocated hash keyed by tid, the entry deleted when the
 * thread's outermost traced call returns. */
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
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of functions with want_agg */
	__type(key, __u32);     /* func id */
	__type(value, struct agg);
} aggs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct errkey);
	__type(value, __u64);
} errs SEC(".maps");

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

/* --arg/--filter programs by function id (max_entries set to the number
 * of functions when any expression is given). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xprog);
} xprogs SEC(".maps");

/* A record with values is built here, then copied to the ringbuf. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rec_x);
} xscratch SEC(".maps");

/* Armed by user space (a global, written through the mmaped .bss) once
 * every link is attached, disarmed before the first is detached: while
 * links come and go one by one (an fentry link attaches before its fexit
 * link; fentry mode attaches functions one at a time), entries whose exits
 * cannot be seen would pile up on the frame stacks. Calls that straddle
 * arming are counted as in flight, but for those of a function whose
 * entry predicate marks its rejections (marks_rejected): their exits,
 * which find no frame, are dropped uncounted (on_exit). */
volatile __u32 armed = 0;

/* Counters, one 128-byte row per CPU (no false sharing), added to
 * atomically (a program nested on the same CPU cannot lose a count). CPUs
 * beyond FTP_NCPU share rows, still exactly. */
#define FTP_NCPU 512
#define FTP_STAT_STRIDE 16
volatile __u64 ftp_stats[FTP_NCPU][FTP_STAT_STRIDE] = {};

/* Set by user space before load (frozen .rodata). */
volatile const __u32 filter_tgid = 0;
volatile const __u32 filter_tid = 0;
volatile const __u8 filter_tree = 0;
volatile const __u8 filter_comm_len = 0;
volatile const char filter_comm[FTP_COMM_LEN] = {};
/* The settings below are frozen .rodata in the general object. Two
 * variants fix some of them at compile time, so that clang drops every
 * path they rule out (the settings' reads folded before load,
 * inlineRodata, still leave the moves that fed the branches the verifier
 * removes): the lean object (bpf2go TraceLean, -DFTP_LEAN), the plain
 * trace; the filter object (TraceFilter, -DFTP_FILTER), records with
 * --filter, --min-duration or --errors; the stat object (TraceStat,
 * -DFTP_STAT), tables without records. FTP_SETTING(type, name, default,
 * lean, filter, stat): the values fixed there, FTP_VAR where it stays a
 * setting. internal/attach
 * loads a variant when the options match the values it fixes (variants). */
#define FTP_VAR_IS_FTP_VAR ,
#define FTP_SECOND(a, b, ...) b
#define FTP_IS_VAR(x) FTP_IS_VAR_(x) /* 1 for FTP_VAR, else 0 */
#define FTP_IS_VAR_(x) FTP_SECOND_(FTP_VAR_IS_##x 1, 0, ~)
#define FTP_SECOND_(...) FTP_SECOND(__VA_ARGS__)
#if defined(FTP_LEAN) + defined(FTP_FILTER) + defined(FTP_STAT) > 1
#error "at most one of FTP_LEAN, FTP_FILTER, FTP_STAT"
#endif
/* A fixed value must be a plain token (0, 1): it is pasted. */
#if defined(FTP_LEAN)
#define FTP_PICK(lean, filter, stat) lean
#elif defined(FTP_FILTER)
#define FTP_PICK(lean, filter, stat) filter
#elif defined(FTP_STAT)
#define FTP_PICK(lean, filter, stat) stat
#endif
#ifdef FTP_PICK
#define FTP_SETTING(type, name, dflt, lean, filter, stat) \
	FTP_SETTING_(FTP_IS_VAR(FTP_PICK(lean, filter, stat)), type, name, dflt, FTP_PICK(lean, filter, stat))
#define FTP_SETTING_(isvar, type, name, dflt, v) FTP_SETTING__(isvar, type, name, dflt, v)
#define FTP_SETTING__(isvar, type, name, dflt, v) FTP_SETTING_##isvar(type, name, dflt, v)
#define FTP_SETTING_1(type, name, dflt, v) volatile const type name = dflt
/* A fixed setting is a constant, and its value is also kept as
 * ftp_fixed_NAME, read by no program: internal/attach's test checks its
 * variants table against it. */
#define FTP_SETTING_0(type, name, dflt, v) \
	static const type name = v;        \
	volatile const type ftp_fixed_##name = v
#else
#define FTP_SETTING(type, name, dflt, lean, filter, stat) volatile const type name = dflt
#endif
FTP_SETTING(__u64, min_duration_ns, 0, 0, FTP_VAR, FTP_VAR);
FTP_SETTING(__u8, errors_only, 0, 0, FTP_VAR, FTP_VAR);
FTP_SETTING(__u8, want_strings, 0, 0, 0, 0);   /* --strings */
FTP_SETTING(__u8, want_stack, 0, 0, 0, 0);     /* --stack */
FTP_SETTING(__u8, want_events, 1, 1, 1, 0);    /* stream records */
FTP_SETTING(__u8, want_agg, 0, 0, 0, 1);       /* aggregate per function in aggs/errs */
FTP_SETTING(__u8, frames_in_hash, 0, 0, 0, FTP_VAR); /* no task storage for this program type */
/* Some traced function is entry only (FTP_FN_ENTRY_ONLY): the stat path
 * of kprobe.session then reads the cookie at entry (session_agg). */
volatile const __u8 entry_only_funcs = 0;
FTP_SETTING(__u8, x_entry, 0, 0, FTP_VAR, FTP_VAR); /* some function has a --filter part decided at entry */
FTP_SETTING(__u8, x_exit, 0, 0, FTP_VAR, FTP_VAR);  /* some function has a --filter part on ret (decided at exit) */
FTP_SETTING(__u8, x_vals, 0, 0, 0, 0);  /* some function has --arg values */
/* --entry: only calls inside a call of an entry function (FTP_FN_WINDOW_ENTRY)
 * on the same thread are recorded; the others return at entry. */
FTP_SETTING(__u8, window, 0, 0, 0, FTP_VAR);
/* One record per leaf call: an entry is kept in its frame (pending) and
 * sent with its exit as one FTP_CALL record, or on its own before the
 * first record of a call nested in it (or before an exit that unwinds
 * it). A leaf call's entry reaches user space when it returns; a call
 * still running when the trace stops is counted (entries without exit)
 * but not shown. Only on the compact path (FTP_LEAF). */
FTP_SETTING(__u8, leaf_records, 0, 1, FTP_VAR, 0);

/* --entry: threads that exited while inside a window (tp_btf/sched_process_exit). */
volatile __u64 window_exits = 0;
/* --entry: the sum of every thread's window depth (set_window). Zero: no
 * thread is inside an entry function's call, and a call of another
 * function is rejected on this one load, without looking up its thread's
 * frames. Each thread changes only its own share, raising it before its
 * window opens and lowering it after it closes, so a thread inside a
 * window (or an interrupt on it) always reads it non-zero. */
volatile __u64 windows_open = 0;
#define FTP_X_ANY (x_entry || x_exit || x_vals)
/* only_cookie: the attach cookie of the trace's one function (0: it has
 * several), set by user space before load and folded into the programs
 * (attach.inlineRodata), so that they need no bpf_get_attach_cookie. In
 * the kprobe modes that helper is a bsearch of the call's address in the
 * link's sorted addresses (kernel/trace/bpf_trace.c,
 * bpf_kprobe_multi_cookie): ~70 instructions per call for kprobe.session
 * with one function on arm64 7.3 (insnprof, compare --body agg), more
 * with log2 of the functions a link holds. */
volatile const __u64 only_cookie = 0;
/* only_nargs: the argument registers of the trace's one function, at most
 * FTP_MAX_ARGS, when its BTF prototype says (no struct passed by value,
 * not variadic; attach.onlyNargs), else FTP_NARGS_UNKNOWN: fn_nargs's count in a
 * program that may not read its arguments from ctx, a multi program
 * above all (the kernel checks those reads against bpf_multi_func(void)
 * and refuses every one), so that the loops over the arguments are
 * decided before load instead of by bpf_get_func_arg_cnt. */
volatile const __u32 only_nargs = FTP_NARGS_UNKNOWN;

static __always_inline __u64 attach_cookie(void *ctx)
{
	/* One read: two (volatile) reads share the address in a register,
	 * and attach.inlineRodata folds a kept address's loads only into
	 * 32-bit immediates, which a cookie does not fit. */
	__u64 c = only_cookie;
	if (c)
		return c;
	return bpf_get_attach_cookie(ctx);
}

/* Index into a thread's frames, masked in a way clang cannot optimize
 * away: when it knows the value is in range it drops a C mask, and older
 * verifiers (6.12) then lose the bound across 32-bit arithmetic. */
#define FTP_SLOT(x) ({                                                   \
	__u64 __v = (__u64)(x);                                          \
	asm volatile("%[v] &= %[m]" : [v] "+r"(__v) : [m] "i"(FTP_MAX_DEPTH - 1)); \
	__v;                                                             \
})

static __always_inline void count_n(__u32 idx, __u64 n)
{
	__u32 cpu = bpf_get_smp_processor_id() & (FTP_NCPU - 1);
	if (idx < FTP_STAT_STRIDE)
		__sync_fetch_and_add(&ftp_stats[cpu][idx], n);
}

static __always_inline void count(__u32 idx) { count_n(idx, 1); }

/* The pid and tid filters: fixed for a call's lifetime, except across a
 * non-leader thread's exec, which takes the leader's tid in de_thread. */
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

/* FTP_ID_FILTERS: a filter asks for the task's ids or comm. Without one
 * (frozen settings: the verifier drops the branch) the stat path of the
 * session modes does not call bpf_get_current_pid_tgid. */
#define FTP_ID_FILTERS (filter_tgid || filter_tid || filter_tree || filter_comm_len)

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

/* xread reads size (1..8) bytes at addr: a user address (the lower half)
 * with the user helper, else the kernel one. */
static __always_inline long xread(void *dst, __u32 size, __u64 addr)
{
	if ((__s64)addr >= 0)
		return bpf_probe_read_user(dst, size, (void *)addr);
	return bpf_probe_read_kernel(dst, size, (void *)addr);
}

static __always_inline long xread_str(char *dst, __u32 size, __u64 addr)
{
	if ((__s64)addr >= 0)
		return bpf_probe_read_user_str(dst, size, (void *)addr);
	return bpf_probe_read_kernel_str(dst, size, (void *)addr);
}

/* The interpreter is inlined, not BPF-to-BPF calls: the trampoline
 * loader (internal/attach, tracingmulti.go) loads no subprograms.
 *
 * xfetch runs one fetch. Returns 0, or the -errno of a faulted read. */
static __always_inline int xfetch(const struct xfetch *f, const struct xctx *c, __u64 *out)
{
	__u64 v = 0;
	__u32 src = f->src;
	if (src == FTP_X_RET)
		v = c->ret;
	else if (src < FTP_MAX_ARGS)
		v = c->args[src];
	__u32 n = f->nload & 7;
	__u32 size = ((f->size - 1) & 7) + 1;
	/* Pointers (8 bytes) up to the last read, which reads size bytes;
	 * then the value is cut to size and sign-extended without branches
	 * (fewer verifier states per comparison). */
	for (int i = 0; i < FTP_X_LOADS - 1; i++) {
		if ((__u32)i + 1 >= n)
			break;
		__u64 tmp = 0;
		long err = xread(&tmp, 8, v + (__s64)f->off[i & (FTP_X_LOADS - 1)]);
		if (err)
			return err;
		v = tmp;
	}
	if (n > 0) {
		__u64 tmp = 0;
		long err = xread(&tmp, size, v + (__s64)f->off[(n - 1) & (FTP_X_LOADS - 1)]);
		if (err)
			return err;
		v = tmp;
	}
	__u64 sm = -(__u64)(f->flags & FTP_XF_SIGNED);
	if (f->flags & FTP_XF_BITS) {
		/* Down to bit 0, cut to the field's width, sign-extended when
		 * signed (the size bytes read hold the whole field). */
		__u64 shift = f->tail & 63;
		__u64 up = (64 - ((f->tail >> 8) & 63)) & 63;
		v = (v >> shift) << up;
		v = (((__u64)((__s64)v >> up)) & sm) | ((v >> up) & ~sm);
	} else {
		__u64 sh = 64 - size * 8;
		__u64 lo = (v << sh) >> sh;
		__u64 se = (__u64)(((__s64)(v << sh)) >> sh);
		v = (se & sm) | (lo & ~sm);
		v += (__s64)f->tail;
	}
	if (f->flags & FTP_XF_MASK)
		v &= f->mask;
	*out = v;
	return 0;
}

/* xvals reads a function's --arg values into out, counting the faulted
 * reads (counted where they happen: a running total would make each
 * combination of faults a distinct verifier state). */
static __always_inline void xvals(const struct xprog *p, const struct xctx *c, struct xvals *out, __u8 *b)
{
	__u32 nv = p->nvals;
	for (int i = 0; i < FTP_X_VALS; i++) {
		out->v[i] = 0;
		out->len[i] = 0;
		out->flags[i] = 0;
		if ((__u32)i >= nv)
			continue;
		__u64 v = 0;
		int err = xfetch(&p->v[i], c, &v);
		if (err) {
			out->len[i] = err;
			count(FTP_STAT_X_FAULT);
			continue;
		}
		out->v[i] = v;
		if (p->v[i].flags & FTP_XF_BYTES) {
			/* Masked where clang cannot undo it: off < 512, n in 1..512,
			 * inside the 1024-byte buffer. */
			__u32 off = p->boff[i];
			__u32 n = p->blen[i];
			asm volatile("%[v] &= 511" : [v] "+r"(off));
			n -= 1;
			asm volatile("%[v] &= 511" : [v] "+r"(n));
			n += 1;
			out->flags[i] = FTP_XV_BYTES;
			long err = xread(b + off, n, v);
			if (err) {
				out->len[i] = err;
				count(FTP_STAT_X_FAULT);
				continue;
			}
			out->len[i] = n;
			continue;
		}
		if (!(p->v[i].flags & FTP_XF_STR))
			continue;
		out->flags[i] = FTP_XV_STR;
		if (!v)
			continue; /* NULL */
		long n = xread_str(out->s[i], FTP_X_STR, v);
		if (n < 0) {
			count(FTP_STAT_X_FAULT);
		} else if (n == FTP_X_STR) {
			char last = 0;
			xread(&last, 1, v + FTP_X_STR - 1);
			if (last)
				out->flags[i] |= FTP_XV_TRUNCATED;
		}
		out->len[i] = n;
	}
}

/* xpred is the --filter predicates of every function, generated as BPF
 * instructions by internal/expr (codegen.go) and put in place of this
 * stub's body before the program is loaded: a compiled comparison costs a
 * few instructions where interpreting the predicate in BPF costs about
 * 530 per call. sel picks the function's entry or
 * exit program (xprog.pentry/pexit, 1-based); args are the call's
 * arguments (its entry's at exit), ret its return value (exit). Returns 1
 * (pass) or 0 (reject); a faulted comparison is false and counted
 * (FTP_STAT_X_FAULT) by the generated code. A static subprogram: the
 * verifier checks it in each caller's context (args on the caller's
 * stack). The stub keeps its three arguments live and its result opaque,
 * so clang neither drops nor folds them. */
static __attribute__((noinline)) __u64 xpred(__u64 *args, __u64 ret, __u64 sel)
{
	__u64 r = 1;
	asm volatile("" : "+r"(r) : "r"(args), "r"(ret), "r"(sel));
	return r;
}

/* xpass runs function's predicate sel (0: none, the call passes). */
static __always_inline int xpass(__u64 *args, __u64 ret, __u32 sel)
{
	if (!sel)
		return 1;
	return xpred(args, ret, sel) != 0;
}

/* xrejects runs entry predicate psel (entry_pred) on args and counts
 * the call when it rejects it: 1 then (rejected_at_entry; session_agg,
 * whose exit run finds no timestamp or does not run). */
static __always_inline int xrejects(__u64 *args, __u32 psel)
{
	if (xpass(args, 0, psel))
		return 0;
	count(FTP_STAT_X_REJECT);
	return 1;
}

static __always_inline struct xprog *xprog_of(__u32 func_id)
{
	if (!FTP_X_ANY)
		return 0;
	return bpf_map_lookup_elem(&xprogs, &func_id);
}

/* fetch_args reads a trampoline program's arguments from .. to - 1 into
 * args, up to the function's n (bpf_get_func_arg_cnt): inlined
 * bpf_get_func_arg (5.17) each, stopping at the first argument past n or
 * to, so a function with few arguments pays for few. The one copy of the
 * fetch loop (entry, the entry predicate's two phases, its second decision
 * at fexit, stat in fsession). */
static __always_inline void fetch_args(void *ctx, __u64 *args, __u64 n, __u32 from, __u32 to)
{
	for (int i = 0; i < FTP_MAX_ARGS; i++) {
		if ((__u64)i >= n || (__u32)i >= to)
			break;
		if ((__u32)i >= from)
			bpf_get_func_arg(ctx, i, &args[i]);
	}
}

/* fn_slots: the number of argument registers of the one function a
 * trampoline program is loaded for, at most FTP_MAX_ARGS: the 64-bit
 * immediate FTP_FN_SLOTS_ANY is replaced per function by user space
 * (specialize.ForFunc) when the function's BTF prototype maps each of its
 * first six parameters to one register (no struct passed by value). Left
 * as it is (a multi link, or another prototype), the arguments come
 * through bpf_get_func_arg. The lean and filter objects only, without an
 * entry predicate: a direct ctx read gives a struct pointer its BTF type,
 * which copying tolerates (to frames, records) but not the arithmetic of
 * an entry --filter or --arg (nor --strings, which compares and adds to
 * it); read back from a frame at exit it is a plain value again. The
 * parameters user space patches a count for are those every supported
 * kernel's btf_ctx_access reads (attach.FuncSlots); a kernel that refuses
 * one anyway fails the load (attach.loadForFunc, no retry). 65
 * instructions fewer per fentry+fexit and fsession trace call on arm64
 * 7.3 (compare, icount, 5 arguments). */
#define FTP_FN_SLOTS_ANY 0x746f6c735f707466ULL /* "ftp_slot" */
static __always_inline __attribute__((unused)) __u64 fn_slots(void)
{
	__u64 v;
	asm volatile("%[v] = %[m] ll" : [v] "=r"(v) : [m] "i"(FTP_FN_SLOTS_ANY));
	return v;
}

/* fn_scalars: which of those arguments (bit i: argument i) are integers,
 * enums or bools, which a direct ctx read gives as plain scalars: an
 * entry predicate reads them straight from ctx (fetch_pred), the others
 * through bpf_get_func_arg. Patched with fn_slots (specialize.ForFunc,
 * FuncScalars); left as FTP_FN_SCALARS_ANY, none. */
#define FTP_FN_SCALARS_ANY 0x6c6163735f707466ULL /* "ftp_scal" */
static __always_inline __attribute__((unused)) __u64 fn_scalars(void)
{
	__u64 v;
	asm volatile("%[v] = %[m] ll" : [v] "=r"(v) : [m] "i"(FTP_FN_SCALARS_ANY));
	return v;
}

/* fn_nargs is bpf_get_func_arg_cnt, or in the filter object the
 * count patched in a program loaded for one function (fn_slots), else the
 * trace's one function's (only_nargs); at most FTP_MAX_ARGS, which is all
 * a record or predicate reads. */
static __always_inline __u64 fn_nargs(void *ctx)
{
#if defined(FTP_FILTER)
	__u64 slots = fn_slots();
	if (slots <= FTP_MAX_ARGS)
		return slots;
	__u32 only = only_nargs;
	if (only <= FTP_MAX_ARGS)
		return only;
#endif
	return bpf_get_func_arg_cnt(ctx);
}

/* fetch_pred reads the arguments 0 .. to - 1 an entry predicate reads
 * (fetch_args), the scalar ones straight from ctx in a program loaded for
 * one function (fn_scalars): one load each instead of the inlined
 * bpf_get_func_arg and its bound check. It writes args[0 .. to - 1] only:
 * the callers leave the others unset until the predicate has let the call
 * in, so a rejected call pays no stores for them (a predicate reads no
 * argument past pred_nargs; the verifier lets a privileged program read
 * unset stack, allow_uninit_stack, CAP_PERFMON, which tracing needs). */
static __always_inline void fetch_pred(void *ctx, __u64 *args, __u64 n, __u32 to)
{
#if defined(FTP_FILTER)
	/* A range test, not a comparison with FTP_FN_SCALARS_ANY: clang
	 * loads that constant again for it, and user space would patch the
	 * copy too (forFunc patches every such immediate). */
	__u64 sc = fn_scalars();
	if (sc && sc < (1ULL << FTP_MAX_ARGS)) {
		const __u64 *c = ctx;
		/* Unrolled: a ctx read needs a constant offset, and the
		 * verifier then drops the branches the patched mask rules out. */
#pragma clang loop unroll(full)
		for (int i = 0; i < FTP_MAX_ARGS; i++) {
			if ((__u32)i < to) {
				if (sc & (1ULL << i))
					args[i] = c[i];
				else if ((__u64)i < n)
					bpf_get_func_arg(ctx, i, &args[i]);
				else
					args[i] = 0;
			}
		}
		return;
	}
#endif
	fetch_args(ctx, args, n, 0, to);
	if (n < to) {
		/* An argument the function does not have reads 0 (the
		 * type check refuses such a predicate; argN is not checked). */
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			if ((__u64)i >= n && (__u32)i < to)
				args[i] = 0;
	}
}

/* frames returns the current thread's frame stack, created (zeroed) when
 * create is set. Task storage unless frames_in_hash (frozen: the verifier
 * sees one branch). */
static __always_inline struct tstack *frames(__u32 tid, int create)
{
	if (!frames_in_hash) {
		struct task_struct *t = bpf_get_current_task_btf();
		return bpf_task_storage_get(&tframes, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	}
	struct tstack *st = bpf_map_lookup_elem(&stacks, &tid);
	if (st || !create)
		return st;
	__u32 zero = 0;
	struct tstack *z = bpf_map_lookup_elem(&zero_stack, &zero);
	if (!z)
		return 0;
	bpf_map_update_elem(&stacks, &tid, z, BPF_NOEXIST);
	/* -EEXIST: a nested program on this thread created it meanwhile. */
	return bpf_map_lookup_elem(&stacks, &tid);
}

/* set_window sets the thread's window depth to w, keeping windows_open
 * the sum of every thread's. */
static __always_inline void set_window(struct tstack *st, __u32 w)
{
	__u32 old = st->window;
	if (w > old) {
		__sync_fetch_and_add(&windows_open, (__u64)(w - old));
		st->window = w;
	} else if (w < old) {
		st->window = w;
		__sync_fetch_and_sub(&windows_open, (__u64)(old - w));
	}
}

static __always_inline void fill_hdr(struct rec_hdr *h, __u64 pid_tgid, __u64 now, __u32 func_id,
				     __u8 kind, __u8 mode, __u16 depth)
{
	h->ts_ns = now;
	h->tgid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->func_id = func_id;
	h->depth = depth;
	h->cpu = bpf_get_smp_processor_id();
	h->kind = kind;
	h->mode = mode;
	h->flags = 0;
	h->nargs = 0;
	h->entry_cpu = 0;
	h->_pad = 0;
}

/* area_reserve reserves size bytes (a multiple of 8) for a record in
 * this CPU's area; it returns the record's length word (the record
 * follows it), or NULL when the area is full or the CPU has none. */
static __always_inline __u64 *area_reserve(__u64 size)
{
	__u32 cpu = bpf_get_smp_processor_id();
	if (cpu >= area_cpus)
		return NULL;
	__u32 base = cpu * area_stride;
	struct area_ctl *c = bpf_map_lookup_elem(&areas, &base);
	if (!c)
		return NULL;
	__u64 cap = ((__u64)area_mask + 1) << FTP_AREA_SHIFT;
	__u64 need = size + 8, h = 0;
	int i;
	for (i = 0; i < 4; i++) {
		h = c->head;
		if (h + need - c->tail > cap)
			return NULL;
		if (__sync_val_compare_and_swap(&c->head, h, h + need) == h)
			break;
	}
	if (i == 4)
		return NULL;
	__u32 idx = base + 1 + ((__u32)(h >> FTP_AREA_SHIFT) & area_mask);
	__u8 *chunk = bpf_map_lookup_elem(&areas, &idx);
	if (!chunk)
		return NULL; /* never: idx is one of the CPU's elements */
	return (__u64 *)(chunk + (h & (FTP_AREA_CHUNK - 8)));
}

/* area_commit publishes the record after w, of size bytes: the exchange
 * is fully ordered for the CPU (BPF_XCHG, Documentation/bpf/standardization),
 * the empty asm keeps the compiler from moving the record's stores past it. */
static __always_inline void area_commit(__u64 *w, __u64 size)
{
	asm volatile("" ::: "memory");
	__sync_lock_test_and_set(w, size);
}

/* output sends a compact record of nev events (0: a comm record, which is
 * sent again with the thread's next record; 2: a call record) of size
 * bytes (a multiple of 8, at most FTP_MAX_COMPACT); a full area, or none,
 * drops them, counted in events. */
static __always_inline int output(void *rec, __u64 size, __u64 nev)
{
	__u64 *w = area_reserve(size);
	if (!w) {
		if (nev)
			count_n(FTP_STAT_RINGBUF_DROP, nev);
		return -1;
	}
	__u64 *src = rec;
#pragma unroll
	for (int k = 0; k < FTP_MAX_COMPACT / 8; k++) {
		if (k * 8 >= size)
			break;
		w[1 + k] = src[k];
	}
	area_commit(w, size);
	return 0;
}

/* output_x sends a record with --arg values of size bytes. */
static __always_inline void output_x(struct rec_x *r, __u64 size)
{
	__u64 *w = area_reserve((size + 7) & ~7ULL);
	if (!w) {
		count(FTP_STAT_RINGBUF_DROP);
		return;
	}
	__u64 *src = (void *)r;
#pragma clang loop unroll(disable)
	for (int k = 0; k < sizeof(struct rec_x) / 8; k++) {
		if (k * 8 >= size)
			break;
		w[1 + k] = src[k];
	}
	area_commit(w, size);
}

/* send_comm sends the thread's tgid and comm before its next record when
 * user space does not have them (st->comm_sent; always without st). */
static __always_inline void send_comm(struct tstack *st, __u64 pid_tgid, __u64 now)
{
	if (st && st->comm_sent)
		return;
	struct rec_comm c;
	fill_hdr(&c.h, pid_tgid, now, 0, FTP_COMM, 0, 0);
	bpf_get_current_comm(c.comm, sizeof(c.comm));
	if (output(&c, sizeof(c), 0) == 0 && st)
		st->comm_sent = 1;
}

/* emit_entry sends a compact entry record: the call entered at ts on
 * cpu, with nargs of args. The one copy for an entry sent when it happens
 * (on_entry), a pending one sent on its own (flush_entry), and one whose
 * call was renamed during its run (on_exit). */
static __always_inline void emit_entry(__u64 pid_tgid, __u64 ts, __u32 func_id, __u8 mode, __u16 depth,
				       __u16 cpu, __u64 nargs, __u64 *args)
{
	struct rec_entry r;
	fill_hdr(&r.h, pid_tgid, ts, func_id, FTP_ENTRY, mode, depth);
	r.h.cpu = cpu;
	r.h.flags = FTP_F_HAS_ARGS;
	/* Masked where clang cannot drop it (see FTP_SLOT): it knows nargs
	 * <= FTP_MAX_ARGS from the callers and would drop a C mask and the
	 * clamp, and 6.1's verifier then sees an unbounded size ("R3 min
	 * value is negative", found by the fast tier on 6.1). */
	__u64 n = nargs;
	asm volatile("%[v] &= 7" : [v] "+r"(n));
	if (n > FTP_MAX_ARGS)
		n = FTP_MAX_ARGS;
	r.h.nargs = n;
	for (int k = 0; k < FTP_MAX_ARGS; k++)
		r.args[k] = args[k];
	output(&r, sizeof(r.h) + n * 8, 1);
}

/* flush_entry sends the pending entry of frame i (FTP_LEAF) on its own:
 * a call nested in it, or an exit that unwinds it, comes next. */
static __always_inline void flush_entry(struct tstack *st, __u32 i, __u64 pid_tgid, __u8 mode)
{
	struct frame *f = &st->f[FTP_SLOT(i)];
	if (!f->pending || !__sync_lock_test_and_set(&f->pending, 0))
		return;
	/* Renamed since the entry (exec): user space still has the comm it
	 * was entered under, which this entry goes out with; the new one
	 * goes before the next record. */
	if (f->comm_gen == st->comm_gen)
		send_comm(st, pid_tgid, f->ts_ns);
	emit_entry(pid_tgid, f->ts_ns, f->func_id, mode, i, f->cpu, f->nargs, f->args);
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
 * cookie flags name (--strings) and the kernel stack (--stack). */
static __always_inline void fill_tail(void *ctx, struct rec_full *e, __u32 flags, __u64 *args,
				      __u8 mode, int entry)
{
	e->str_len[0] = 0;
	e->str_len[1] = 0;
	e->stack_len = 0;
	if (want_strings) {
		e->h.flags |= FTP_F_STRINGS;
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
		if (entry && (mode == FTP_MODE_KPROBE_MULTI || mode == FTP_MODE_KPROBE_SESSION || mode == FTP_MODE_KPROBE)) {
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
		e->h.flags |= FTP_F_STACK;
	}
}

/* In 64 bits throughout: 32-bit values cost a zero extension (two
 * shifts) at each use. */
static __always_inline __u64 msb64(__u64 v)
{
	__u64 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* hist_bucket: see FTP_HIST_BUCKETS (internal/stats mirrors it). */
static __always_inline __u64 hist_bucket(__u64 d)
{
	if (d < 16)
		return d;
	__u64 m = msb64(d);
	if (m > FTP_HIST_MAXLOG)
		return FTP_HIST_BUCKETS - 1;
	/* 16 + (m - 4) * 8 + the 3 bits below the msb: d >> (m - 3) is 8
	 * plus those bits. */
	return (m - 3) * 8 + (d >> (m - 3));
}

/* aggregate adds one completed call to its function's table. The max is
 * updated without a lock: two CPUs finishing the same function at the
 * same instant may keep the smaller of their two durations. */
static __always_inline void aggregate(__u32 func_id, int timed, __u64 dur, __s64 ret, int is_err)
{
	struct agg *a = bpf_map_lookup_elem(&aggs, &func_id);
	if (!a)
		return;
	if (is_err) {
		__sync_fetch_and_add(&a->errors, 1);
		struct errkey k = { .func_id = func_id, .err = (__s32)ret };
		__u64 *c = bpf_map_lookup_elem(&errs, &k);
		if (!c) {
			__u64 zero = 0;
			bpf_map_update_elem(&errs, &k, &zero, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&errs, &k);
		}
		if (c)
			__sync_fetch_and_add(c, 1);
		else
			count(FTP_STAT_AGG_FULL);
	}
	if (!timed) {
		__sync_fetch_and_add(&a->untimed, 1);
		return;
	}
	__sync_fetch_and_add(&a->sum_ns, dur);
	if (dur > a->max_ns)
		a->max_ns = dur;
	/* Masked in a way clang keeps (see FTP_SLOT): older verifiers (6.1)
	 * lose the bound of the bucket through its 32-bit arithmetic. */
	__u64 b = hist_bucket(dur);
	asm volatile("%[v] &= 511" : [v] "+r"(b));
	if (b < FTP_HIST_BUCKETS)
		__sync_fetch_and_add(&a->hist[b], 1);
}

#define FTP_DEFERRED (min_duration_ns || errors_only || x_exit)
#define FTP_LEAF (leaf_records && want_events && !FTP_DEFERRED && !want_strings && !want_stack && !x_vals)
/* Something reads a call's arguments after its entry decision: records,
 * a --filter on ret (which may read them), --arg values. Without (stat,
 * compare's agg body) the trampoline entry fetches none beyond what an
 * entry predicate reads. */
#define FTP_KEEP_ARGS (want_events || x_exit || x_vals)

static __always_inline int is_session_mode(__u8 mode)
{
	return mode == FTP_MODE_FSESSION || mode == FTP_MODE_FSESSION_MULTI || mode == FTP_MODE_KPROBE_SESSION;
}

/* emit_x writes a record with --arg values (FTP_F_VALS), built in the
 * per-CPU scratch. */
static __always_inline void emit_x(struct xprog *xp, struct xctx *xc, __u64 pid_tgid, __u64 now, __u32 func_id,
				   __u8 kind, __u8 mode, __u16 depth, __u8 flags, __u8 nargs, __u64 dur, __s64 ret)
{
	__u32 zero = 0;
	struct rec_x *r = bpf_map_lookup_elem(&xscratch, &zero);
	if (!r)
		return;
	fill_hdr(&r->h, pid_tgid, now, func_id, kind, mode, depth);
	r->h.flags = flags | FTP_F_VALS;
	r->h.nargs = nargs;
	r->duration_ns = dur;
	r->ret = ret;
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		r->args[i] = xc->args[i];
	xvals(xp, xc, &r->x, r->b);
	/* Only the struct bytes in use: no cost for the other values. */
	__u64 nb = xp->nbytes;
	asm volatile("%[v] &= 1023" : [v] "+r"(nb));
	output_x(r, __builtin_offsetof(struct rec_x, b) + nb);
}

/* cookie_pred returns the entry predicate a cookie carries (0: none) and
 * its pred_nargs in *pn (ftp_func_pred). */
static __always_inline __u32 cookie_pred(__u64 cookie, __u32 *pn)
{
	__u32 fl = cookie >> 32;
	*pn = (fl >> FTP_FN_PRED_NARGS_SHIFT) & 7;
	return (fl >> FTP_FN_PRED_SHIFT) & FTP_FN_PRED_MAX;
}

/* entry_pred returns the function's entry predicate (0: none): its
 * xpred program number from the cookie (cookie_pred), else from xprogs (a
 * number past the cookie's bits, or a predicate that reads memory), with
 * the number of arguments it reads (*pn) and whether it reads argument
 * registers only (*regs_only; a cookie's always does). Without an entry
 * predicate setting (x_entry) it looks nothing up. */
static __always_inline __u32 entry_pred(__u64 cookie, __u32 *pn, int *regs_only)
{
	*pn = 0;
	*regs_only = 1;
	if (!x_entry)
		return 0;
	__u32 psel = cookie_pred(cookie, pn);
	if (psel)
		return psel;
	struct xprog *xp = xprog_of((__u32)cookie);
	if (!xp || !xp->pentry)
		return 0;
	*pn = xp->pred_nargs;
	*regs_only = xp->entry_regs;
	return xp->pentry;
}

static __always_inline __u8 cookie_nargs(__u32 fflags)
{
	__u8 n = (fflags >> FTP_FN_NARGS_SHIFT) & 15;
	return n > FTP_MAX_ARGS ? FTP_MAX_ARGS : n;
}

/* emit_full writes a record with comm and the --strings/--stack tail. */
static __always_inline void emit_full(void *ctx, __u64 pid_tgid, __u64 now, __u32 func_id, __u32 fflags,
				      __u8 kind, __u8 mode, __u16 depth, __u8 flags, __u8 nargs,
				      __u64 dur, __s64 ret, __u64 *args, int tail)
{
	__u64 *w = area_reserve(sizeof(struct rec_full));
	struct rec_full *e = (void *)(w + 1);
	if (!w) {
		count(FTP_STAT_RINGBUF_DROP);
		return;
	}
	fill_hdr(&e->h, pid_tgid, now, func_id, kind, mode, depth);
	e->h.flags = flags | FTP_F_FULL;
	e->h.nargs = nargs;
	e->duration_ns = dur;
	e->ret = ret;
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		e->args[i] = args[i];
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->str_len[0] = 0;
	e->str_len[1] = 0;
	e->stack_len = 0;
	if (tail)
		fill_tail(ctx, e, fflags, args, mode, kind == FTP_ENTRY);
	area_commit(w, sizeof(struct rec_full));
}

/* on_entry records a call's entry. It returns 1 when the call was
 * rejected (not armed, filtered out): session programs then skip the
 * exit run. */
/* admit runs the checks that need neither the arguments nor the attach
 * cookie (armed, the pid/tid/tree/comm filters), so a call they reject
 * returns before anything is fetched. 1 = admitted, *pid_tgid set. */
static __always_inline int admit(__u64 *pid_tgid)
{
	if (!armed)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	*pid_tgid = id;
	return pass_ids(id) && pass_mutable(id);
}

/* outside_window: --entry, a call of a function that is not an entry
 * function while its thread is inside no entry function's call: nothing
 * is recorded and no frame is pushed (the exit finds no frame and no
 * window and is dropped, on_exit). Asked before the arguments are
 * fetched; counted. */
static __always_inline int outside_window(__u64 pid_tgid, __u64 cookie)
{
	if (!window || ((cookie >> 32) & FTP_FN_WINDOW_ENTRY))
		return 0;
	struct tstack *st;
	if (!windows_open || !(st = frames((__u32)pid_tgid, 0)) || !st->window) {
		count(FTP_STAT_WINDOW_REJECT);
		return 1;
	}
	return 0;
}

/* marks_rejected: in mode, a call an entry predicate that reads
 * argument registers only (regs_only) or memory rejects leaves its mark
 * on the thread's frame stack for its exit (rejected_at_entry, on_exit):
 * not in the session modes (the exit run is skipped or sees the session
 * cookie) nor, for a registers-only predicate, in the fentry+fexit pairs
 * (the fexit decides again). */
static __always_inline int marks_rejected(__u8 mode, int regs_only)
{
	if (is_session_mode(mode))
		return 0;
	return !(regs_only && (mode == FTP_MODE_FENTRY || mode == FTP_MODE_FENTRY_MULTI));
}

/* rejected_at_entry runs the function's entry predicate psel
 * (entry_pred) on args: 1 when it rejects the call (counted). Session
 * modes skip or ignore the exit run; the fentry+fexit pairs, when the
 * predicate reads argument registers only, let the fexit decide again
 * (on_exit); in the other modes (marks_rejected) the exit runs
 * regardless and must not be taken for an outer call of the same
 * function: the call pushes a frame marked rejected when the thread has
 * frames below it, and nothing when it has none (no frame storage yet, or
 * depth 0), so a rejected call on an idle thread costs one frame lookup
 * at entry and one at exit; on_exit drops an exit of a function with an
 * entry predicate that finds no frame of its call. */
static __always_inline int rejected_at_entry(__u64 pid_tgid, __u32 func_id, __u32 psel, int regs_only, __u64 *args,
					     __u8 mode)
{
	if (!xrejects(args, psel))
		return 0;
	if (!marks_rejected(mode, regs_only))
		return 1;
	/* Counted neither as an entry nor as an exit. Past the stack's depth
	 * the exit has no entry and is dropped as undecidable. */
	struct tstack *st = frames((__u32)pid_tgid, 0);
	if (st && (st->depth > 0 || st->overflow)) {
		__u32 d = st->depth;
		if (d < FTP_MAX_DEPTH && !st->overflow) {
			/* Its caller's pending entry before anything nested in
			 * this call. */
			if (FTP_LEAF && d > 0)
				flush_entry(st, d - 1, pid_tgid, mode);
			st->depth = d + 1;
			struct frame *f = &st->f[FTP_SLOT(d)];
			f->func_id = func_id;
			f->rejected = 1;
			if (FTP_LEAF)
				f->pending = 0;
			if (window)
				f->win = st->window;
		} else {
			/* Beyond the stack: its exit pops an overflow entry
			 * (on_exit, counted as an exit hit), so it is one, counted
			 * as an entry hit too, to keep entries and exits paired. */
			st->overflow++;
			count(FTP_STAT_DEPTH_OVERFLOW);
			count(FTP_STAT_ENTRY_HITS);
		}
	}
	return 1;
}

/* on_entry records the entry of a call admit(), outside_window() and the
 * entry predicate (rejected_at_entry) let in. */
static __always_inline int on_entry(void *ctx, __u64 pid_tgid, __u64 cookie, __u64 *args, __u8 nargs, __u8 mode)
{
	__u32 func_id = (__u32)cookie;
	struct tstack *st;
	__u32 d;
	struct xprog *xp = xprog_of(func_id);
	count(FTP_STAT_ENTRY_HITS);

	__u64 now = bpf_ktime_get_ns();
	if ((cookie >> 32) & FTP_FN_ENTRY_ONLY) {
		/* No exit will pop a frame (the function never returns): emit
		 * the entry at the thread's depth, push nothing, and skip the
		 * exit run in the session modes. Without an exit, --min-duration
		 * and --errors cannot decide: not shown. (The hash fallback does
		 * not create a slot a dying thread would never free.) */
		count(FTP_STAT_ENTRY_ONLY);
		if (FTP_DEFERRED || !want_events)
			return 1;
		st = frames((__u32)pid_tgid, !frames_in_hash);
		d = st ? st->depth : 0;
		if (d > FTP_MAX_DEPTH)
			d = FTP_MAX_DEPTH;
		if (FTP_LEAF && st && d > 0)
			flush_entry(st, d - 1, pid_tgid, mode);
		goto emit;
	}
	st = frames((__u32)pid_tgid, 1);
	if (!st) {
		count(FTP_STAT_STACK_FULL); /* no frame storage: no duration for this call */
		return 0;
	}
	d = st->depth;
	if (d >= FTP_MAX_DEPTH || st->overflow) {
		st->overflow++;
		count(FTP_STAT_DEPTH_OVERFLOW);
		return 0;
	}
	/* The caller's pending entry first (before the claim: a program
	 * nested from here on finds this call's slot not pending yet). */
	if (FTP_LEAF && d > 0)
		flush_entry(st, d - 1, pid_tgid, mode);
	/* Claim the slot before filling it, so a nested program (an IRQ on
	 * this thread running another function's fentry) pushes above it. */
	st->depth = d + 1;
	struct frame *f = &st->f[FTP_SLOT(d)];
	f->ts_ns = now;
	f->func_id = func_id;
	f->nargs = nargs;
	if (FTP_LEAF)
		f->pending = 0; /* until its arguments are in (a nested program may look) */
	if (x_entry)
		f->rejected = 0; /* only ever set with an entry filter */
	if (window) {
		/* The exit restores the window from the frame: an entry
		 * function's call opens one level, nested calls nest. */
		__u32 w = st->window;
		f->win = w;
		if ((cookie >> 32) & FTP_FN_WINDOW_ENTRY)
			set_window(st, w + 1);
	}
	if (FTP_DEFERRED) {
		/* decided at exit, which carries the arguments */
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			f->args[i] = args[i];
		return 0;
	}
	if (!want_events)
		return 0;
	if (FTP_LEAF) {
		/* Kept until a nested call or the exit (one record per leaf
		 * call). The arguments are in before pending says so. */
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			f->args[i] = args[i];
		f->cpu = bpf_get_smp_processor_id();
		/* The comm the entry is under reaches user space now (once per
		 * thread and after a change), so a later entry or call record
		 * can rely on it. */
		send_comm(st, pid_tgid, now);
		f->comm_gen = st->comm_gen;
		asm volatile("" ::: "memory");
		f->pending = 1;
		return 0;
	}
emit:
	if (want_strings || want_stack) {
		emit_full(ctx, pid_tgid, now, func_id, cookie >> 32, FTP_ENTRY, mode, d, FTP_F_HAS_ARGS,
			  nargs, 0, 0, args, 1);
		return 0;
	}
	send_comm(st, pid_tgid, now);
	if (x_vals && xp && xp->nvals) {
		/* Filled only with values: no stores on the plain data path. */
		struct xctx xc;
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			xc.args[i] = args[i];
		xc.ret = 0;
		emit_x(xp, &xc, pid_tgid, now, func_id, FTP_ENTRY, mode, d, FTP_F_HAS_ARGS, nargs, 0, 0);
		return 0;
	}
	emit_entry(pid_tgid, now, func_id, mode, d, bpf_get_smp_processor_id(), nargs, args);
	return 0;
}

static __always_inline __s64 normalize_ret(__u32 flags, __u64 raw, int *is_err)
{
	__u32 size = (flags >> 8) & 0xff;
	int sign = flags & FTP_FN_RET_SIGNED;

	*is_err = 0;
	if (flags & FTP_FN_RET_VOID)
		return (__s64)raw;
	if (size - 1 < 7) {
		/* 1-7 bytes: the upper bits cleared or sign-extended by a
		 * shift pair (a signed narrow integer fails when negative).
		 * Sizes 3, 5-7 are small structs returned by value: cut to
		 * their size too, where the switch before kept 64 bits. */
		__u32 sh = 64 - 8 * size;
		if (sign) {
			__s64 ret = (__s64)(raw << sh) >> sh;
			*is_err = ret < 0;
			return ret;
		}
		return (__s64)((raw << sh) >> sh);
	}
	__s64 ret = (__s64)raw;
	if (sign || (flags & FTP_FN_RET_PTR) || size == 0)
		*is_err = ret < 0 && ret >= -4095; /* IS_ERR_VALUE */
	return ret;
}

/* exit_rejects is the fexit's second decision of an entry predicate that
 * reads argument registers only (fentry, fentry.multi): 1 when it rejects
 * the call. Not counted (the entry counted it). */
static __always_inline int exit_rejects(void *ctx, __u64 cookie)
{
	__u32 pn;
	int regs_only;
	__u32 psel = entry_pred(cookie, &pn, &regs_only);
	if (!psel || !regs_only)
		return 0;
	__u64 args[FTP_MAX_ARGS]; /* the first pn only (fetch_pred) */
	fetch_pred(ctx, args, fn_nargs(ctx), pn);
	return !xpass(args, 0, psel);
}

/* on_exit records a call's exit. session: the entry run decided (a
 * rejected call's exit does not run), so the filters are not asked again
 * unless no frame is found. */
static __always_inline void on_exit(void *ctx, __u8 mode, int session, int regs, int decided)
{
	if (!decided && !armed)
		return;
	__u64 cookie = 0;
	/* An entry predicate in the fentry+fexit pair modes: when it
	 * reads argument registers only, the fexit has the same registers and
	 * decides again, so a rejected entry pushed no frame (tramp_entry,
	 * rejected_at_entry; counted there). Decided first: nothing is counted
	 * here, so the order of this and the ids' rejections below does not
	 * matter, and the exit of a rejected call asks for neither the task's
	 * ids nor its frames. decided: the program's head has done both
	 * (FTP_FEXIT's head). */
	int redecide = x_entry && !regs && !session && (mode == FTP_MODE_FENTRY || mode == FTP_MODE_FENTRY_MULTI);
	/* The cookie now, read once (TestOnlyCookieInlined), when it is
	 * needed whatever the ids say. */
	int early = decided || redecide;
	if (early) {
		cookie = attach_cookie(ctx);
		if (!decided && exit_rejects(ctx, cookie))
			return;
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct tstack *st = 0;
	if (window && !early)
		cookie = attach_cookie(ctx);
	if (window && !((cookie >> 32) & FTP_FN_WINDOW_ENTRY)) {
		/* --entry: a call outside every window was rejected at entry
		 * (counted there) and pushed no frame: return before any other
		 * work. A frame of this call was pushed inside a window, which
		 * stays open while the frame is on the stack. */
		if (!windows_open || !(st = frames((__u32)pid_tgid, 0)) || !st->window)
			return;
	}
	int pass = 1;
	if (!session) {
		if (!pass_ids(pid_tgid))
			return;
		/* A filter decides at entry: an exit whose entry was let in
		 * is taken even when the tree or comm filter now rejects the
		 * task (found on this thread's frame stack below). */
		pass = pass_mutable(pid_tgid);
	}
	/* The cookie (without --entry) and the return value only now: a
	 * rejected call's exit has returned above without fetching them. */
	if (!window && !early)
		cookie = attach_cookie(ctx);
	__u64 raw_ret = 0;
	if (regs)
		raw_ret = FTP_RET((struct pt_regs *)ctx);
	else
		bpf_get_func_ret(ctx, &raw_ret);
	__u32 func_id = (__u32)cookie;
	if (!st)
		st = frames((__u32)pid_tgid, 0);
	if (!pass && !st)
		return;
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
			return;
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
	if (x_entry && found < 0 && !session) {
		/* No frame of this call: with an entry predicate that marks
		 * its rejections (marks_rejected), a call rejected on a thread
		 * with no frames (rejected_at_entry pushed nothing; counted
		 * there) or one whose entry was not recorded (counted at
		 * entry: no frame storage; or entered before the attach), which
		 * the predicate cannot decide: dropped. (Not unwound: frames
		 * found here were pushed inside this call only when its entry
		 * saw an idle thread, which the exit cannot tell from an entry
		 * run that was missed with frames below it.) */
		__u32 pn;
		int ro;
		if (entry_pred(cookie, &pn, &ro) && marks_rejected(mode, ro))
			return;
	}
	if (x_entry && found >= 0 && st && st->f[FTP_SLOT(found)].rejected) {
		/* --filter rejected this call at entry. A pending entry above
		 * it, unwound now, is sent first (it has no exit to go with). */
		if (FTP_LEAF && found != (int)d - 1)
			flush_entry(st, d - 1, pid_tgid, mode);
		__u64 unwound = d - 1 - found;
		if (unwound)
			count_n(FTP_STAT_UNWOUND, unwound);
		st->depth = found;
		if (window)
			set_window(st, st->f[FTP_SLOT(found)].win);
		return;
	}
	/* The clock after the frame search: an exit a filter dropped
	 * above does not read it. */
	__u64 now = bpf_ktime_get_ns();
	if (found < 0 && session)
		pass = pass_ids(pid_tgid) && pass_mutable(pid_tgid);
	if (!pass && found < 0)
		return; /* not an exit of a call that was let in */
	count(FTP_STAT_EXIT_HITS);
	__u32 fflags = cookie >> 32;
	int is_err = 0;
	__s64 ret = normalize_ret(fflags, raw_ret, &is_err);

	__u64 dur = 0;
	__u8 fnargs = 0;
	__u64 fargs[FTP_MAX_ARGS] = {};
	int timed = 0;
	int leaf = 0; /* FTP_LEAF: its entry was not sent, one FTP_CALL record */
	__u16 ecpu = 0;
	__u32 lgen = 0;
	if (found >= 0 && st) {
		struct frame *f = &st->f[FTP_SLOT(found)];
		timed = 1;
		dur = now - f->ts_ns;
		if (FTP_LEAF && f->pending && __sync_lock_test_and_set(&f->pending, 0)) {
			leaf = 1;
			ecpu = f->cpu;
			lgen = f->comm_gen;
		}
		if (FTP_DEFERRED || leaf) {
			fnargs = f->nargs;
			for (int i = 0; i < FTP_MAX_ARGS; i++)
				fargs[i] = f->args[i];
		}
		/* Inner frames whose exits were never seen (missed runs). */
		__u64 unwound = d - 1 - found;
		if (unwound)
			count_n(FTP_STAT_UNWOUND, unwound);
		st->depth = found;
		if (window)
			set_window(st, f->win);
	} else {
		count(FTP_STAT_NO_ENTRY);
	}
	int emit = 1;
	if (min_duration_ns && (!timed || dur < min_duration_ns))
		emit = 0;
	if (errors_only && !is_err)
		emit = 0;
	struct xprog *xp = xprog_of(func_id);
	/* An exit without its entry cannot be decided by an entry filter. */
	if (x_entry && xp && !timed && xp->pentry)
		emit = 0;
	if (x_exit && emit && xp && xp->pexit) {
		if ((!timed && xp->exit_args) || !xpass(fargs, ret, xp->pexit)) {
			emit = 0;
			count(FTP_STAT_X_REJECT);
		}
	}
	if (emit && want_agg)
		aggregate(func_id, timed, dur, ret, is_err);
	if (FTP_LEAF && leaf && emit && st && lgen != st->comm_gen) {
		/* Renamed during the call (exec): its entry goes on its own,
		 * under the comm user space has, before the new comm and the
		 * exit. */
		emit_entry(pid_tgid, now - dur, func_id, mode, found, ecpu, fnargs, fargs);
		leaf = 0;
		fnargs = 0;
	}
	if (emit && want_events && !(want_strings || want_stack))
		send_comm(st, pid_tgid, now);
	/* FTP_LEAF: the innermost frame is not this exit's (an inner call's
	 * exit was missed, or this exit has no entry): its pending entry
	 * before this exit's record (and before the hash fallback frees the
	 * frames). Here, after the exit's decisions: placed before them,
	 * clang's evaluation of the condition split the verifier's states
	 * ahead of a --filter on ret (88k -> 730k instructions processed in
	 * TestVerifyHost's worst case), although FTP_LEAF is false with one. */
	if (FTP_LEAF && emit && st && d > 0 && found != (int)d - 1)
		flush_entry(st, d - 1, pid_tgid, mode);
	if (frames_in_hash && st && found == 0 && st->overflow == 0) {
		/* Outermost call returned: free the thread's slot. */
		__u32 tid = (__u32)pid_tgid;
		bpf_map_delete_elem(&stacks, &tid);
	}
	if (!emit || !want_events)
		return;

	__u16 depth = found >= 0 ? found : 0;
	__u8 flags = 0;
	if (!timed)
		flags |= FTP_F_NO_ENTRY;
	if (FTP_DEFERRED) {
		flags |= FTP_F_DEFERRED;
		if (timed)
			flags |= FTP_F_HAS_ARGS;
		else
			fnargs = 0;
	}
	if (x_vals && FTP_DEFERRED && xp && xp->nvals && timed && !(want_strings || want_stack)) {
		/* A deferred exit stands for its entry: its values are read
		 * now, from the entry's arguments. */
		struct xctx xc;
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			xc.args[i] = fargs[i];
		xc.ret = ret;
		emit_x(xp, &xc, pid_tgid, now, func_id, FTP_EXIT, mode, depth, flags, fnargs, dur, ret);
		return;
	}
	if (want_strings || want_stack) {
		/* A deferred exit stands for its entry: it carries the tail
		 * (strings re-read now from the entry's pointers, the stack
		 * taken at exit: the same callers are on it). */
		emit_full(ctx, pid_tgid, now, func_id, fflags, FTP_EXIT, mode, depth, flags, fnargs, dur, ret,
			  fargs, FTP_DEFERRED && ((want_strings && timed) || want_stack));
		return;
	}
	struct rec_exit r;
	fill_hdr(&r.h, pid_tgid, now, func_id, leaf ? FTP_CALL : FTP_EXIT, mode, depth);
	r.h.flags = flags;
	r.h.nargs = fnargs;
	r.duration_ns = dur;
	r.ret = ret;
	if (FTP_DEFERRED || leaf) {
		if (leaf) {
			r.h.flags = FTP_F_HAS_ARGS;
			r.h.entry_cpu = ecpu;
		}
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			r.args[i] = fargs[i];
		__u64 n = fnargs;
		asm volatile("%[v] &= 7" : [v] "+r"(n)); /* see on_entry */
		if (n > FTP_MAX_ARGS)
			n = FTP_MAX_ARGS;
		output(&r, sizeof(r.h) + 16 + n * 8, 1 + leaf);
		return;
	}
	output(&r, sizeof(r.h) + 16, 1);
}

/* Entry and exit of every trampoline mode: arguments and return value
 * through the trampoline's ctx helpers (inlined by the verifier). */
static __always_inline int tramp_entry(void *ctx, __u8 mode)
{
	__u64 pid_tgid;
	if (!admit(&pid_tgid))
		return 1;
	__u64 cookie = attach_cookie(ctx);
	if (outside_window(pid_tgid, cookie))
		return 1;
#if defined(FTP_LEAN) || defined(FTP_FILTER)
	__u64 slots = fn_slots();
	if (!x_entry && !x_vals && !want_strings && !want_stack && !window && slots <= FTP_MAX_ARGS) {
		/* A program loaded for one function (fentry, fsession): its
		 * argument registers read straight from the trampoline's ctx,
		 * as many as it has (the verifier checks each read against the
		 * function's BTF and drops the others). */
		__u64 a[FTP_MAX_ARGS] = {};
		const __u64 *c = ctx;
#pragma clang loop unroll(full)
		for (int i = 0; i < FTP_MAX_ARGS; i++)
			if ((__u64)i < slots)
				a[i] = c[i];
		return on_entry(ctx, pid_tgid, cookie, a, slots, mode);
	}
#endif
	__u64 args[FTP_MAX_ARGS]; /* past first: set once the call is let in */
	__u64 n = fn_nargs(ctx);
	/* With an entry predicate, the arguments it reads first (xprog's
	 * pred_nargs), the others only for a call it lets in. */
	__u32 first;
	int regs_only;
	__u32 psel = entry_pred(cookie, &first, &regs_only);
	if (psel) {
		/* A predicate on argument registers (the cookie's always
		 * is) rejects without a frame: its fexit decides again
		 * (on_exit), fsession's exit run finds the call rejected in its
		 * session cookie (session). */
		fetch_pred(ctx, args, n, first);
		if (rejected_at_entry(pid_tgid, (__u32)cookie, psel, regs_only, args, mode))
			return 1;
	} else {
		first = 0;
	}
#pragma clang loop unroll(full)
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		if ((__u32)i >= first)
			args[i] = 0;
	if (FTP_KEEP_ARGS)
		fetch_args(ctx, args, n, first, FTP_MAX_ARGS);
	return on_entry(ctx, pid_tgid, cookie, args, n > FTP_MAX_ARGS ? FTP_MAX_ARGS : n, mode);
}

/* FTP_LEAF_FAST: the lean object's settings (records in leaves, frames in
 * task storage, no --filter, --entry or tables), under which leaf_exit
 * takes the most common exit. */
#if defined(FTP_LEAN)
#define FTP_LEAF_FAST (FTP_LEAF && !want_agg && !x_entry && !window && !frames_in_hash)
#else
#define FTP_LEAF_FAST 0
#endif

/* leaf_exit sends the exit of a leaf call as on_exit does, for one case:
 * the thread's innermost frame is this call's, its entry still pending,
 * entered under the comm user space has (same comm_gen: no exec nor
 * rename since). It returns 0, having changed nothing, for any other
 * exit, which on_exit then takes. The return value is normalized while
 * the cookie is an immediate (see pair_agg_exit). */
static __always_inline int leaf_exit(void *ctx, __u8 mode, int session)
{
	__u64 cookie = attach_cookie(ctx);
	__u64 raw = 0;
	bpf_get_func_ret(ctx, &raw);
	int is_err = 0;
	__s64 ret = normalize_ret(cookie >> 32, raw, &is_err);
	struct task_struct *t = bpf_get_current_task_btf();
	struct tstack *st = bpf_task_storage_get(&tframes, t, 0, 0);
	if (!st)
		return 0;
	__u32 d = st->depth;
	if (d == 0 || d > FTP_MAX_DEPTH || st->overflow || !st->comm_sent)
		return 0;
	__u32 found = d - 1;
	struct frame *f = &st->f[FTP_SLOT(found)];
	if (f->func_id != (__u32)cookie || !f->pending || f->comm_gen != st->comm_gen)
		return 0;
	/* The ids from the task's fields where the program is loaded with
	 * CO-RE (ftp_fexit); the trampoline loader of fsession and the multi
	 * types has none (attach.LoadTrampoline): the helper there. */
	__u64 pid_tgid;
	if (mode == FTP_MODE_FENTRY)
		pid_tgid = ((__u64)t->tgid << 32) | (__u32)t->pid;
	else
		pid_tgid = bpf_get_current_pid_tgid();
	if (!session && !pass_ids(pid_tgid))
		return 0;
	/* Taken here or by a program nested on this thread (flush_entry),
	 * which sent the entry on its own: on_exit sends a plain exit. */
	if (!__sync_lock_test_and_set(&f->pending, 0))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 dur = now - f->ts_ns;
	__u16 ecpu = f->cpu;
	__u8 fnargs = f->nargs;
	__u64 fargs[FTP_MAX_ARGS];
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		fargs[i] = f->args[i];
	st->depth = found;
	count(FTP_STAT_EXIT_HITS);
	__u64 n = fnargs;
	asm volatile("%[v] &= 7" : [v] "+r"(n)); /* see emit_entry */
	if (n > FTP_MAX_ARGS)
		n = FTP_MAX_ARGS;
	__u64 size = sizeof(struct rec_hdr) + 16 + n * 8;
	__u64 *w = area_reserve(size);
	if (!w) {
		count_n(FTP_STAT_RINGBUF_DROP, 2);
		return 1;
	}
	struct rec_exit *r = (void *)(w + 1);
	fill_hdr(&r->h, pid_tgid, now, (__u32)cookie, FTP_CALL, mode, found);
	r->h.flags = FTP_F_HAS_ARGS;
	r->h.nargs = fnargs;
	r->h.entry_cpu = ecpu;
	r->duration_ns = dur;
	r->ret = ret;
	for (int i = 0; i < FTP_MAX_ARGS; i++)
		if (i < n)
			r->args[i] = fargs[i];
	area_commit(w, size);
	return 1;
}

static __always_inline void tramp_exit(void *ctx, __u8 mode, int session)
{
	if (FTP_LEAF_FAST) {
		if (!armed)
			return;
		if (leaf_exit(ctx, mode, session))
			return;
	}
	on_exit(ctx, mode, session, 0, 0);
}

/* FTP_PAIR_AGG: the settings under which pair_agg_entry and pair_agg_exit
 * do the whole job of the fentry+fexit pairs (tables only, frames in task
 * storage, no --filter, no --entry window): what on_entry and on_exit do
 * there, without the paths those settings rule out. */
#define FTP_PAIR_AGG (!want_events && want_agg && !x_entry && !x_exit && !window && !frames_in_hash)

/* pair_agg_entry pushes a frame holding the entry's timestamp, as
 * on_entry does (counted the same), and nothing else: no arguments, no
 * depth for a record. */
static __always_inline void pair_agg_entry(void *ctx)
{
	if (!armed)
		return;
	struct task_struct *t = bpf_get_current_task_btf();
	if (FTP_ID_FILTERS) {
		__u64 pid_tgid = bpf_get_current_pid_tgid();
		if (!pass_ids(pid_tgid) || !pass_mutable(pid_tgid))
			return;
	}
	__u64 cookie = attach_cookie(ctx);
	count(FTP_STAT_ENTRY_HITS);
	if ((cookie >> 32) & FTP_FN_ENTRY_ONLY) {
		count(FTP_STAT_ENTRY_ONLY); /* no exit will pop a frame */
		return;
	}
	struct tstack *st = bpf_task_storage_get(&tframes, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count(FTP_STAT_STACK_FULL);
		return;
	}
	__u32 d = st->depth;
	if (d >= FTP_MAX_DEPTH || st->overflow) {
		st->overflow++;
		count(FTP_STAT_DEPTH_OVERFLOW);
		return;
	}
	/* The slot claimed before it is filled (see on_entry). */
	st->depth = d + 1;
	struct frame *f = &st->f[FTP_SLOT(d)];
	f->func_id = (__u32)cookie;
	f->ts_ns = bpf_ktime_get_ns();
}

/* pair_agg_exit pops its call's frame and adds the call to its
 * function's table, as on_exit does under FTP_PAIR_AGG, but for one
 * order: the frame is looked up before the filters, which are asked only
 * when it is not found. A frame of this function on this thread's stack
 * was pushed by an entry the filters let in (a rejected entry pushes
 * none), and is taken whatever they say now, as the session modes and
 * on_exit take the exit of a call let in; so a timed call's exit asks
 * for no ids. An exit that finds no frame asks them, as on_exit does
 * (another thread's: its entries pushed none). */
static __always_inline __attribute__((unused)) void pair_agg_exit(void *ctx)
{
	if (!armed)
		return;
	/* The return value first, while the cookie is an immediate the
	 * load-time specializer folds normalize_ret with (internal/specialize
	 * forgets a spilled value at the first atomic), and the frame popped
	 * and its timestamp read before the clock: fewer values live across
	 * the helper calls. */
	__u64 cookie = attach_cookie(ctx);
	__u64 raw = 0;
	bpf_get_func_ret(ctx, &raw);
	int is_err = 0;
	__s64 ret = normalize_ret(cookie >> 32, raw, &is_err);
	struct tstack *st = bpf_task_storage_get(&tframes, bpf_get_current_task_btf(), 0, 0);
	__u32 func_id = (__u32)cookie;
	int found = -1;
	__u64 ts = 0;
	if (st) {
		__u32 d = st->depth; /* at most FTP_MAX_DEPTH (pair_agg_entry) */
		if (st->overflow > 0) {
			count(FTP_STAT_EXIT_HITS);
			st->overflow--;
			return;
		}
		struct frame *top = &st->f[FTP_SLOT(d - 1)];
		if (d > 0 && top->func_id == func_id) {
			/* The innermost frame: nothing to unwind. */
			found = d - 1;
			ts = top->ts_ns;
		} else {
#pragma clang loop unroll(full)
			for (int i = FTP_MAX_DEPTH - 1; i >= 0; i--) {
				if (found < 0 && (__u32)i < d &&
				    st->f[FTP_SLOT(i)].func_id == func_id)
					found = i;
			}
			if (found >= 0) {
				ts = st->f[FTP_SLOT(found)].ts_ns;
				count_n(FTP_STAT_UNWOUND, d - 1 - found);
			}
		}
		if (found >= 0)
			st->depth = found;
	}
	if (found < 0 && FTP_ID_FILTERS) {
		/* Not an exit of a call let in: an exit of the traced
		 * threads without its entry, or another thread's. */
		__u64 pid_tgid = bpf_get_current_pid_tgid();
		if (!pass_ids(pid_tgid) || !pass_mutable(pid_tgid))
			return;
	}
	int timed = found >= 0;
	__u64 dur = timed ? bpf_ktime_get_ns() - ts : 0;
	count(FTP_STAT_EXIT_HITS);
	if (!timed)
		count(FTP_STAT_NO_ENTRY);
	if (min_duration_ns && (!timed || dur < min_duration_ns))
		return;
	if (errors_only && !is_err)
		return;
	aggregate(func_id, timed, dur, ret, is_err);
}

SEC("fentry")
int ftp_fentry(void *ctx)
{
	if (FTP_PAIR_AGG)
		pair_agg_entry(ctx);
	else
		tramp_entry(ctx, FTP_MODE_FENTRY);
	return 0;
}

#if defined(FTP_FILTER)
/* In the filter object the fexit is a small head, which runs the entry
 * predicate's second decision, and a body it calls for a call the
 * predicate lets in (a BPF-to-BPF call): the head of a rejected call
 * sets up no private stack and saves few registers (the body's stack is
 * large), which is most of what the rejection costs. Other objects: one
 * program (the stat and general ones re-decide in on_exit, no head). */
#define FTP_FEXIT(name, mode)                                                         \
	static __attribute__((noinline)) int name##_body(void *ctx)                   \
	{                                                                             \
		on_exit(ctx, mode, 0, 0, 1);                                          \
		return 0;                                                             \
	}                                                                             \
	SEC("fexit")                                                                  \
	int name(void *ctx)                                                           \
	{                                                                             \
		if (!armed || (x_entry && exit_rejects(ctx, attach_cookie(ctx))))     \
			return 0;                                                     \
		return name##_body(ctx);                                              \
	}
#else
#define FTP_FEXIT(name, mode)             \
	SEC("fexit")                      \
	int name(void *ctx)               \
	{                                 \
		if (FTP_PAIR_AGG)         \
			pair_agg_exit(ctx); \
		else                      \
			tramp_exit(ctx, mode, 0); \
		return 0;                 \
	}
#endif

FTP_FEXIT(ftp_fexit, FTP_MODE_FENTRY)

/* fentry.multi / fexit.multi (BPF_TRACE_FENTRY_MULTI/FEXIT_MULTI, 7.x). */
SEC("fentry")
int ftp_fentry_multi(void *ctx)
{
	if (FTP_PAIR_AGG)
		pair_agg_entry(ctx);
	else
		tramp_entry(ctx, FTP_MODE_FENTRY_MULTI);
	return 0;
}

FTP_FEXIT(ftp_fexit_multi, FTP_MODE_FENTRY_MULTI)

/* fsession (BPF_TRACE_FSESSION, 7.0) and fsession.multi: the same
 * program runs at entry and at exit, and must return 0 at both (the
 * verifier allows nothing else), so the exit always runs: the entry marks
 * an accepted call in the session cookie, and the exit of a rejected call
 * returns after reading it. kprobe.session (6.10) skips the return run of
 * a call whose entry returns 1. The kfuncs take ctx since 7.0 (kernel
 * commit "bpf: add fsession support"); a kernel with the older prototype
 * refuses ftp_ksession: kprobe.session mode is unsupported there, and auto
 * then takes the kprobe.multi+kretprobe.multi pair. */
extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

/* session_agg: stat (tables only) in fsession and kprobe.session: the
 * session cookie holds the entry's timestamp, so a call needs no frame
 * storage at all (no record is sent, so no depth is needed either).
 * Entry and exit hits are both counted, so no frame is counted open.
 * regs: kprobe.session (arguments and return value in pt_regs). It
 * returns 1 for a call rejected at entry (kprobe.session then skips the
 * return run; fsession's exit finds a zero timestamp). */
static __always_inline int session_agg(void *ctx, __u64 *ts, int ret_run, int regs)
{
	if (!ret_run) {
		*ts = 0;
		if (!armed)
			return 1;
		if (FTP_ID_FILTERS) {
			__u64 pid_tgid = bpf_get_current_pid_tgid();
			if (!pass_ids(pid_tgid) || !pass_mutable(pid_tgid))
				return 1;
		}
		if (x_entry) {
			__u32 pn;
			int regs_only;
			__u32 psel = entry_pred(attach_cookie(ctx), &pn, &regs_only);
			if (psel) {
				__u64 args[FTP_MAX_ARGS]; /* the first pn (fetch_pred) */
				if (regs) {
					struct pt_regs *r = ctx;
					args[0] = FTP_ARG0(r);
					args[1] = FTP_ARG1(r);
					args[2] = FTP_ARG2(r);
					args[3] = FTP_ARG3(r);
					args[4] = FTP_ARG4(r);
					args[5] = FTP_ARG5(r);
				} else {
					fetch_pred(ctx, args, fn_nargs(ctx), pn);
				}
				if (xrejects(args, psel))
					return 1;
			}
		}
		count(FTP_STAT_ENTRY_HITS);
		if (regs && entry_only_funcs) {
			/* kprobe.session attaches the noreturn functions too
			 * (fsession gives them a plain fentry program): no return
			 * run will come, so none is asked for, as on_entry does. */
			if ((attach_cookie(ctx) >> 32) & FTP_FN_ENTRY_ONLY) {
				count(FTP_STAT_ENTRY_ONLY);
				return 1;
			}
		}
		*ts = bpf_ktime_get_ns();
		return 0;
	}
	if (!*ts)
		return 0; /* rejected at entry */
	__u64 dur = bpf_ktime_get_ns() - *ts;
	count(FTP_STAT_EXIT_HITS);
	__u64 cookie = attach_cookie(ctx);
	__u64 raw = 0;
	if (regs)
		raw = FTP_RET((struct pt_regs *)ctx);
	else
		bpf_get_func_ret(ctx, &raw);
	int is_err = 0;
	__s64 ret = normalize_ret(cookie >> 32, raw, &is_err);
	if (min_duration_ns && dur < min_duration_ns)
		return 0;
	if (errors_only && !is_err)
		return 0;
	aggregate((__u32)cookie, 1, dur, ret, is_err);
	return 0;
}

/* FTP_SESSION_AGG: the settings under which session_agg does the whole
 * job (tables only, no predicate on ret, no --entry window). */
#define FTP_SESSION_AGG (!want_events && want_agg && !x_exit && !window)

static __always_inline int session(void *ctx, __u8 mode)
{
	__u64 *accepted = bpf_session_cookie(ctx);
	int ret_run = bpf_session_is_return(ctx);
	if (FTP_SESSION_AGG) {
		if (accepted)
			session_agg(ctx, accepted, ret_run, 0);
		return 0;
	}
	if (ret_run) {
		if (accepted && *accepted)
			tramp_exit(ctx, mode, 1);
		return 0;
	}
	int rejected = tramp_entry(ctx, mode);
	if (accepted)
		*accepted = !rejected;
	return 0;
}

SEC("fsession")
int ftp_fsession(void *ctx) { return session(ctx, FTP_MODE_FSESSION); }

SEC("fsession")
int ftp_fsession_multi(void *ctx) { return session(ctx, FTP_MODE_FSESSION_MULTI); }

/* regs_args copies the argument registers from (inclusive) to to
 * (exclusive) of a kprobe's pt_regs into args. One test and load per
 * register, written out: a loop lets clang step a pointer through ctx,
 * which the verifier refuses ("dereference of modified ctx ptr"). */
static __always_inline void regs_args(struct pt_regs *ctx, __u64 *args, __u32 from, __u32 to)
{
	if (from <= 0 && 0 < to)
		args[0] = FTP_ARG0(ctx);
	if (from <= 1 && 1 < to)
		args[1] = FTP_ARG1(ctx);
	if (from <= 2 && 2 < to)
		args[2] = FTP_ARG2(ctx);
	if (from <= 3 && 3 < to)
		args[3] = FTP_ARG3(ctx);
	if (from <= 4 && 4 < to)
		args[4] = FTP_ARG4(ctx);
	if (from <= 5 && 5 < to)
		args[5] = FTP_ARG5(ctx);
}

/* Entry and exit of the kprobe modes: arguments and return value from the
 * registers (pt_regs); the number of arguments comes from BTF through the
 * cookie (6 when unknown). */
static __always_inline int regs_entry(struct pt_regs *ctx, __u8 mode)
{
	__u64 pid_tgid;
	if (!admit(&pid_tgid))
		return 1;
	__u64 cookie = attach_cookie(ctx);
	if (outside_window(pid_tgid, cookie))
		return 1;
	/* With an entry predicate, the argument registers it reads first
	 * (pred_nargs), the others only for a call it lets in (as
	 * tramp_entry): a rejected call copies no more than it tests. */
	__u64 args[FTP_MAX_ARGS];
	__u32 pn;
	int regs_only;
	__u32 psel = entry_pred(cookie, &pn, &regs_only);
	if (psel) {
		regs_args(ctx, args, 0, pn);
		if (rejected_at_entry(pid_tgid, (__u32)cookie, psel, regs_only, args, mode))
			return 1;
	} else {
		pn = 0;
	}
	regs_args(ctx, args, pn, FTP_MAX_ARGS);
	return on_entry(ctx, pid_tgid, cookie, args, cookie_nargs(cookie >> 32), mode);
}

static __always_inline void regs_exit(struct pt_regs *ctx, __u8 mode, int session)
{
	on_exit(ctx, mode, session, 1, 0);
}

SEC("kprobe.multi")
int ftp_kmulti(struct pt_regs *ctx) { regs_entry(ctx, FTP_MODE_KPROBE_MULTI); return 0; }

SEC("kretprobe.multi")
int ftp_kretmulti(struct pt_regs *ctx) { regs_exit(ctx, FTP_MODE_KPROBE_MULTI, 0); return 0; }

SEC("kprobe.session")
int ftp_ksession(struct pt_regs *ctx)
{
	if (FTP_SESSION_AGG) {
		__u64 *ts = bpf_session_cookie(ctx);
		if (!ts)
			return 0;
		return session_agg(ctx, ts, bpf_session_is_return(ctx), 1);
	}
	if (bpf_session_is_return(ctx)) {
		regs_exit(ctx, FTP_MODE_KPROBE_SESSION, 1);
		return 0;
	}
	return regs_entry(ctx, FTP_MODE_KPROBE_SESSION);
}

/* Single kprobes/kretprobes: the fallback where neither trampolines nor
 * fprobe exist (arm64 before 6.4). Function id in the perf-event cookie
 * (>= 5.15). */
SEC("kprobe")
int ftp_kprobe(struct pt_regs *ctx) { regs_entry(ctx, FTP_MODE_KPROBE); return 0; }

SEC("kretprobe")
int ftp_kretprobe(struct pt_regs *ctx) { regs_exit(ctx, FTP_MODE_KPROBE, 0); return 0; }

/* comm tracking: a thread's comm changes at exec (begin_new_exec) and
 * with prctl(PR_SET_NAME) or a write to /proc/PID/comm (__set_task_comm,
 * tracepoint task_rename, which fires before the copy); after either,
 * the thread's next record is preceded by its comm again.
 * sched_process_exec fires after the exec's rename, so a record taken
 * between task_rename and the copy is corrected there. */
static __always_inline void comm_changed(struct task_struct *t)
{
	struct tstack *st;
	if (!frames_in_hash) {
		st = bpf_task_storage_get(&tframes, t, 0, 0);
	} else {
		__u32 tid = t->pid;
		st = bpf_map_lookup_elem(&stacks, &tid);
	}
	if (st) {
		st->comm_sent = 0;
		st->comm_gen++;
	}
}

SEC("tp_btf/task_rename")
int ftp_rename(__u64 *ctx)
{
	comm_changed((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int ftp_comm_exec(__u64 *ctx)
{
	comm_changed(bpf_get_current_task_btf());
	return 0;
}

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
 * (execve's own) show as exits without entry, counted as in flight (not
 * those of a function whose entry predicate marks its rejections:
 * dropped uncounted, on_exit). */
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
	if (window) {
		/* --entry: a thread dying inside an entry function's call (its
		 * exit never runs) is counted, and its window closed (the
		 * hash fallback's slot would outlive it). */
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct tstack *st = frames(tid, 0);
		if (st && st->window) {
			__sync_fetch_and_add(&window_exits, 1);
			set_window(st, 0);
			if (frames_in_hash)
				bpf_map_delete_elem(&stacks, &tid);
		}
	}
	if (!filter_tree || p->signal->live.counter != 0)
		return 0;
	__u32 tgid = p->tgid;
	bpf_map_delete_elem(&tgids, &tgid);
	return 0;
}
