#!/usr/bin/env python3
"""annotate.py: a BPF program's arm64 (or, with --x86, x86-64) JIT code,
each instruction with how often it ran per call (difference of two
insnprof profiles).

usage: annotate.py KALLSYMS_LOG PROFILE BASE_PROFILE BASE_KALLSYMS_LOG NAME [--per SYMBOL] [--x86]

The kallsyms logs come from scripts/insnprof/kallsyms run with
INSNPROF_JITED=1 (profile.sh with JITED=1). NAME is a program's name
(ftp_fexit) or subprogram's (xpred); every JIT function of that name is
printed, disassembled by llvm-mc, with runs per call of SYMBOL's first
block (default __bpf_tramp_enter) and the jitline source lines.
"""
import collections, re, subprocess, sys, tempfile

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
    # per block start address: its runs, and its instruction count
    blocks = collections.Counter()
    first = {}
    for line in open(path):
        a, n, r = line.split()
        a, n, r = int(a, 16), int(n), int(r)
        blocks[(a, n)] += r
        first[a] = first.get(a, 0) + r
    return blocks, first

def per_insn(blocks, addrs):
    # executions per instruction address of one function (addrs: its
    # instructions' addresses in order): a block runs n instructions from a
    idx = {a: i for i, a in enumerate(addrs)}
    c = collections.Counter()
    for (a, n), r in blocks.items():
        i = idx.get(a)
        if i is None:
            continue
        for k in range(n):
            if i + k < len(addrs):
                c[addrs[i + k]] += r
    return c

def disassemble(code, x86):
    # instructions and their byte offsets
    hexs = " ".join("0x%02x" % b for b in code)
    if not x86:
        # LSE atomics (the JIT's BPF atomics) need the attribute: an
        # instruction llvm-mc cannot decode is dropped, shifting the rest.
        out = subprocess.run(["llvm-mc", "--disassemble", "-triple=aarch64", "-mattr=+v8.5a,+lse"], input=hexs,
                             capture_output=True, text=True).stdout
        insns = [l.strip() for l in out.splitlines() if l.strip() and not l.strip().startswith(".")]
        return insns, [4 * k for k in range(len(insns))], len(insns) == len(code) // 4
    # objdump, with the offsets of the bytes as they are (llvm-mc's
    # -show-encoding re-encodes: a 5-byte nop shows as 4 bytes)
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        out = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f.name],
                             capture_output=True, text=True).stdout
    insns, offs, end = [], [], 0
    for l in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*(?:\t(.*))?$", l)
        if not m:
            continue
        off, nb = int(m.group(1), 16), len(m.group(2).split())
        if m.group(3) is None:  # a long instruction's second line of bytes
            end = off + nb
            continue
        insns.append(" ".join(m.group(3).split()))
        offs.append(off)
        end = off + nb
    return insns, offs, end == len(code)

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
    x86 = "--x86" in args
    if x86:
        args.remove("--x86")
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
        insns, offs, ok = disassemble(code, x86)
        if not ok:
            sys.exit("llvm-mc decoded %d instructions of %s, not all %d bytes" % (len(insns), name, len(code)))
        c = per_insn(cur, [addr + o for o in offs])
        b = per_insn(base, [baddr + o for o in offs]) if baddr is not None else {}
        total = 0.0
        print("== %s at %x (%d instructions)" % (name, addr, len(insns)))
        for k, ins in enumerate(insns):
            a = addr + offs[k]
            if a in lines:
                print("            ; %s" % lines[a])
            n = c.get(a, 0) - (b.get(baddr + offs[k], 0) if baddr is not None else 0)
            total += n / div
            print("%10.2f  %4d  %s" % (n / div, k, ins))
        print("# %s: %.1f instructions per call" % (name, total))

main()
