# ftprobe's single entry point. `make help` lists the targets.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
MATRIX    ?= 1
ARCHS     := amd64 arm64
# The compiler the committed BPF objects (internal/bpfobj) were built with:
# the start of `clang --version`'s first line. Other versions emit other
# bytes; check-generated refuses them.
BPF_CLANG := Debian clang version 14.
# make benchmarks: the kernel and architectures measured, the compare
# modes and bodies, and the calls per measurement (arm64 is slower under TCG).
BENCH_KERNEL ?= 7.3
BENCH_ARCHS  ?= $(ARCHS)
BENCH_MODES  := fentry+fexit,fsession,fsession.multi,kprobe.multi+kretprobe.multi,kprobe.session,kprobe+kretprobe
BENCH_BODIES := empty,timed,agg,trace,exit-only,filtered,predicate,window
BENCH_CALLS_amd64 := 20000
BENCH_CALLS_arm64 := 5000
# The other lab kernels of the cross-kernel report (ARCH:VERSION), with the
# duration bodies only.
BENCH_MORE_KERNELS ?= amd64:6.12 arm64:7.2 arm64:6.12
BENCH_MORE_BODIES  := empty,timed,agg,trace

.PHONY: help build cross generate check-generated test test-unit image-test lab-test demo go-bench benchmarks benchmarks-kernels benchmarks-merge benchmarks-tables image dist lint setup clean

# make help: every target with its "## " description.
help: ## list the targets
	@awk -F ':[^#]*## ' -v cc='$(BPF_CLANG)' '/^[a-z][a-z-]*:.*## /{d = $$2; gsub(/\$$\(BPF_CLANG\)/, cc, d); printf "make %-16s %s\n", $$1, d}' $(firstword $(MAKEFILE_LIST))

build: ## static ftprobe for this host in bin/
	$(GOBUILD) -o bin/ftprobe ./cmd/ftprobe

cross: build ## bin/ftprobe plus bin/ftprobe-linux-{amd64,arm64}
	for a in $(ARCHS); do GOARCH=$$a $(GOBUILD) -o bin/ftprobe-linux-$$a ./cmd/ftprobe || exit 1; done

setup: ## install QEMU, clang and buildah from the host's apt sources, where missing
	./scripts/setup.sh qemu clang buildah

generate: ## regenerate the BPF objects with bpf2go ($(BPF_CLANG)x)
	./scripts/setup.sh clang
	@$${BPF2GO_CC:-clang} --version | head -n 1 | grep -q '^$(BPF_CLANG)' || \
		echo "generate: warning: the committed objects were built by $(BPF_CLANG)x, not $$($${BPF2GO_CC:-clang} --version | head -n 1): expect every object to change" >&2
	$(GO) generate ./...

# Regenerates into a temporary copy and compares: the tree is not written.
check-generated: ## fail when internal/bpfobj differs from what bpf/*.c give ($(BPF_CLANG)x only)
	./scripts/setup.sh clang
	./scripts/check-generated.sh '$(BPF_CLANG)'

# test/image needs the built images: image-test runs it.
test-unit: ## go vet and the host unit tests
	$(GO) vet ./...
	$(GO) test $$($(GO) list ./... | grep -v '/test/image$$')

lab-test: cross ## kernel matrix in QEMU only (MATRIX=arm64:7.3,... to choose)
	./scripts/setup.sh qemu
	FTPROBE_MATRIX=$(MATRIX) $(GO) test ./test/matrix -v -count=1 -timeout 80m

# The OCI archives of `make image`: configuration and layer of both, the arm64
# binary taken out of its image run in the arm64 7.3 lab VM, and the exit
# codes without privilege or tracefs (test/image).
image-test: image ## build the images, check the OCI archives, run the arm64 image's binary on arm64 7.3
	./scripts/setup.sh qemu
	FTPROBE_IMAGE_DIR=$(CURDIR)/dist FTPROBE_IMAGE_VERSION=$(VERSION) FTPROBE_IMAGE_REVISION=$(REVISION) \
		$(GO) test ./test/image -v -count=1 -timeout 20m

test: check-generated test-unit image-test lab-test ## check-generated, test-unit, image-test and lab-test

demo: cross ## boot Debian's arm64 7.3 kernel in QEMU and trace a workload in each demo mode
	./scripts/setup.sh qemu
	bin/ftprobe vm --kernel debian:7.3 --arch arm64 -- demo

