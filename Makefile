# gseproc: `make run` opens the console on the embedded engine and a simulated
# fleet; `make test` runs every test with the race detector.
GO      ?= go
BIN     := bin/gseproc
PKGS    := ./...
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X gseproc/backend/cli.Version=$(VERSION)

.PHONY: run build test bench lint clean

run: build
	./$(BIN) $(ARGS)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) .

test:
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 20m $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
