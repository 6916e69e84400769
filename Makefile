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
# against a 3-broker cluster.
demo: build
	./$(BIN) read --text testdata/group.pcapng | head -n 40
	@echo "..."
	./$(BIN) read --text testdata/group.pcapng | tail -n 2

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

# Benchmarks: MB/s through each stage (compare runs with benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./capture ./decode ./cmd/kwire | tee bench.txt

clean:
	rm -rf bin bench.txt
