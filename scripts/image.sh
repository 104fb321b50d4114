#!/bin/sh
# image.sh VERSION REVISION: build the ftprobe image for linux/amd64 and
# linux/arm64 from dist/ (make dist), with buildah (daemonless) or docker,
# and export each as an OCI archive in dist/.
set -eu
VERSION=${1:-dev}
REVISION=${2:-unknown}
if command -v buildah >/dev/null; then
	for arch in amd64 arm64; do
		buildah --storage-driver vfs build --isolation chroot --platform linux/$arch \
			--build-arg TARGETARCH=$arch --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
			-t ftprobe:$VERSION-$arch .
		buildah --storage-driver vfs push ftprobe:$VERSION-$arch oci-archive:dist/ftprobe-$VERSION-$arch.oci.tar
	done
elif docker info >/dev/null 2>&1; then
	for arch in amd64 arm64; do
		docker build --platform linux/$arch --build-arg TARGETARCH=$arch --build-arg VERSION="$VERSION" \
			--build-arg REVISION="$REVISION" -t ftprobe:$VERSION-$arch .
	done
else
	echo "image.sh: needs buildah (apt-get install buildah) or a running Docker engine" >&2
	exit 3
fi
