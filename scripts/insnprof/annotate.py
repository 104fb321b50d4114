#!/usr/bin/env python3
"""annotate.py: a BPF program's arm64 JIT code, each instruction with how
often it ran per call (difference of two insnprof profiles).

usage: annotate.py KALLSYMS_LOG PROFILE BASE_PROFILE BASE_KALLSYMS_LOG NAME [--per SYMBOL]

The kallsyms logs come from scripts/insnprof/kallsyms run with
INSNPROF_JITED=1 (profile.sh with JITED=1). NAME is a program's name
(ftp_fexit) or subprogram's (xpred); every JIT function of that name is
printed, disassembled by llvm-mc, with runs per call of SYMBOL's first
block (default __bpf_tramp_enter) and the jitline source lines.
"""
import collections, re, subprocess, sys

def load(path, name):
    funcs, lines, syms = [], [], {}
    for line in open(path, errors="replace"):
        p = line.split()
        if line.startswith("jited "):
            funcs.append((int(p[1], 16), bytes.fromhex(p[2])))
        elif line.startswith("jitline "):
            _, a, where = line.split(" ", 2)
            lines.append((int(a, 16), where.strip()))
        elif len(p) >= 3 and re.match(r"[0-9a-f]{16}$", p[0]):
            m = re.match(r"bpf_prog_[0-9a-f]{16}_(.*)", p[2])
            if m:
                syms[int(p[0], 16)] = m.group(1)
    return [(a, c) for a, c in funcs if syms.get(a) == name], dict(lines)

def counts(path):
    # per instruction address: executions (block runs x each instruction)
    c = collections.Counter()
    first = {}
    for line in open(path):
        a, n, r = line.split()
        a, n, r = int(a, 16), int(n), int(r)
        for k in range(n):
            c[a + 4 * k] += r
        first[a] = first.get(a, 0) + r
    return c, first

def symaddr(path, sym):
    for line in open(path, errors="replace"):
        p = line.split()
        if len(p) >= 3 and p[2] == sym and re.match(r"[0-9a-f]{16}$", p[0]):
            return int(p[0], 16)
    sys.exit("no symbol " + sym)

def main():
    args = sys.argv[1:]
    per = "__bpf_tramp_enter"
    if "--per" in args:
        i = args.index("--per"); per = args[i + 1]; del args[i:i + 2]
    log, prof, bprof, blog, name = args
    cur, first = counts(prof)
    base, bfirst = counts(bprof)
    # the runs the difference holds: PROFILE's minus BASE's
    div = first.get(symaddr(log, per), 0) - bfirst.get(symaddr(blog, per), 0)
    if not div:
        sys.exit("no runs of " + per)
    bfuncs, _ = load(blog, name)
    funcs, lines = load(log, name)
    if not funcs:
        sys.exit("no JIT code of %s (run kallsyms with INSNPROF_JITED=1)" % name)
    for fi, (addr, code) in enumerate(funcs):
        baddr = bfuncs[fi][0] if fi < len(bfuncs) else None
        hexs = " ".join("0x%02x" % b for b in code)
        # LSE atomics (the JIT's BPF atomics) need the attribute: an
        # instruction llvm-mc cannot decode is dropped, shifting the rest.
        out = subprocess.run(["llvm-mc", "--disassemble", "-triple=aarch64", "-mattr=+v8.5a,+lse"], input=hexs,
                             capture_output=True, text=True).stdout
        insns = [l.strip() for l in out.splitlines() if l.strip() and not l.strip().startswith(".")]
        if len(insns) != len(code) // 4:
            sys.exit("llvm-mc decoded %d of %d instructions of %s" % (len(insns), len(code) // 4, name))
        total = 0.0
        print("== %s at %x (%d instructions)" % (name, addr, len(insns)))
        for k, ins in enumerate(insns):
            a = addr + 4 * k
            if a in lines:
                print("            ; %s" % lines[a])
            n = cur.get(a, 0) - (base.get(baddr + 4 * k, 0) if baddr is not None else 0)
            total += n / div
            print("%10.2f  %4d  %s" % (n / div, k, ins))
        print("# %s: %.1f instructions per call" % (name, total))

main()
