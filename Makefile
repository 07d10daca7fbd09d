# idgen — make targets. `make test` is the test command CI runs.
GO      ?= go
BIN     ?= bin/idgen
BENCH   ?= .
COUNT   ?= 1

.PHONY: build run test test-helm bench bench-http lint lint-go lint-openapi fmt chaos fuzz proto proto-lint proto-check ts-test py-test release

# buf, pinned in a module file of its own (see proto/tools.mod).
BUF     ?= $(GO) tool -modfile=proto/tools.mod buf
TSDIR   := clients/typescript
PYDIR   := clients/python

# The version stamped into the binary: `idgen version`, the status page and
# idgen_build_info report it. By default the Git description of the
# checkout (the tag, commits since it and the commit, -dirty with
# uncommitted changes), as CI stamps its image (deploy/Dockerfile, VERSION);
# empty outside a Git checkout, and then the binary reports what the Go
# toolchain recorded (see cmd/idgen, versionString).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS ?= -X main.linkVersion=$(VERSION)

# The idgen binary in bin/, after checking that everything compiles.
build:
	$(GO) build ./...
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/idgen

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

# Every test, with the race detector (TESTPKGS narrows it). Database tests
# read IDGEN_TEST_POSTGRES_DSN / IDGEN_TEST_MYSQL_DSN (see docs/testing.md);
# without them they start containers when Docker answers, else skip (fail
# with IDGEN_TEST_REQUIRE_DB=1, as in .ci/run). The last lines say how many
# database tests were skipped, or which containers they ran on.
TESTPKGS ?= ./...
test:
	@report=$$(mktemp); trap 'rm -f "$$report"' EXIT; \
	echo "$(GO) test -race -count=1 -timeout 30m $(TESTPKGS)"; \
	IDGEN_TEST_DB_REPORT="$$report" $(GO) test -race -count=1 -timeout 30m $(TESTPKGS); status=$$?; \
	scripts/testdb-report.sh "$$report"; exit $$status

# The Helm chart (deploy/helm/idgen) rendered with Helm's Go packages and
# checked against deploy/k8s and the idgen binary: no cluster needed. A
# module of its own (deploy/helm/go.mod), so that Helm and the Kubernetes
# packages stay out of go.mod; not part of make test for the same reason.
test-helm:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 ./...

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

# The linters, each at a pinned version, all of which must pass:
#   - gofmt on every Go file (whatever its build constraints);
#   - golangci-lint (.golangci.yml: go vet's analyzers, errcheck and the
#     other bug-finding linters listed there), on the main module with the
#     chaos and docker build tags (and cmd/idgen again with
#     idgen_testclock), on bench/ and on deploy/helm/ (the modules of
#     their own). It is pinned in a module
#     of its own, tools/go.mod, because as a tool of go.mod its ~200
#     dependencies would raise versions of modules the idgen binary links;
#   - staticcheck, pinned as a tool of go.mod (a handful of dependencies,
#     none shared with the binary);
#   - Redocly CLI's recommended-strict rules on docs/openapi.yaml
#     (tools/redocly.yaml), pinned in tools/package-lock.json;
#   - buf lint, buf format and buf breaking on the proto (proto-lint).
# The first run builds golangci-lint and staticcheck (minutes on two cores);
# later runs take them from the build cache.
GOLANGCI ?= $(GO) tool -modfile=$(CURDIR)/tools/go.mod golangci-lint
REDOCLY  := tools/node_modules/.bin/redocly

lint: lint-go lint-openapi proto-lint

lint-go:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GOLANGCI) run ./...
	$(GOLANGCI) run --build-tags idgen_testclock ./cmd/idgen/
	cd bench && $(GOLANGCI) run ./...
	cd deploy/helm && $(GOLANGCI) run ./...
	$(GO) tool staticcheck -tags chaos,docker,release ./...
	$(GO) tool staticcheck -tags idgen_testclock ./cmd/idgen/

lint-openapi: $(REDOCLY)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		$(REDOCLY) lint --config tools/redocly.yaml docs/openapi.yaml

$(REDOCLY): tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund
	@touch $@

fmt:
	gofmt -w $$(git ls-files '*.go')

# The code generated from proto/idgen/v1: Go messages and connect-go
# services beside the .proto files, the TypeScript client's messages in
# clients/typescript/src/gen. The old output goes first, so that nothing of
# a removed file survives.
proto: $(TSDIR)/node_modules/.bin/protoc-gen-es
	find proto -name '*.pb.go' -delete
	find proto -name '*.connect.go' -delete
	rm -rf $(TSDIR)/src/gen
	$(BUF) generate

# protoc-gen-es at the version of clients/typescript/package-lock.json.
$(TSDIR)/node_modules/.bin/protoc-gen-es: $(TSDIR)/package-lock.json
	cd $(TSDIR) && npm ci --no-audit --no-fund
	@touch $@

# buf lint (STANDARD), the format buf format writes, and buf breaking (FILE)
# against the last commit on main: see proto/breaking.sh for which commit
# that is on a branch, on main itself, and before the proto existed.
proto-lint:
	$(BUF) lint
	$(BUF) format --diff --exit-code
	BUF="$(BUF)" proto/breaking.sh

# Fails when the committed generated code is not what make proto writes
# (CI runs it): a changed, deleted or new file.
proto-check: proto
	@git diff --exit-code -- proto $(TSDIR)/src/gen || { echo "make proto changed the files above: commit what it generates"; exit 1; }
	@new=$$(git ls-files --others --exclude-standard -- proto $(TSDIR)/src/gen); \
	if [ -n "$$new" ]; then echo "make proto wrote files that are not committed:"; echo "$$new"; exit 1; fi

# The TypeScript client's tests (node's test runner), after npm ci.
ts-test:
	cd $(TSDIR) && npm ci --no-audit --no-fund && npm test

# The Python client's tests (python3 -m unittest; the package and its tests
# use the standard library only) against the idgen binary built here, which
# IDGEN_BIN names: a missing binary fails them, it never skips them.
PYBIN   ?= $(CURDIR)/bin/idgen-py-test
py-test:
	$(GO) build -o $(PYBIN) ./cmd/idgen
	cd $(PYDIR) && IDGEN_BIN=$(PYBIN) python3 -m unittest discover -v

# The release (scripts/release.sh, docs/releasing.md): from a clean commit
# whose CHANGELOG.md has the section of VERSION, the stamped binaries for
# linux/amd64 and linux/arm64, the npm and Python packages, the image (when
# a Docker engine answers) and SHA256SUMS in dist/, each verified to carry
# VERSION; then the annotated tag VERSION. It never pushes or publishes,
# it prints the commands that do. DRY_RUN=1 (CI: VERSION=v0.0.0-dryrun)
# does everything but the tag.
DRY_RUN ?= 0
release:
	VERSION="$(VERSION)" DRY_RUN="$(DRY_RUN)" GO="$(GO)" scripts/release.sh
