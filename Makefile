# kwire — see README.md. Every target installs what it needs from the Go
# module proxy (and Debian packages where noted); nothing else is assumed.

GO       ?= go
BIN      := bin/kwire
FUZZTIME ?= 5m
export CGO_ENABLED := 0

.PHONY: all build demo test test-deps test-short captures goldens fuzz bench vet clean external

all: build

# What kwire version prints: VERSION is the nearest release tag (git
# describe; "devel" without one), then the commit and its date, stamped
# here because GOFLAGS may say -buildvcs=false.
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
DATE    ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
VPKG    := github.com/kwire/kwire/internal/version
LDFLAGS := $(if $(VERSION),-X $(VPKG).version=$(VERSION)) $(if $(COMMIT),-X $(VPKG).commit=$(COMMIT) -X $(VPKG).date=$(DATE))

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kwire

# The main job on a shipped sample capture: a 3-member kgo consumer group
# against a 3-broker cluster, rebuilt from the wire.
demo: build
	./$(BIN) analyze --text testdata/group.pcapng

# The whole test suite (CI runs exactly this, as root): unit and
# real-capture tests, root-only live/eBPF tests (they skip with a reason
# when unprivileged), the committed eBPF object checked against its source,
# the sharded correlator's differential test under the race detector, and
# each fuzz target for ~20 s.
test: vet test-deps realkafka-deps java-driver
	$(GO) test -count=1 -timeout 14m ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -run 'TestShards|TestRouter|TestKeyParts' ./cmd/kwire ./route
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory bpf-check; \
	  else echo "bpf-check skipped: installing clang/bpftool needs root (run make bpf-check as root)"; fi
	$(MAKE) --no-print-directory fuzz-short

# What the tests need beyond Go (Debian packages): gcc for the race
# detector (it needs cgo; the binary itself does not), a JDK 17 and Maven
# for the real Apache Kafka brokers and the Java client driver (issue 37;
# their jars come from Maven Central, cached in ~/.m2), tmux for the
# terminal UI's end-to-end test, kcat (librdkafka on OpenSSL) for the eBPF
# TLS probes' OpenSSL test; each of the last two skips without its tool;
# prometheus and promtool for the test that scrapes kwire with a real
# Prometheus and checks the shipped dashboard and alert rules
# (TestPrometheus: skips without them, fails under CI=true); Chromium
# for the HTML report's tests (read in headless Chromium over the DevTools
# protocol; they skip without it, but fail under CI=true);
# systemd-analyze (systemd) and setpriv (util-linux) for the deploy/ units'
# tests (TestDeployUnits, TestDeployUnitCapabilities); Burrow (installed
# as /usr/bin/Burrow) for the side-by-side lag and consumer-health test
# (internal/burrowcmp: skips without it, fails under CI=true); jq for
# TestRecipes, which runs docs/schema.md's jq recipes as written (skips
# without it, fails under CI=true).
test-deps:
	command -v gcc >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc libc6-dev; }
	command -v tmux >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y tmux; } \
	  || echo "test-deps: tmux could not be installed; the terminal UI end-to-end test will skip"
	command -v kcat >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y kcat; } \
	  || echo "test-deps: kcat could not be installed; the eBPF TLS test with OpenSSL will skip"
	{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; } \
	  || echo "test-deps: prometheus could not be installed; TestPrometheus will skip"
	command -v chromium >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } \
	  || echo "test-deps: chromium could not be installed; the HTML report tests will skip"
	{ command -v java >/dev/null && command -v mvn >/dev/null; } || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jdk-headless maven; }
	command -v systemd-analyze >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y systemd; }
	command -v setpriv >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y util-linux; }
	command -v Burrow >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y burrow; } \
	  || echo "test-deps: burrow could not be installed; TestBurrow will skip"
	command -v jq >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y jq; } \
	  || echo "test-deps: jq could not be installed; TestRecipes (the jq recipes of docs/schema.md) will skip"

