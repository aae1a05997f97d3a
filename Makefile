# gi: build, demo, tests and benchmarks. `make test` is what CI runs.
GO        ?= go
BIN       := bin
GI        := $(BIN)/gi
DEMO      := $(BIN)/demo
export GOFLAGS := -buildvcs=false

.PHONY: all build deps demo test test-short lint bench generate clean

all: build

build:
	$(GO) build -o $(GI) ./cmd/gi

# Packages the tests and the BPF code generation need on a fresh Debian machine.
deps:
	@missing=""; \
	for p in tmux; do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Build gi and the demo service, start the service, and show gi on it.
demo: build
	cd testdata && $(GO) build -o ../$(DEMO) ./demo
	@set -e; \
	$(DEMO) -addr 127.0.0.1:0 > $(BIN)/demo.out 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null' EXIT; \
	for i in $$(seq 1 50); do grep -q READY $(BIN)/demo.out 2>/dev/null && break; sleep 0.1; done; \
	echo "== gi ps $$pid"; $(GI) ps $$pid; \
	echo; echo "== gi ps --group $$pid"; $(GI) ps --group $$pid; \
	echo; echo "== gi ps --stacks --match 'main\.' $$pid (first 40 lines)"; $(GI) ps --stacks --match 'main\.' $$pid | head -40

# The whole test suite, privileged tests included: a skipped privileged test fails.
test: deps
	GI_REQUIRE_PRIVILEGED=1 $(GO) test -count=1 -timeout 40m ./...

test-short:
	$(GO) test -count=1 -short ./...

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || { echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	GOARCH=arm64 $(GO) build ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Benchmarks print their own ratios against baselines measured in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./cmd/gi/

generate:
	$(GO) generate ./bpf/

clean:
	rm -rf $(BIN)
