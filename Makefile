# hivesched: HiveD-style GPU cluster sharing as kube-scheduler plugins.
GO      ?= go
BIN     ?= bin
OUT     ?= _output
# The binary is a kube-scheduler: Kubernetes derives its emulation version
# from this stamp, which must therefore be the Kubernetes release it is built
# from (go.mod); hivesched's own version is the pre-release part.
KUBE_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || echo v1.34.10)
VERSION ?= $(KUBE_VERSION)-hivesched.$(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
           -X k8s.io/component-base/version.gitCommit=$(COMMIT) \
           -X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)

.PHONY: all build test vet unit integration verify generate soak bench-core fuzz clean demo e2e sim sim-speed chaos

all: build

## demo: a local control plane (etcd, kube-apiserver, kwok, hivesched) and a short scenario on it
demo:
	bash hack/demo.sh

## e2e: the end-to-end suite on the local cluster (brought up if it is not)
e2e:
	bash hack/local-up.sh
	HIVESCHED_E2E_KUBECONFIG=$(CURDIR)/_output/local/kubeconfig $(GO) test -count=1 -v -timeout 20m ./test/e2e/...

## chaos: a fresh local cluster with two scheduler replicas under leader election; under gang churn
## kill -9 the leader CHAOS_KILLS times (100), restart kube-apiserver once, delete and re-add a node,
## and check from API objects alone (test/chaos, docs/chaos.md). CHAOS_SEED picks the run; the
## figures land in _output/chaos. The cluster stays up (make down).
CHAOS_KILLS ?= 100
CHAOS_SEED ?= 1
chaos:
	$(GO) test -count=1 -run '^$$' ./test/chaos/
	bash hack/local-down.sh --clean
	HIVESCHED_REPLICAS=2 bash hack/local-up.sh
	HIVESCHED_CHAOS_KUBECONFIG=$(CURDIR)/_output/local/kubeconfig CHAOS_KILLS=$(CHAOS_KILLS) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -count=1 -v -timeout 4h -run '^TestChaos$$' ./test/chaos/

## build: the scheduler binary, version stamped, hived-convert (HiveD's virtualClusters to VirtualClusters) and the kubectl plugin kubectl-hivesched into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hivesched-scheduler ./cmd/hivesched-scheduler
	$(GO) build -o $(BIN)/hived-convert ./cmd/hived-convert
	$(GO) build -o $(BIN)/kubectl-hivesched ./cmd/kubectl-hivesched
	$(GO) build -o $(BIN)/hivesched-sim ./cmd/hivesched-sim

## test: what CI runs: vet, unit tests (with 100k model operations), integration tests on a real API server
test: vet unit integration

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./apis/... ./cmd/... ./plugins/... ./test/manifests/... ./test/perf/... ./test/chaos/...

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

## soak: the randomized model test with 1e6 operations (safety and the VC guarantee after every step; prints the counts)
soak:
	@mkdir -p $(OUT)
	@$(GO) test -count=1 -v -run TestModelRandomized -timeout 3h ./plugins/cellcore/ -args -model.ops=1000000 > $(OUT)/soak.txt 2>&1; st=$$?; \
	grep -E 'model_test.go|^(ok|FAIL|--- |PASS)' $(OUT)/soak.txt; echo "full log: $(OUT)/soak.txt"; exit $$st

## sim: the simulator on the shipped sample (a week, 3 tenants, 16 nodes): report and plots in _output/sim
sim:
	$(GO) run ./cmd/hivesched-sim -config manifests/sim/scheduler-config.yaml -vcs manifests/sim/virtualclusters.yaml \
		-generate manifests/sim/generator.yaml -out $(OUT)/sim

## sim-speed: a month of ~100k jobs on 1,000 nodes, every policy, timed (hack/sim-speed.sh)
sim-speed:
	bash hack/sim-speed.sh

## bench-core: the cell core's placement, preemption and build benchmarks
bench-core:
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./plugins/cellcore/ | tee $(OUT)/bench-core.txt

## fuzz: the fuzz targets (config, group requests, recovery, both pod-spec parsers, the placement decoder), FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzAffinityGroupRequest$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzRecoverAffinityGroup$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodNative$$' -fuzztime $(FUZZTIME) ./plugins/hivesched/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodHived$$' -fuzztime $(FUZZTIME) ./plugins/hivesched/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodePlacement$$' -fuzztime $(FUZZTIME) ./plugins/hivesched/

clean:
	rm -rf $(BIN) $(OUT)

## up: a local control plane in _output/local: etcd, kube-apiserver, kwok fake GPU nodes,
## the sample VCs and hivesched (hack/local-up.sh; HIVESCHED_PROFILE=default makes it default-scheduler)
## down: stop it (hack/local-down.sh); make down DOWN_FLAGS=--clean also drops the etcd data
.PHONY: up down
up:
	bash hack/local-up.sh

down:
	bash hack/local-down.sh $(DOWN_FLAGS)

## bench: scheduler_perf throughput of HiveSched vs the default profile and the in-tree GangScheduling and TopologyAware plugins
## (test/perf; BENCH_NODES=5000 for the large variants, BENCH_FILTER a regexp on
## the test cases, BENCH_COUNT runs each, BENCH_PROFILE=1 a CPU profile,
## BENCH_CORE=0 skips the cell core's benchmarks; table in _output/perf/results-<n>.md)
.PHONY: bench
bench:
	BENCH_NODES=$(or $(BENCH_NODES),500) bash test/perf/run.sh
