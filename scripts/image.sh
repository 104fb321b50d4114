#!/bin/sh
# image.sh VERSION REVISION: build the ftprobe image for linux/amd64 and
# linux/arm64 from dist/ (make dist), with buildah (daemonless) or docker,
# and export each as an OCI archive dist/ftprobe-VERSION-ARCH.oci.tar whose
# reference (org.opencontainers.image.ref.name) is ftprobe:VERSION-ARCH.
set -eu
VERSION=${1:-dev}
REVISION=${2:-unknown}
for arch in amd64 arm64; do
	[ -x dist/ftprobe-linux-$arch ] || { echo "image.sh: dist/ftprobe-linux-$arch missing: run make dist" >&2; exit 2; }
done
if command -v buildah >/dev/null; then
	# vfs storage and chroot isolation: no daemon, no overlay or user
	# namespaces needed (CI runners, nested VMs). Nothing is pulled: FROM scratch.
	B="buildah --storage-driver vfs"
	for arch in amd64 arm64; do
		$B build --quiet --isolation chroot --platform linux/$arch \
			--build-arg TARGETARCH=$arch --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
			-t ftprobe:$VERSION-$arch .
		rm -f dist/ftprobe-$VERSION-$arch.oci.tar
		$B push --quiet ftprobe:$VERSION-$arch oci-archive:dist/ftprobe-$VERSION-$arch.oci.tar:ftprobe:$VERSION-$arch
		$B rmi ftprobe:$VERSION-$arch >/dev/null
	done
elif docker info >/dev/null 2>&1; then
	# `docker save` writes an OCI image layout (Docker 25 and later).
	for arch in amd64 arm64; do
		docker build --platform linux/$arch --build-arg TARGETARCH=$arch --build-arg VERSION="$VERSION" \
			--build-arg REVISION="$REVISION" -t ftprobe:$VERSION-$arch .
		docker save -o dist/ftprobe-$VERSION-$arch.oci.tar ftprobe:$VERSION-$arch
	done
else
	echo "image.sh: needs buildah (./scripts/setup.sh buildah) or a running Docker engine" >&2
	exit 3
fi
ls -l dist/*.oci.tar
