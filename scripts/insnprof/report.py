#!/usr/bin/env python3
"""report.py: guest instructions by kernel function from insnprof profiles.

usage: report.py KALLSYMS_LOG PROFILE [BASE_PROFILE [BASE_KALLSYMS_LOG]] [--per SYMBOL] [--top N] [--lines] [--x86]

KALLSYMS_LOG is the output of scripts/insnprof/kallsyms (everything after
its "== kallsyms" line). Each block's instructions (insns per run x runs)
go to the symbol at or below its address; BPF programs are named by their
kallsyms name (bpf_prog_TAG_NAME), whatever address the load gave them.
With BASE_PROFILE, prints PROFILE minus BASE per symbol. --per SYMBOL
divides by the runs of SYMBOL's first block in PROFILE (minus those in
BASE_PROFILE; e.g. the traced
function: instructions per call). --lines splits BPF programs by source
line (their BTF line info; per instruction on arm64, by block start with
--x86).
"""
import bisect, collections, re, sys

def load_syms(path):
    syms = []
    on = False
    for line in open(path, errors="replace"):
        if line.startswith("jitline "):
            # a BPF program's source line from here on (line info)
            _, a, where = line.split(" ", 2)
            if LINES:
                syms.append((int(a, 16), "bpf:" + where.strip()[:90]))
            continue
        if line.startswith("== kallsyms"):
            on = True
            continue
        if re.match(r"[0-9a-f]{16} ", line):
            on = True
        if not on:
            continue
        p = line.split()
        if len(p) < 3:
            continue
        name = p[2]
        if name == "_etext":
            name = "JIT"  # past the kernel's text: BPF JIT code, modules
        elif p[1].lower() not in ("t", "w"):
            continue
        # bpf_prog_<tag>_<name>: the tag differs per load, keep the name
        m = re.match(r"bpf_prog_[0-9a-f]{16}_(.*)", name)
        if m:
            name = "bpf:" + m.group(1)
        syms.append((int(p[0], 16), name))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]

def profile(path, syms):
    addrs, names = syms
    by = collections.Counter()
    first = {}
    for line in open(path):
        a, n, r = line.split()
        a, n, r = int(a, 16), int(n), int(r)
        if LINES and ARM64:
            # fixed 4-byte instructions: each to its own line range
            for k in range(n):
                i = bisect.bisect_right(addrs, a + 4 * k) - 1
                name = names[i] if i >= 0 else "?"
                if k == 0 and i >= 0 and addrs[i] == a:
                    first[name] = first.get(name, 0) + r
                by[name] += r
            continue
        i = bisect.bisect_right(addrs, a) - 1
        # Outside the kernel's text (BPF programs without kallsyms,
        # modules, user space): named by their 4 KiB page.
        name = names[i] if i >= 0 else "?"
        if name in ("?", "JIT"):
            name = "%s@%x" % ("user" if a < 1 << 63 else "jit", a & ~0xfff)
        if i >= 0 and addrs[i] == a:
            first[name] = first.get(name, 0) + r
        by[name] += n * r
    return by, first

LINES = False
ARM64 = True

def main():
    global LINES, ARM64
    args = [a for a in sys.argv[1:]]
    if "--lines" in args:
        args.remove("--lines"); LINES = True
    if "--x86" in args:
        args.remove("--x86"); ARM64 = False
    per, top = None, 40
    if "--per" in args:
        i = args.index("--per"); per = args[i + 1]; del args[i:i + 2]
    if "--top" in args:
        i = args.index("--top"); top = int(args[i + 1]); del args[i:i + 2]
    syms = load_syms(args[0])
    cur, first = profile(args[1], syms)
    base, bfirst = collections.Counter(), {}
    if len(args) > 2:
        bsyms = load_syms(args[3]) if len(args) > 3 else syms
        base, bfirst = profile(args[2], bsyms)
    div = 1
    if per:
        # the runs the difference holds: PROFILE's minus BASE's
        div = first.get(per, 0) - bfirst.get(per, 0)
        if not div:
            sys.exit("no runs of %s's first block" % per)
        print("# per run of %s: %d runs" % (per, div))
    diff = {k: cur[k] - base.get(k, 0) for k in set(cur) | set(base)}
    tot = sum(diff.values())
    print("# total %.1f" % (tot / div))
    for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
        print("%10.1f  %s" % (v / div, k))

main()
