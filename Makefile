# idgen — make targets. `make test` is the test command CI runs.
GO      ?= go
BIN     ?= bin/idgen
BENCH   ?= .
COUNT   ?= 1

.PHONY: build run test bench bench-http lint fmt chaos fuzz

# The idgen binary in bin/, after checking that everything compiles.
build:
	$(GO) build ./...
	$(GO) build -o $(BIN) ./cmd/idgen

# idgen on the embedded default: SQLite in ./idgen.db, http://127.0.0.1:8080.
run: build
	$(BIN) serve

# The fault harness: real idgen processes against PostgreSQL and MariaDB
# with faults injected (test/chaos; needs the same databases as make test).
chaos:
	$(GO) test -tags chaos -count=1 -v -timeout 25m ./test/chaos/

# A bounded fuzz run of the HTTP request parsing. A count budget, not a
# duration: Go 1.26's fuzz coordinator can end a timed run with a spurious
# "context deadline exceeded" (golang/go#75804).
FUZZTIME ?= 100000x
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzIDsQuery -fuzztime $(FUZZTIME) ./httpapi/

# Every test, with the race detector. Database tests read
# IDGEN_TEST_POSTGRES_DSN / IDGEN_TEST_MYSQL_DSN (see docs/testing.md);
# without them they start containers when Docker answers, else skip
# (fail with IDGEN_TEST_REQUIRE_DB=1, as in .ci/run).
test:
	$(GO) test -race -count=1 -timeout 30m ./...

# Benchmarks of the hot paths, with allocations, then the comparison with
# bwmarrin/snowflake and sony/sonyflake (bench/, a module of its own so the
# main module does not depend on them); compare runs with benchstat.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) ./...
	cd bench && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) .

# The HTTP figures of docs/benchmarks.md: idgen-loadtest against a fresh
# idgen serve on SQLite and a bare echo server (about 23 minutes with REPEAT=3).
bench-http:
	scripts/bench/run.sh

# gofmt, go vet, and staticcheck when it installs from the module proxy.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags chaos ./test/chaos/
	cd bench && $(GO) vet ./...
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@latest -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...; \
	else echo "staticcheck could not be installed from the module proxy; skipped"; fi

fmt:
	gofmt -w $$(git ls-files '*.go')
