# hivesched: HiveD-style GPU cluster sharing as kube-scheduler plugins.
GO      ?= go
BIN     ?= bin
OUT     ?= _output
# Kubernetes' metrics require a vX.Y.Z version: a tag, else v0.1.0-dev+<commit>.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.1.0-dev+$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
           -X k8s.io/component-base/version.gitCommit=$(COMMIT) \
           -X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)

.PHONY: all build test vet unit integration verify generate soak bench-core fuzz clean

all: build

## build: the scheduler binary, version stamped, into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hivesched-scheduler ./cmd/hivesched-scheduler

## test: what CI runs: vet, unit tests (with 100k model operations), integration tests on a real API server
test: vet unit integration

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./apis/... ./plugins/... ./test/manifests/...

integration:
	$(GO) test -count=1 -timeout 20m ./test/integration/...

## verify: generated code is up to date and Go files are formatted
verify:
	bash hack/verify-codegen.sh
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*')); \
	if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi

## generate: deepcopy, conversion, defaults, clientset, listers, informers, CRD YAML
generate:
	bash hack/update-codegen.sh

## soak: the randomized model test with 1e6 operations
soak:
	$(GO) test -count=1 -run TestModelRandomized -timeout 3h ./plugins/cellcore/ -args -model.ops=1000000

## bench-core: the cell core's placement and build benchmarks
bench-core:
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./plugins/cellcore/ | tee $(OUT)/bench-core.txt

## fuzz: the core's fuzz targets, 30 s each
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzConfig -fuzztime 30s ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz FuzzAffinityGroupRequest -fuzztime 30s ./plugins/cellcore/

clean:
	rm -rf $(BIN) $(OUT)
