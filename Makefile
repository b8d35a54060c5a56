# gseproc: `make run` opens the console on the embedded engine and a simulated
# fleet; `make test` runs every test with the race detector.
GO      ?= go
BIN     := bin/gseproc
PKGS    := ./...
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X gseproc/backend/cli.Version=$(VERSION)
# The agent's own binary, beside gseproc (`gseproc agent` execs it): the
# agent alone, static (CGO_ENABLED=0, as the packages build gseproc), so
# an idle agent maps neither gseproc's other code nor libc.
AGENT_BIN     := bin/gseproc-agent
AGENT_PKG     := ./backend/agent/cmd/gseproc-agent
AGENT_LDFLAGS := -X main.version=$(VERSION)

# Packages: nfpm is pinned and run from the module proxy, so its
# dependencies stay out of go.mod. PKG_VERSION must start with a digit.
NFPM        ?= github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.44.0
PKG_VERSION ?= 0.1.0~git$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)
PKG_ARCH    ?= $(shell $(GO) env GOARCH)

.PHONY: run build test test-stress fuzz bench bench-fleet bench-operate bench-console compare lint clean package test-package

run: build
	./$(BIN) $(ARGS)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) .
	CGO_ENABLED=0 $(GO) build -ldflags '$(AGENT_LDFLAGS)' -o $(AGENT_BIN) $(AGENT_PKG)

test:
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

# test-stress runs the suite STRESS_RUNS times in a row while four CPU hogs
# keep the cores busy, as on a loaded CI box; the hogs are killed however it
# ends. PKGS narrows it (make test-stress PKGS=./backend/agent/).
STRESS_RUNS ?= 3
test-stress:
	@set -e; pids=""; \
	trap 'kill $$pids 2>/dev/null || true' EXIT INT TERM; \
	for i in 1 2 3 4; do yes >/dev/null & pids="$$pids $$!"; done; \
	for run in $$(seq 1 $(STRESS_RUNS)); do \
		echo "== stress run $$run/$(STRESS_RUNS) (4 CPU hogs)"; \
		$(GO) test -race -count=1 -timeout 15m $(PKGS); \
	done

# fuzz runs every fuzz target for FUZZTIME, one at a time on one worker
# (FUZZ_PARALLEL), so it shares a small machine; a crash stops it and its
# input lands in the package's testdata/fuzz/<target>/ (then a seed that
# make test runs). FUZZ=FuzzX narrows it to one target.
FUZZTIME      ?= 30s
FUZZ_PARALLEL ?= 1
FUZZ          ?= .
FUZZ_TARGETS  := \
	./model:FuzzParseAgentID ./model:FuzzParseLabel ./model:FuzzShellQuote ./backend/server/wire:FuzzProcessInfo ./backend/server/wire:FuzzParseHostRef \
	./backend/server:FuzzJobAPI ./backend/server:FuzzGSEAPI ./backend/server:FuzzNativeAPI ./backend/server:FuzzStrictScan \
	./backend/transport:FuzzSubjects ./backend/transport:FuzzAgentMessages \
	./backend/client:FuzzSSE ./backend/config:FuzzConfig ./ui:FuzzHostFilter ./ui:FuzzLabelSelector
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "$$fn" | grep -q -- '$(FUZZ)' || continue; \
		echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -parallel $(FUZZ_PARALLEL) $$pkg; \
	done

# bench runs every Go benchmark (the agent's crash storm among them), then
# measures a real idle `gseproc agent` process with a few hosted
# processes (its RSS against issue 13's 12 MB).
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -timeout 20m $(PKGS)
	./$(BIN) bench agent --procs 5 --idle 20s

# Opt-in measurements (not part of test): the real server (JetStream
# store) and a simulated fleet in its own process, on 127.0.0.1.
# FLEET_ARGS adds flags, e.g. FLEET_ARGS="--profile /tmp/prof".
bench-fleet: build
	./$(BIN) bench fleet --hosts 10000 --runs 3 $(FLEET_ARGS)
	./$(BIN) bench fleet --hosts 100000 --runs 3 $(FLEET_ARGS)

# 50 clients calling operate_proc for 10 s (at most 40000 calls), then
# for 5 s with an app rate limit of 500/s (burst 100): about 2,600 calls
# accepted (the burst, then 500 a second), every other one refused with
# the documented rate-limit refusal (HTTP 429, code 1306429) and no other
# error. Each run prints the rate, p50/p99, errors by kind, the server's
# RSS and its CPU and allocations per call, to the last call's result.
bench-operate: build
	./$(BIN) bench operate --clients 50 --requests 40000 --duration 10s $(FLEET_ARGS)
	./$(BIN) bench operate --clients 50 --requests 20000 --duration 5s --rate 500 --burst 100 $(FLEET_ARGS)

# The console at 100,000 hosts, select-all and a status op over the biggest
# list: embedded (engine and fleet in the process), then remote (the
# console alone against the real server, the fleet in its own process):
# heap, RSS, peak RSS, list open and op time.
bench-console: build
	GSEPROC_BENCH_REMOTE=1 GSEPROC_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench 'SelectAllOp' -benchtime 1x -timeout 60m ./ui/

# compare runs gseproc side by side with the tools installed here, in
# the same run (gseproc bench compare; see --help): kill -9 of a hosted
# sleep to its replacement exec'ing under gseproc's agent, s6, supervisord
# and pm2, and one command on N hosts through gseproc's engine and real
# agents against Ansible ad-hoc over N local hosts; one table of p50/p90
# and ratios, with the load average. A missing tool is named with how to
# install it and skipped: apt-get install -y s6 supervisor ansible;
# npm install -g pm2. COMPARE_ARGS adds flags, e.g. "--samples 50".
compare: build
	./$(BIN) bench compare $(COMPARE_ARGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	GOOS=windows $(GO) vet $(PKGS)

# package builds bin/gseproc_<version>_<arch>.deb and the .rpm (see backend/dist).
package:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/pkg/gseproc .
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_ARCH) $(GO) build -trimpath -ldflags '$(AGENT_LDFLAGS)' -o bin/pkg/gseproc-agent $(AGENT_PKG)
	for p in deb rpm; do \
		VERSION='$(PKG_VERSION)' GOARCH='$(PKG_ARCH)' $(GO) run $(NFPM) package --config backend/dist/nfpm.yaml --packager $$p --target bin/ || exit 1; \
	done

# test-package builds the .deb and .rpm in a temporary tree and inspects
# them (opt-in: a full build of the binary and nfpm from the module proxy).
test-package:
	GSEPROC_TEST_PACKAGE=1 $(GO) test -count=1 -run TestPackage -v ./backend/dist/

clean:
	rm -rf bin
