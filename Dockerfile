# ftprobe for kernel CI runners: the static binary and nothing else.
# Built without pulling a base image: `make image` builds dist/ first.
#   buildah --storage-driver vfs build --isolation chroot --platform linux/arm64 \
#     --build-arg VERSION=... --build-arg REVISION=... -t ftprobe .
FROM scratch
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="ftprobe" \
      org.opencontainers.image.description="Live kernel function tracer over every attach path: BPF trampolines, fprobe and kprobes" \
      org.opencontainers.image.source="https://github.com/ftprobe/ftprobe" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY dist/ftprobe-linux-${TARGETARCH} /ftprobe
ENTRYPOINT ["/ftprobe"]
CMD ["features"]