# kwire against tshark's Kafka dissector on the public captures of other
# projects (EXTERNAL, beside the clone; its README says where each came
# from): exit 0 when kwire finds at least tshark's PDUs in every one.
# go test runs the same check (TestExternalCaptures) when the folder is there.
EXTERNAL ?= ../shared/external-captures
external: build
	bash $(EXTERNAL)/compare.sh $(CURDIR)/$(BIN)

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
	$(GO) run ./cmd/kwire-gen -out testdata/tls -only tls13,tls12,tls13_aes256,tls13_chacha
	$(MAKE) goldens

goldens:
	$(GO) test ./cmd/kwire -run Golden -update

# Long fuzzing: each target for $(FUZZTIME) (FUZZTIME=10000000x: ten
# million executions each). Go minimizes every input that finds new
# coverage, for up to 60s and O(n^2) executions it does not count: on inputs
# of a few KB (real Kafka exchanges, capture files) that is all a worker
# ever does. FUZZMINIMIZE bounds it. Crashers land in <pkg>/testdata/fuzz
# and run with every `go test` from then on.
FUZZMINIMIZE ?= 200x
FUZZ_LONG ?= $(FUZZ_LONG_TARGETS)
FUZZ_TARGETS := ./decode:FuzzFramer ./decode:FuzzRequest ./decode:FuzzResponse \
                ./correlate:FuzzCorrelator ./capture:FuzzReader ./capture:FuzzResync \
                ./capture:FuzzTLSRecord ./capture:FuzzFastReader ./jsonout:FuzzFastExchange \
                ./decode:FuzzFastMessages ./aggregate:FuzzAggregate
# Targets too slow for fuzz-short's budget in CI (FuzzTLSStall writes a key
# log file per input: about 1,400 a second; FuzzTCPFast runs two
# Assemblers over up to 128 segments: about 2,000; FuzzReorder reassembles
# a 40 KB real capture per input: about 2,200 on one busy core); `make
# fuzz` runs them too, and their corpora run in every `go test`.
FUZZ_LONG_TARGETS := ./capture:FuzzTLSStall ./capture:FuzzTCPFast ./capture:FuzzReorder
.PHONY: fuzz-short

fuzz:
	@set -e; for t in $(FUZZ_TARGETS) $(FUZZ_LONG); do \
	  echo "== $${t#*:} ($(FUZZTIME))"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE); \
	done

# Each fuzz target for 100,000 executions, 13 to 37 s each here (CI). A
# count, not a duration: with -fuzztime 20s, Go 1.26's coordinator may fail
# a target with "context deadline exceeded" and no crasher when a worker is
# mid-input at the deadline (golang/go#75804, fixed in Go 1.27); it did so
# once in a make test here.
fuzz-short:
	$(MAKE) fuzz FUZZTIME=100000x FUZZ_LONG=

# Benchmarks on a large generated capture (issues 2 and 8). bench-capture
# writes $(BENCH_FILE) once: the bulk scenario (kgo <-> kfake, lz4/zstd/
# snappy, a committing group) until the file is $(BENCH_SIZE); BENCH_MSS=1448
# makes an Ethernet-MTU capture instead of loopback-like 64 KiB segments.
BENCH_SIZE  ?= 1GB
BENCH_MSS   ?=
BENCH_DIR   ?= /tmp/kwire-bench
BENCH_FILE  ?= $(BENCH_DIR)/bulk-$(shell echo '$(BENCH_SIZE)' | tr A-Z a-z | sed 's/i*b$$//')$(if $(BENCH_MSS),-mss$(BENCH_MSS)).pcapng
BENCH_PORTS := 29092-29094
BENCH_COUNT ?= 6
# bench-compare's rounds, interleaved: a median of 5 is steadier than one
# of 3 on a VM with noisy neighbours (tshark's 27 s a round dominate).
BENCH_ROUNDS ?= 5
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@latest
.PHONY: bench-capture bench-compare bench-rss

