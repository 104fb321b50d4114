#!/bin/sh
# check-generated.sh CLANG: regenerate the BPF objects (bpf2go, as `make
# generate` does) from this tree's bpf/*.c into a temporary copy, and fail
# when they differ from internal/bpfobj. The tree is never written. CLANG is
# the start of `clang --version`'s first line for the compiler the committed
# objects were built with: another clang gives other bytes, so with it the
# check says so and stops (exit 3) instead of reporting every object stale.
set -eu
want=$1
cc=${BPF2GO_CC:-clang}
have=$("$cc" --version 2>/dev/null | head -n 1) || have=""
case "$have" in
"$want"*) ;;
*)
	echo "check-generated: the committed BPF objects were built by $want*, but $cc is ${have:-missing};" >&2
	echo "check-generated: other clang versions emit other bytes, so nothing can be compared: install that clang" >&2
	echo "check-generated: (Debian bookworm's clang-14: ./scripts/setup.sh clang) and run it again, or point BPF2GO_CC at it" >&2
	exit 3
	;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
cp -R go.mod go.sum gen.go tools.go bpf "$tmp"/
mkdir -p "$tmp/internal"
cp -R internal/bpfobj "$tmp/internal/"
(cd "$tmp" && go generate ./gen.go)
stale=""
for f in "$tmp"/internal/bpfobj/*; do
	n=${f##*/}
	cmp -s "$f" "internal/bpfobj/$n" || stale="$stale $n"
done
for f in internal/bpfobj/*; do
	[ -e "$tmp/internal/bpfobj/${f##*/}" ] || stale="$stale ${f##*/}"
done
if [ -n "$stale" ]; then
	echo "check-generated: stale generated BPF files (bpf/*.c give other bytes):$stale" >&2
	echo "check-generated: run make generate and commit internal/bpfobj" >&2
	exit 1
fi
echo "check-generated: internal/bpfobj matches bpf/*.c ($have)"
