# ftprobe's single entry point. `make help` lists the targets.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
MATRIX    ?= 1
ARCHS     := amd64 arm64
# make benchmarks: the kernel and architectures measured, the compare
# modes and bodies, and the calls per measurement (arm64 is slower under TCG).
BENCH_KERNEL ?= 7.3
BENCH_ARCHS  ?= $(ARCHS)
BENCH_MODES  := fentry+fexit,fsession,fsession.multi,kprobe.multi+kretprobe.multi,kprobe.session,kprobe+kretprobe
BENCH_BODIES := empty,timed,agg,trace,exit-only,filtered,predicate,window
BENCH_CALLS_amd64 := 20000
BENCH_CALLS_arm64 := 5000

.PHONY: help build cross generate check-generated test test-unit image-test lab-test demo bench benchmarks image dist lint setup clean

help:
	@echo "make demo             build ftprobe, boot Debian's arm64 7.3 kernel in QEMU, trace a workload in both modes"
	@echo "make test             check generated BPF, host unit tests, kernel matrix in QEMU"
	@echo "make build|cross      static ftprobe for this host | plus bin/ftprobe-linux-{amd64,arm64}"
	@echo "make generate         regenerate BPF objects with bpf2go (Debian clang 14)"
	@echo "make lab-test         kernel matrix only (MATRIX=arm64:7.3,... to choose)"
	@echo "make image-test       build the images, check the OCI archives, run the arm64 image's binary on arm64 7.3"
	@echo "make bench            Go benchmarks (decode and formatting)"
	@echo "make benchmarks       attach-path hit costs under QEMU icount into docs/bench/ (BENCH_ARCHS=amd64 for one)"
	@echo "make image|dist|lint  container image | release binaries + SHA256SUMS | go vet + staticcheck"

build:
	$(GOBUILD) -o bin/ftprobe ./cmd/ftprobe

cross: build
	for a in $(ARCHS); do GOARCH=$$a $(GOBUILD) -o bin/ftprobe-linux-$$a ./cmd/ftprobe || exit 1; done

setup:
	./scripts/setup.sh qemu clang buildah

generate:
	./scripts/setup.sh clang
	$(GO) generate ./...

# Fails when the committed bpf2go output differs from what the sources give.
check-generated: generate
	git diff --exit-code --stat -- internal/bpfobj || { echo "generated BPF files are stale: run make generate and commit" >&2; exit 1; }

# test/image needs the built images: image-test runs it.
test-unit:
	$(GO) vet ./...
	$(GO) test $$($(GO) list ./... | grep -v '/test/image$$')

lab-test: cross
	./scripts/setup.sh qemu
	FTPROBE_MATRIX=$(MATRIX) $(GO) test ./test/matrix -v -count=1 -timeout 80m

# The OCI archives of `make image`: configuration and layer of both, the arm64
# binary taken out of its image run in the arm64 7.3 lab VM, and the exit
# codes without privilege or tracefs (test/image).
image-test: image
	./scripts/setup.sh qemu
	FTPROBE_IMAGE_DIR=$(CURDIR)/dist FTPROBE_IMAGE_VERSION=$(VERSION) FTPROBE_IMAGE_REVISION=$(REVISION) \
		$(GO) test ./test/image -v -count=1 -timeout 20m

test: check-generated test-unit image-test lab-test

demo: cross
	./scripts/setup.sh qemu
	bin/ftprobe vm --kernel debian:7.3 --arch arm64 -- demo

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/events/

# docs/bench/compare-ARCH-KERNEL.{txt,json,svg}: compare's hit scenario in the
# lab VM under instruction counting (docs/benchmarks.md explains the method).
# The guest prints the JSON report; the host renders the table and the plot.
benchmarks: $(BENCH_ARCHS:%=benchmarks-%)

benchmarks-%: cross
	./scripts/setup.sh qemu
	mkdir -p docs/bench
	bin/ftprobe vm --kernel debian:$(BENCH_KERNEL) --arch $* --accel icount --timeout 80m -- \
		compare -q --scenario hit --trigger kernel --runs 3 --calls $(BENCH_CALLS_$*) \
		--mode $(BENCH_MODES) --body $(BENCH_BODIES) --json - > bin/compare-$*-$(BENCH_KERNEL).capture
	bin/ftprobe compare --from bin/compare-$*-$(BENCH_KERNEL).capture --json docs/bench/compare-$*-$(BENCH_KERNEL).json \
		--plot docs/bench/compare-$*-$(BENCH_KERNEL).svg > docs/bench/compare-$*-$(BENCH_KERNEL).txt

dist:
	rm -rf dist && mkdir -p dist
	for a in $(ARCHS); do GOARCH=$$a $(GOBUILD) -o dist/ftprobe-linux-$$a ./cmd/ftprobe || exit 1; done
	cd dist && sha256sum ftprobe-linux-* > SHA256SUMS

image: dist
	./scripts/setup.sh buildah
	./scripts/image.sh $(VERSION) $(REVISION)

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

clean:
	rm -rf bin dist
