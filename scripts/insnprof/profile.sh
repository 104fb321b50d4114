#!/bin/sh
# profile.sh: where a traced call's guest instructions go, by kernel
# function and by BPF source line (arm64 under TCG icount).
#
# usage: scripts/insnprof/profile.sh OUTDIR ARCH CALLS_A CALLS_B -- COMPARE_ARGS...
#   e.g. scripts/insnprof/profile.sh /tmp/prof arm64 20000 120000 -- \
#          --mode fentry+fexit --body trace
#
# Runs `ftprobe compare -q --scenario hit --trigger kernel --runs 1` twice in
# the lab VM (--accel icount, nokaslr, with the insnprof QEMU plugin), with
# CALLS_A and CALLS_B calls, and prints the difference per symbol and BPF
# source line divided by the difference in trampoline runs: what the
# additional calls cost, without the programs' load and verification,
# which both runs share. With JITED=1 the logs also hold the programs' JIT
# code: scripts/insnprof/annotate.py prints one program's instructions with
# their runs per call. (User-space and page-allocation lines are the
# reader and the ringbuf's size, which grows with the calls.)
set -eu
out=$1 arch=$2 a=$3 b=$4
shift 4
[ "${1:-}" = "--" ] && shift
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
# The guest runs bin/ftprobe-linux-$arch: built now, from this tree (a
# stale one is refused by ftprobe vm).
(cd "$root" && make -s cross >/dev/null)
gcc -O2 -shared -fPIC -o "$out/insnprof.so" "$root/scripts/insnprof/insnprof.c"
(cd "$root" && GOARCH=$arch CGO_ENABLED=0 go build -o "$out/kallsyms-$arch" ./scripts/insnprof/kallsyms)
for c in "$a" "$b"; do
	"$root/bin/ftprobe" vm --accel icount --arch "$arch" --timeout 30m --append nokaslr \
		--add "$out/kallsyms-$arch:/bin/kallsyms" --exec /bin/kallsyms --env INSNPROF_JITED="${JITED:-}" \
		--qemu-arg=-plugin --qemu-arg="$out/insnprof.so,out=$out/prof-$c.txt" \
		-- compare -q --scenario hit --trigger kernel --runs 1 --calls "$c" "$@" >"$out/run-$c.log" 2>&1 &
done
wait
x86=
[ "$arch" = amd64 ] && x86=--x86
python3 "$root/scripts/insnprof/report.py" "$out/run-$b.log" "$out/prof-$b.txt" "$out/prof-$a.txt" "$out/run-$a.log" \
	--per __bpf_tramp_enter --lines $x86 --top 80
