# infergate — see README.md (and docs/ for each subject). `make demo` and `make test` do all set-up.

GO ?= go
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
GOBIN ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
BIN := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: all build test test-grpc-path test-allocs test-short vet fmt docs manifests proto proto-tools demo bench-overhead bench-matrix clean

all: build

# bench/ is a module of its own (its plots' libraries stay out of the
# proxy's go.mod), built and tested beside the proxy's. Tests and vet
# take both modules in one run through test.work (a Go workspace the
# go command reads only when GOWORK names it), so their packages share
# the cores as one `go test ./...` does.
WORKSPACE := GOWORK=$(CURDIR)/test.work

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/... ./examples/simserver
	cd bench && $(GO) build -o ../$(BIN)/ ./cmd/...

vet:
	$(WORKSPACE) $(GO) vet ./... ./bench/...

fmt:
	@test -z "$$(gofmt -l . | grep -v '^proto/.*\.pb\.go$$')" || (gofmt -l . ; exit 1)

# test: unit and integration tests (integration tests start real processes on
# loopback: simserver, infergate, promtool, nginx, chromium). It builds bin/
# first so that the bench smoke tests run the real binaries instead of
# skipping. -artifacts keeps what tests write to t.ArtifactDir() (the status
# page's screenshots) under _artifacts/; each test logs its folder.
test: fmt vet build
	$(WORKSPACE) $(GO) test -race -count=1 -timeout 20m -artifacts ./... ./bench/...
	$(MAKE) test-grpc-path
	$(MAKE) test-allocs

# test-grpc-path runs the proxy's tests once more with clients served by the
# grpc.Server alone (fast_path off); by default they go through the relay.
test-grpc-path:
	INFERGATE_TEST_GRPC_PATH=1 $(GO) test -race -count=1 ./proxy/

# test-allocs runs the allocation budgets, which -race would distort.
test-allocs:
	$(GO) test -count=1 -run 'AllocBudget' ./proxy/ ./monitor/

# docs regenerates the reference pages from what the binary parses and
# registers (the flag table, the Config type, the collectors);
# TestReferencePagesMatchBinary fails when the committed pages differ.
docs:
	mkdir -p docs/reference
	$(GO) run ./cmd/infergate docs --out docs/reference

# manifests renders deploy/kubernetes/ from the Helm chart deploy/helm/infergate
# (and refreshes the chart's copy of the dashboard and its default exported
# rules); TestHelmManifests fails when the committed files differ. Needs
# helm: GOBIN="$$HOME/go/bin" go install helm.sh/helm/v4/cmd/helm@v4.3.2
manifests:
	PATH="$$PATH:$$HOME/go/bin" $(GO) test -count=1 -run 'TestHelmManifests' ./deploy -update

test-short:
	$(WORKSPACE) $(GO) test -count=1 -short ./... ./bench/...

proto-tools:
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(GOBIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# proto regenerates the committed Go code from proto/defs with pinned
# generator versions (protoc from Debian's protobuf-compiler).
proto: proto-tools
	cd proto/defs && PATH=$(GOBIN):$$PATH protoc -I . -I /usr/include \
		--go_out=../.. --go_opt=module=github.com/infergate/infergate \
		--go-grpc_out=../.. --go-grpc_opt=module=github.com/infergate/infergate \
		kserve/*.proto tensorflow/core/framework/*.proto tensorflow/core/protobuf/*.proto tensorflow_serving/apis/*.proto

demo: build
	./scripts/demo.sh

bench-overhead: build
	$(BIN)/bench overhead

# bench-matrix: the overhead matrix (sizes, callers, connections) in one run, the project's load and ghz
# side by side (go install github.com/bojand/ghz/cmd/ghz@v0.120.0).
BENCH_MATRIX_FLAGS ?= -d 5s
bench-matrix: build
	$(BIN)/bench overhead -size simple,1MiB,16MiB -c 8,32 -conns 1,4 -repeat 3 -open-base slowest $(BENCH_MATRIX_FLAGS)

clean:
	rm -rf $(BIN)