bench-capture: $(BENCH_FILE)

$(BENCH_FILE):
	rm -rf $(BENCH_DIR)/gen.tmp && mkdir -p $(BENCH_DIR)/gen.tmp
	$(GO) run ./cmd/kwire-gen -out $(BENCH_DIR)/gen.tmp -only bulk -size $(BENCH_SIZE) $(if $(BENCH_MSS),-mss $(BENCH_MSS))
	mv $(BENCH_DIR)/gen.tmp/bulk.truth.json $(basename $@).truth.json
	mv $(BENCH_DIR)/gen.tmp/bulk.pcapng $@
	rmdir $(BENCH_DIR)/gen.tmp

# Go benchmarks (MB/s, frames/s, allocs) through each stage, on the bulk
# capture: capture alone, decode (no-op handler / NDJSON), kwire read and
# analyze. BENCH_COUNT=6 is the least benchstat gives a confidence interval for.
# Keep an older bench.txt as bench.old.txt and benchstat compares the two.
bench: bench-capture
	KWIRE_BENCH_CAPTURE=$(BENCH_FILE) KWIRE_BENCH_PORTS=$(BENCH_PORTS) \
	  $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 60m ./capture ./decode ./cmd/kwire | tee bench.txt
	@! grep -q '^FAIL' bench.txt
	if [ -f bench.old.txt ]; then $(BENCHSTAT) bench.old.txt bench.txt; else $(BENCHSTAT) bench.txt; fi

# Profile-guided optimisation: cmd/kwire/default.pgo is a CPU profile of
# kwire analyze on the bulk capture, which go build uses by itself
# (-pgo=auto): about 5% less CPU. Regenerate it after large changes to the
# hot path (capture, decode, correlate, jsonout).
.PHONY: pgo
pgo: bench-capture
	KWIRE_BENCH_CAPTURE=$(BENCH_FILE) KWIRE_BENCH_PORTS=$(BENCH_PORTS) \
	  $(GO) test -run '^$$' -bench 'BenchmarkAnalyze$$' -benchtime 10x -count 1 \
	  -cpuprofile cmd/kwire/default.pgo -o $(BENCH_DIR)/kwire.test ./cmd/kwire

# Issue 8's comparison: cat, kwire read, kwire analyze (left out if missing)
# and tshark's Kafka dissector, interleaved, on the bulk capture: MB/s,
# frames/s, max RSS, ratios. Installs tshark with apt when it is missing.
bench-compare: build bench-capture
	command -v tshark >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -y install tshark; } \
	  || echo "bench-compare: tshark could not be installed; comparing without it"
	$(GO) run ./cmd/kwire-bench -kwire $(BIN) -ports $(BENCH_PORTS) -rounds $(BENCH_ROUNDS) $(BENCH_FILE)

# Issue 18's memory check: kwire's max RSS on the 1 GB bulk capture and on
# a 2 GB one (each written once, like bench-capture's), tshark left out.
# It must not grow with the length of the capture: within 10%.
bench-rss: build
	$(MAKE) --no-print-directory bench-capture BENCH_SIZE=1GB
	$(MAKE) --no-print-directory bench-capture BENCH_SIZE=2GB
	for s in 1g 2g; do \
	  $(GO) run ./cmd/kwire-bench -kwire $(BIN) -ports $(BENCH_PORTS) -rounds $(BENCH_ROUNDS) -skip tshark $(BENCH_DIR)/bulk-$$s.pcapng || exit 1; \
	done

# Issue 5: kwire live keeping up with loopback Kafka traffic through kfake
# (root). BENCH_LIVE_MBPS are the client rates tried (0: as fast as they
# go), BENCH_LIVE_SECONDS each run's length, BENCH_LIVE_RING_MB --ring-mb.
BENCH_LIVE_MBPS    ?= 1000,2000,3000,0
BENCH_LIVE_SECONDS ?= 15
BENCH_LIVE_RING_MB ?= 64
BENCH_LIVE_COUNT   ?= 3
SOAK               ?= 10m
.PHONY: bench-live soak

