# gi: build, demo, tests and benchmarks. `make test` is what CI runs.
SHELL     := /bin/bash
GO        ?= go
BIN       := bin
GI        := $(BIN)/gi
DEMO      := $(BIN)/demo
export GOFLAGS := -buildvcs=false

.PHONY: all build deps demo test test-matrix test-kernels test-newest test-short lint bench fuzz generate generate-tables check-generate clean

all: build

build:
	$(GO) build -o $(GI) ./cmd/gi

# Debian packages the tests and the BPF code generation need on a fresh
# machine: tmux (terminal UI tests), gcc (cgo targets), clang-19, llvm-19 and
# libbpf-dev (compiling gi.bpf.c), gdb (its gcore writes cores gi reads; it
# reads the cores gi writes), zstd, lz4 and xz-utils (compressing cores as
# systemd-coredump does), graphviz (gi ps --graph FILE.svg runs its dot).
DEB_PACKAGES := tmux gcc libc6-dev clang-19 llvm-19 libbpf-dev gdb zstd lz4 xz-utils graphviz

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Build gi and the demo service, start the service, and show gi on it.
demo: build
	cd testdata && $(GO) build -o ../$(DEMO) ./demo
	@set -e; \
	$(DEMO) -addr 127.0.0.1:0 > $(BIN)/demo.out 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null || true' EXIT; \
	for i in $$(seq 1 50); do grep -q READY $(BIN)/demo.out 2>/dev/null && break; sleep 0.1; done; \
	echo "== gi ps $$pid (first 25 lines)"; $(GI) ps $$pid > $(BIN)/ps.out; head -25 $(BIN)/ps.out; tail -2 $(BIN)/ps.out; \
	echo; echo "== gi ps --group $$pid"; $(GI) ps --group $$pid; \
	echo; echo "== gi ps --leaks --group $$pid (the first 3 groups and the verdict)"; $(GI) ps --leaks --group $$pid > $(BIN)/leaks.out; head -4 $(BIN)/leaks.out; grep -A3 '^leaks:' $(BIN)/leaks.out | head -4; \
	echo; echo "== gi ps --stacks --match 'main\.load' $$pid (first 30 lines)"; $(GI) ps --stacks --match 'main\.load' $$pid > $(BIN)/stacks.out; head -30 $(BIN)/stacks.out; \
	echo; echo "== gi trace --max-overhead none --duration 1s --min-duration 30ms $$pid 'main.handle' 'main.load*' 'main.query' (every call whole; first 30 lines)"; \
	$(GI) trace --max-overhead none --duration 1s --min-duration 30ms $$pid 'main.handle' 'main.load*' 'main.query' > $(BIN)/trace.out; head -30 $(BIN)/trace.out; \
	echo; echo "== gi trace --stats --duration 3s $$pid 'main.*' (under the default 5% budget: what it samples, and what tracing everything would cost, first)"; $(GI) trace --stats --duration 3s $$pid 'main.*'

# The whole test suite, privileged tests included: a skipped privileged test fails.
# trace and cmd/gi measure paces, latencies and overheads against budgets:
# they run after the rest, one package at a time (-p 1), so that neither
# loads the machine under the other's measurements (nor under gi's probe
# calibration, kept for the boot); the other packages run in parallel.
TIMED_PKGS := ./trace/ ./cmd/gi/
test: deps
	@mod=$$($(GO) list -m); rest=$$($(GO) list ./... | grep -v -x -e "$$mod/trace" -e "$$mod/cmd/gi"); \
	GI_REQUIRE_PRIVILEGED=1 $(GO) test -count=1 -timeout 40m $$rest; a=$$?; \
	GI_REQUIRE_PRIVILEGED=1 $(GO) test -count=1 -p 1 -timeout 40m $(TIMED_PKGS); b=$$?; \
	test $$a -eq 0 && test $$b -eq 0

