#!/bin/sh
# setup.sh [qemu] [clang] [buildah]: install what ftprobe's lab, generator
# and image build need, from the host's own apt sources, only when missing.
#   qemu     qemu-system-arm, qemu-system-x86 (the kernel lab)
#   clang    clang, llvm, libbpf-dev, linux-libc-dev (bpf2go regeneration)
#   buildah  buildah (`make image` without a Docker engine; vfs storage and
#            chroot isolation need no daemon)
set -eu
need=""
for what in "$@"; do
	case "$what" in
	qemu)
		command -v qemu-system-aarch64 >/dev/null || need="$need qemu-system-arm"
		command -v qemu-system-x86_64 >/dev/null || need="$need qemu-system-x86"
		command -v dpkg-deb >/dev/null || need="$need dpkg"
		[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need="$need debian-archive-keyring"
		;;
	clang)
		command -v clang >/dev/null || need="$need clang"
		command -v llvm-strip >/dev/null || need="$need llvm"
		[ -e /usr/include/bpf/bpf_helpers.h ] || need="$need libbpf-dev"
		[ -e /usr/include/linux/bpf.h ] || need="$need linux-libc-dev"
		;;
	buildah)
		command -v buildah >/dev/null || docker info >/dev/null 2>&1 || need="$need buildah"
		;;
	*) echo "setup.sh: unknown component $what" >&2; exit 2 ;;
	esac
done
[ -z "$need" ] && exit 0
echo "setup: installing$need" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $need >/dev/null