go-bench: ## Go benchmarks of decoding and formatting events (go test -bench)
	$(GO) test -run '^$$' -bench . -benchmem ./internal/events/

# docs/bench/compare-ARCH-KERNEL.{txt,json,svg}: compare's hit scenario in the
# lab VM under instruction counting (docs/benchmarks.md explains the method).
# The guest prints the JSON report; the host renders the table and the plot.
benchmarks: $(BENCH_ARCHS:%=benchmarks-%) benchmarks-kernels ## hit costs of every trace mode and body under QEMU icount into docs/bench/ (BENCH_ARCHS=amd64 for one), then the other lab kernels and the cross-kernel report

benchmarks-%: cross ## the same for one architecture
	./scripts/setup.sh qemu
	mkdir -p docs/bench
	bin/ftprobe vm --kernel debian:$(BENCH_KERNEL) --arch $* --accel icount --timeout 80m -- \
		compare -q --scenario hit --trigger kernel --runs 3 --calls $(BENCH_CALLS_$*) \
		--mode $(BENCH_MODES) --body $(BENCH_BODIES) --json - > bin/compare-$*-$(BENCH_KERNEL).capture
	bin/ftprobe compare --from bin/compare-$*-$(BENCH_KERNEL).capture --json docs/bench/compare-$*-$(BENCH_KERNEL).json \
		--plot docs/bench/compare-$*-$(BENCH_KERNEL).svg --markdown bin/compare-$*-$(BENCH_KERNEL).md > docs/bench/compare-$*-$(BENCH_KERNEL).txt
	./scripts/splice.sh docs/benchmarks.md $*-$(BENCH_KERNEL) bin/compare-$*-$(BENCH_KERNEL).md

# The other lab kernels, then the cross-kernel report of every report in
# docs/bench/ (benchmarks-merge).
benchmarks-kernels: cross ## hit costs on the other lab kernels (BENCH_MORE_KERNELS), then benchmarks-merge
	./scripts/setup.sh qemu
	for kv in $(BENCH_MORE_KERNELS); do a=$${kv%%:*}; v=$${kv#*:}; \
		case $$a in amd64) calls=$(BENCH_CALLS_amd64);; *) calls=$(BENCH_CALLS_arm64);; esac; \
		bin/ftprobe vm --kernel debian:$$v --arch $$a --accel icount --timeout 80m -- \
			compare -q --scenario hit --trigger kernel --runs 3 --calls $$calls \
			--mode $(BENCH_MODES) --body $(BENCH_MORE_BODIES) --json - > bin/compare-$$a-$$v.capture && \
		bin/ftprobe compare --from bin/compare-$$a-$$v.capture --json docs/bench/compare-$$a-$$v.json > docs/bench/compare-$$a-$$v.txt || exit 1; \
	done
	$(MAKE) benchmarks-merge

# A sub-make, so that the wildcard sees the reports just written.
benchmarks-merge: build ## merge docs/bench/compare-*.json into docs/bench/kernels.{txt,json,svg} and docs/benchmarks.md (no VM)
	bin/ftprobe compare $(patsubst %,--from %,$(wildcard docs/bench/compare-*.json)) \
		--json docs/bench/kernels.json --plot docs/bench/kernels.svg --markdown bin/kernels.md > docs/bench/kernels.txt
	./scripts/splice.sh docs/benchmarks.md kernels bin/kernels.md

# docs/benchmarks.md's tables from the committed reports, without measuring.
benchmarks-tables: build ## put docs/bench/*.json's tables into docs/benchmarks.md (no VM)
	for a in $(BENCH_ARCHS); do \
		bin/ftprobe compare --from docs/bench/compare-$$a-$(BENCH_KERNEL).json --markdown bin/compare-$$a-$(BENCH_KERNEL).md >/dev/null && \
		./scripts/splice.sh docs/benchmarks.md $$a-$(BENCH_KERNEL) bin/compare-$$a-$(BENCH_KERNEL).md || exit 1; done

dist: ## release binaries and SHA256SUMS in dist/
	rm -rf dist && mkdir -p dist
	for a in $(ARCHS); do GOARCH=$$a $(GOBUILD) -o dist/ftprobe-linux-$$a ./cmd/ftprobe || exit 1; done
	cd dist && sha256sum ftprobe-linux-* > SHA256SUMS

image: dist ## container images as OCI archives in dist/
	./scripts/setup.sh buildah
	./scripts/image.sh $(VERSION) $(REVISION)

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

clean: ## remove bin/ and dist/
	rm -rf bin dist
