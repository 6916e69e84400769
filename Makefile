# kwire — see README.md. Every target installs what it needs from the Go
# module proxy (and Debian packages where noted); nothing else is assumed.

GO       ?= go
BIN      := bin/kwire
FUZZTIME ?= 5m
export CGO_ENABLED := 0

.PHONY: all build demo test test-short captures goldens fuzz bench vet clean

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/kwire

# The main job on a shipped sample capture: a 3-member kgo consumer group
# against a 3-broker cluster, rebuilt from the wire.
demo: build
	./$(BIN) analyze --text testdata/group.pcapng

# The whole test suite (CI runs exactly this). Root-only tests skip with a
# reason when unprivileged.
test: vet
	$(GO) test -count=1 -timeout 14m ./...

test-short:
	$(GO) test -short -count=1 ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_bpfe[lb].go$$')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) build ./...

# Regenerate the committed captures from real clients (kgo, sarama) talking
# to a 3-broker kfake cluster, then the goldens from them.
captures:
	$(GO) run ./cmd/kwire-gen -out testdata
	$(MAKE) goldens

goldens:
	$(GO) test ./cmd/kwire -run Golden -update

# Long fuzzing: each target for $(FUZZTIME).
fuzz:
	$(GO) test ./decode -run '^$$' -fuzz '^FuzzFramer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./decode -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./decode -run '^$$' -fuzz '^FuzzResponse$$' -fuzztime $(FUZZTIME)

# Benchmarks on a large generated capture (issues 2 and 8). bench-capture
# writes $(BENCH_FILE) once: the bulk scenario (kgo <-> kfake, lz4/zstd/
# snappy, a committing group) until the file is $(BENCH_SIZE); BENCH_MSS=1448
# makes an Ethernet-MTU capture instead of loopback-like 64 KiB segments.
BENCH_SIZE  ?= 1GB
BENCH_MSS   ?=
BENCH_DIR   ?= /tmp/kwire-bench
BENCH_FILE  ?= $(BENCH_DIR)/bulk-$(shell echo '$(BENCH_SIZE)' | tr A-Z a-z | sed 's/i*b$$//')$(if $(BENCH_MSS),-mss$(BENCH_MSS)).pcapng
BENCH_PORTS := 29092-29094
BENCH_COUNT ?= 5
BENCH_ROUNDS ?= 3
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@latest
.PHONY: bench-capture bench-compare

bench-capture: $(BENCH_FILE)

$(BENCH_FILE):
	rm -rf $(BENCH_DIR)/gen.tmp && mkdir -p $(BENCH_DIR)/gen.tmp
	$(GO) run ./cmd/kwire-gen -out $(BENCH_DIR)/gen.tmp -only bulk -size $(BENCH_SIZE) $(if $(BENCH_MSS),-mss $(BENCH_MSS))
	mv $(BENCH_DIR)/gen.tmp/bulk.truth.json $(basename $@).truth.json
	mv $(BENCH_DIR)/gen.tmp/bulk.pcapng $@
	rmdir $(BENCH_DIR)/gen.tmp

# Go benchmarks (MB/s, frames/s, allocs) through each stage, on the bulk
# capture: capture alone, decode (no-op handler / NDJSON), kwire read.
# Keep an older bench.txt as bench.old.txt and benchstat compares the two.
bench: bench-capture
	KWIRE_BENCH_CAPTURE=$(BENCH_FILE) KWIRE_BENCH_PORTS=$(BENCH_PORTS) \
	  $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 60m ./capture ./decode ./cmd/kwire | tee bench.txt
	@! grep -q '^FAIL' bench.txt
	if [ -f bench.old.txt ]; then $(BENCHSTAT) bench.old.txt bench.txt; else $(BENCHSTAT) bench.txt; fi

# Issue 8's comparison: cat, kwire read (and kwire analyze once it exists)
# and tshark's Kafka dissector, interleaved, on the bulk capture: MB/s,
# frames/s, max RSS, ratios. Installs tshark with apt when it is missing.
bench-compare: build bench-capture
	command -v tshark >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -y install tshark; } \
	  || echo "bench-compare: tshark could not be installed; comparing without it"
	$(GO) run ./cmd/kwire-bench -kwire $(BIN) -ports $(BENCH_PORTS) -rounds $(BENCH_ROUNDS) $(BENCH_FILE)

clean:
	rm -rf bin bench.txt