bench-live:
	KWIRE_BENCH_LIVE=1 KWIRE_BENCH_LIVE_MBPS=$(BENCH_LIVE_MBPS) KWIRE_BENCH_LIVE_SECONDS=$(BENCH_LIVE_SECONDS) KWIRE_BENCH_LIVE_RING_MB=$(BENCH_LIVE_RING_MB) \
	  $(GO) test -run '^$$' -bench BenchmarkLive -benchtime 1x -timeout 30m -v ./cmd/kwire

# kwire live's CPU on Ethernet-sized packets, as a broker's NIC gives them
# (root): a 200 MB capture of Ethernet MSS replayed onto a veth at its
# captured pace (docs/deploy.md, "Cost on a busy broker").
.PHONY: bench-live-replay
bench-live-replay:
	$(MAKE) --no-print-directory bench-capture BENCH_SIZE=200MB BENCH_MSS=1448
	KWIRE_BENCH_REPLAY=$(BENCH_DIR)/bulk-200m-mss1448.pcapng KWIRE_BENCH_PORTS=$(BENCH_PORTS) \
	  $(GO) test -run '^$$' -bench BenchmarkLiveReplay -benchtime 1x -count $(BENCH_LIVE_COUNT) -timeout 30m -v ./cmd/kwire

# kwire live's resident memory over $(SOAK) of steady traffic with group
# churn (root): start vs end RSS.
soak:
	KWIRE_SOAK=$(SOAK) $(GO) test -run '^TestLiveSoak$$' -count=1 -timeout 60m -v ./cmd/kwire

# Issue 6: the eBPF probes. bpf regenerates bpf/vmlinux.h from this
# kernel's BTF and the committed bpf2go output (bpf/kwire_bpfel.go, .o) from
# bpf/kwire.c, installing clang, llvm, libbpf-dev and bpftool from Debian
# packages when they are missing. bpf-check (CI) regenerates the output from
# the committed sources into a temporary directory and fails if it differs
# from what is committed. bench-ebpf measures the probes' cost on a loopback
# Kafka workload (root); BENCH_EBPF_RECORD sets its record size.
BPF_TOOLS_OK = command -v clang >/dev/null && command -v llvm-strip >/dev/null && command -v bpftool >/dev/null && test -f /usr/include/bpf/bpf_helpers.h
BPF2GO_ARGS  = $(shell sed -n 's|^//go:generate go tool bpf2go ||p' bpf/gen.go)
BENCH_EBPF_SECONDS ?= 5
BENCH_EBPF_RECORD  ?= 65536
.PHONY: bpf bpf-check bpf-tools bench-ebpf

bpf-tools:
	@$(BPF_TOOLS_OK) || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clang llvm libbpf-dev bpftool; }

bpf: bpf-tools
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h.tmp && mv bpf/vmlinux.h.tmp bpf/vmlinux.h
	cd bpf && $(GO) generate ./

bpf-check: bpf-tools
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  (cd bpf && GOPACKAGE=bpf GOFILE=gen.go $(GO) tool bpf2go -output-dir $$tmp $(BPF2GO_ARGS)) && \
	  for f in kwire_bpfel.go kwire_bpfel.o; do \
	    cmp -s $$tmp/$$f bpf/$$f || { echo "bpf/$$f is not what bpf/kwire.c generates: run make bpf and commit"; exit 1; }; \
	  done && echo "bpf: committed output matches the sources"

bench-ebpf:
	KWIRE_BENCH_EBPF_SECONDS=$(BENCH_EBPF_SECONDS) KWIRE_BENCH_EBPF_RECORD=$(BENCH_EBPF_RECORD) \
	  $(GO) test -run '^$$' -bench BenchmarkEBPFOverhead -benchtime 1x -timeout 30m -v ./capture

