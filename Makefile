# sessiond: `make run` starts a daemon on the built-in defaults; `make test`
# runs every test. Go >= 1.26, plus node and npm for `make test` (the real
# codex and Claude Code CLIs the tests run are installed with npm on first use).
GO      ?= go
BIN     ?= bin/sessiond
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/sessiond/sessiond/internal/version.buildVersion=$(VERSION)
# make run ARGS="--log-level debug" passes flags to `sessiond serve`.
ARGS    ?=

.PHONY: build run test test-agents test-ts bench lint lint-darwin lint-size chaos test-systemd clean npm-pack

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sessiond

run: build
	@echo "sessiond: serving; in another terminal try: $(BIN) ctl create --provider echo --cwd . && $(BIN) ctl ls"
	$(BIN) serve $(ARGS)

# The real-provider tests run the pinned codex and Claude Code CLIs; the first
# run installs them (and Debian's openssh-server, as root, for the ssh tests
# of `sessiond proxy`, when sshd is missing, and Debian's dbus for the
# keep-awake and notification tests, when dbus-daemon is missing)
# with npm into $${XDG_CACHE_HOME:-~/.cache}/sessiond-test (node and npm needed).
test:
	$(GO) run ./internal/testkit/codextest/install
	$(GO) run ./internal/testkit/claudetest/install
	$(GO) run ./internal/testkit/acptest/install
	$(GO) run ./internal/testkit/acpagents/install copilot
	$(GO) run ./internal/testkit/sshtest/install
	$(GO) run ./internal/testkit/dbustest/install
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) test-ts

# The heavy ACP agents (Qwen Code, opencode, claude-agent-acp, Gemini CLI:
# 300-550 MiB and 5-16 s starts each), pinned and installed with npm into
# the same cache on first use; their tests are built with -tags agents
# (internal/testkit/acpagents). .ci/run runs this after `make test`.
AGENT_TESTS := Qwen|Opencode|ClaudeAgentACP|Gemini
test-agents:
	$(GO) run ./internal/testkit/acpagents/install qwen opencode claude-agent-acp gemini
	$(GO) vet -tags agents ./internal/testkit/...
	$(GO) test -tags agents -race -count=1 -timeout 30m -run '$(AGENT_TESTS)' ./internal/testkit/acpagents/

# The TypeScript client and relay (clients/typescript): `npm ci` from the
# committed lockfile, then node --test against a freshly built daemon.
TS_DIR := clients/typescript
test-ts: npm-pack
	$(GO) build -o $(TS_DIR)/.bin/sessiond ./cmd/sessiond
	cd $(TS_DIR) && SESSIOND_BIN=$(CURDIR)/$(TS_DIR)/.bin/sessiond SESSIOND_NPM_PACK_DIR=$(CURDIR)/build/npm npm test

# Packs the daemon as npm packages (one per platform, os/cpu fields, plus
# @sessiond/daemon listing them as optional dependencies) and
# @sessiond/client into build/npm/*.tgz; nothing is published.
npm-pack:
	cd $(TS_DIR) && npm ci --no-audit --no-fund
	GO=$(GO) OUT=$(CURDIR)/build/npm $(TS_DIR)/scripts/npm-pack.sh

bench:
	$(GO) run ./cmd/sessiond-bench

# staticcheck is pinned and fetched through the module proxy by `go run`;
# nothing needs installing first.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: lint-darwin lint-size
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# A file holds one concern, whatever its length: split by concern, never by
# size. Past 500 lines a non-test Go file usually holds two, so it is flagged.
MAX_FILE_LINES ?= 500
lint-size:
	@out=$$(find . -name node_modules -prune -o -name '*.go' ! -name '*_test.go' -print | sort | \
		xargs awk -v max=$(MAX_FILE_LINES) 'FNR == 1 && NR > 1 && n > max { print f ": " n " lines" } \
			{ f = FILENAME; n = FNR } END { if (n > max) print f ": " n " lines" }'); \
	if [ -n "$$out" ]; then echo "non-test Go files over $(MAX_FILE_LINES) lines (split by concern):"; echo "$$out"; exit 1; fi

# macOS: every command builds and everything (tests included) vets for
# darwin/arm64 and darwin/amd64 without cgo; nothing runs there in CI
# (docs/operations.md "macOS").
lint-darwin:
	for arch in arm64 amd64; do \
		CGO_ENABLED=0 GOOS=darwin GOARCH=$$arch $(GO) build -o /dev/null ./cmd/... && \
		CGO_ENABLED=0 GOOS=darwin GOARCH=$$arch $(GO) vet ./... || exit 1; \
	done

chaos:
	$(GO) test -race -v -run Chaos -count=1 -timeout 60m ./internal/testkit/chaos/ -args -rounds=200

# The units under a real `systemd --user` (root; also part of `test`):
# see docs/operations.md "Running under systemd".
test-systemd:
	$(GO) test -race -v -count=1 -run TestSystemdUserService ./e2e/

clean:
	rm -rf bin build $(TS_DIR)/dist $(TS_DIR)/.bin