# Go 1.20 to 1.27 (the releases of runtimelayout's generated table) × default, PIE,
# cgo (external linking), stripped, trimpath: gi ps and gi trace on each of
# the 40 cells, with the grids printed.
test-matrix: deps
	@mkdir -p $(BIN)
	@echo "matrix: every Go release of the generated table x 5 builds, gi ps and gi trace; log in $(BIN)/matrix.log"
	@GI_REQUIRE_PRIVILEGED=1 GI_TEST_MATRIX=1 $(GO) test -count=1 -timeout 80m -run TestMatrix -v ./inspect/ ./trace/ > $(BIN)/matrix.log 2>&1; \
	status=$$?; \
	grep -E 'Go release|^ {12}|^(go1\.[0-9.]+|local) |^(ok|FAIL)\s' $(BIN)/matrix.log; \
	grep -E -A12 '^\s+--- FAIL' $(BIN)/matrix.log | head -200; \
	exit $$status

# Debian's kernels (amd64 5.10, 6.1, 6.12; arm64 6.1, 6.12) booted under
# qemu (emulated), each running gi's ps and trace checks in an initramfs:
# the grid, with each failed check and what gi trace warned. Installs qemu
# and downloads the kernels (about 400 MB, once) into ~/.cache/gi-kernels.
# GI_KERNELS=6.1-amd64,6.12-arm64 boots a subset. Consoles in bin/kernels/.
test-kernels:
	@mkdir -p $(BIN)
	@echo "kernels: Debian's kernels in qemu, gi ps and gi trace checks in each; log in $(BIN)/kernels.log"
	@set -o pipefail; GI_TEST_KERNELS=1 $(GO) test -count=1 -timeout 85m -v -run '^TestKernels$$' ./internal/kernelgrid/ 2>&1 \
		| tee $(BIN)/kernels.log \
		| grep --line-buffered -E '^\| |kernels_test\.go:[0-9]+: |^\s*--- (FAIL|PASS)|^(ok|FAIL|panic)|^fetch'

# The newest Go release the module proxy serves, whatever it is today: the
# ground-truth targets built with it (default, PIE, stripped) and compared
# with gi ps and gi trace. Not part of CI, which must not move under a
# commit: run it the day a Go release ships.
test-newest: deps
	@set -o pipefail; GI_REQUIRE_PRIVILEGED=1 GI_TEST_TOOLCHAINS=newest $(GO) test -count=1 -v -timeout 30m \
		-run 'TestSnapshotMatchesRuntimeDump|TestSnapshotStripped|TestTraceWorkloads' ./inspect/ ./trace/ 2>&1 \
		| grep -v -E '^=== (RUN|PAUSE|CONT|NAME)'

test-short:
	$(GO) test -count=1 -short ./...

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || { echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	GOARCH=arm64 $(GO) build ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Benchmarks print their own ratios against baselines measured in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./cmd/gi/ ./trace/
	$(GO) test -run '^$$' -bench . ./bpf/

# Fuzz every parser of untrusted bytes for FUZZTIME each (the seed corpora
# run in make test as plain tests); prints executions and any crasher.
FUZZTIME ?= 60s
FUZZ_TARGETS := elfbin:FuzzBinary pclntab:FuzzPclntab trace:FuzzProbeSites runtimelayout:FuzzReadStringArray inspect:FuzzDecodeImage funcargs:FuzzDecode report:FuzzAppendString heap:FuzzReadHeap
fuzz:
	@set -o pipefail; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg/ 2>&1 | grep -E 'elapsed: |^(ok|FAIL|---)|Failing input' | tail -3 || exit 1; \
	done

# Rebuild the committed bpf2go output from bpf/gi.bpf.c.
generate: deps
	$(GO) generate ./bpf/

# Rebuild runtimelayout's table of runtime layouts for stripped binaries: builds a
# probe program with every supported Go release (toolchains through the
# module proxy) for amd64 and arm64 and reads its DWARF.
generate-tables:
	cd runtimelayout && $(GO) generate ./

# Fail if the committed bpf2go output is not what gi.bpf.c compiles to.
check-generate: deps
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cp bpf/*.go bpf/*.o $$tmp/; \
	$(GO) generate ./bpf/; \
	for f in bpf/*_bpfel.go bpf/*_bpfel.o; do \
		cmp -s $$f $$tmp/$$(basename $$f) || { echo "$$f is stale: run make generate and commit"; cp $$tmp/* bpf/; exit 1; }; \
	done; echo "bpf: generated files are current"

clean:
	rm -rf $(BIN)