clean:
	rm -rf bin bench.txt

# Issue 37: real Apache Kafka for internal/realkafka's clusters. The jars
# java/kafka/pom.xml (4.4.0) and java/kafka-3/pom.xml (3.9.2, KRaft) pin,
# with their runtime dependencies, copied from Maven Central (downloads stay
# in ~/.m2) into $(KWIRE_KAFKA_CACHE)/kafka-<version>/lib, outside the repo;
# skipped when that is newer than its pom. Needs mvn and a JDK 17+.
KWIRE_KAFKA_CACHE ?= $(HOME)/.cache/kwire
REALKAFKA_POMS    := 4.4.0:java/kafka 3.9.2:java/kafka-3
.PHONY: realkafka-deps

realkafka-deps:
	@command -v java >/dev/null || { echo "realkafka-deps: no java: apt-get install openjdk-17-jdk-headless"; exit 1; }
	@for vp in $(REALKAFKA_POMS); do \
	  v=$${vp%%:*}; pom=$${vp#*:}/pom.xml; lib=$(KWIRE_KAFKA_CACHE)/kafka-$$v/lib; \
	  if [ $$lib/.complete -nt $$pom ]; then echo "realkafka-deps: Kafka $$v in $$lib"; continue; fi; \
	  command -v mvn >/dev/null || { echo "realkafka-deps: no mvn: apt-get install maven"; exit 1; }; \
	  echo "realkafka-deps: resolving Kafka $$v ($$pom) into $$lib"; \
	  rm -rf $$lib.tmp && mvn -q -B -Dstyle.color=never -f $$pom dependency:copy-dependencies \
	    -DincludeScope=runtime -DoutputDirectory=$$lib.tmp && \
	  rm -rf $$lib && mv $$lib.tmp $$lib && touch $$lib/.complete || exit 1; \
	done

# The real-Kafka tests alone (three JVMs at a time; about 3 minutes here).
.PHONY: test-realkafka
test-realkafka: realkafka-deps
	CI=true $(GO) test -count=1 -v -timeout 15m ./internal/realkafka

# The Java client driver (java/driver, issue 37): Apache Kafka 4.4.0's
# clients from Maven Central (cached in ~/.m2), driven by internal/gen.
# Rebuilt only when a source is newer than the jar.
JAVA_DRIVER_SRC := java/driver/pom.xml $(shell find java/driver/src -type f 2>/dev/null)
JAVA_DRIVER_MVN = @command -v mvn >/dev/null || { echo "java-driver: mvn not found: install Maven and a JDK 17 (Debian: apt-get install maven openjdk-17-jdk-headless)"; exit 1; }
java/driver/target/kwire-driver.jar: $(JAVA_DRIVER_SRC)
	$(JAVA_DRIVER_MVN)
	cd java/driver && mvn -q -B -Dstyle.color=never package
	@touch $@

# The same driver on the Kafka 3.9.2 clients (profile kafka3), for the
# captures of the 3.9 cluster (older request versions).
java/driver/target-kafka3/kwire-driver.jar: $(JAVA_DRIVER_SRC)
	$(JAVA_DRIVER_MVN)
	cd java/driver && mvn -q -B -Dstyle.color=never -Pkafka3 package
	@touch $@

.PHONY: java-driver
java-driver: java/driver/target/kwire-driver.jar java/driver/target-kafka3/kwire-driver.jar

# Issue 37: regenerate the committed real-Kafka captures and their truth
# (internal/realgen: a 3-node Kafka 4.4.0 cluster and the Java client;
# a few minutes per scenario here). REAL_ONLY=r_joins runs one.
.PHONY: real-captures
real-captures: realkafka-deps java-driver
	$(GO) run ./cmd/kwire-gen -real -out testdata/real $(if $(REAL_ONLY),-only $(REAL_ONLY))
