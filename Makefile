# hivesched: HiveD-style GPU cluster sharing as kube-scheduler plugins.
GO      ?= go
BIN     ?= bin
OUT     ?= _output
# The local cluster's directory (hack/local-env.sh): HIVESCHED_LOCAL_DIR moves it.
LOCAL_DIR := $(if $(HIVESCHED_LOCAL_DIR),$(abspath $(HIVESCHED_LOCAL_DIR)),$(CURDIR)/_output/local)
# The binary is a kube-scheduler: Kubernetes derives its emulation version
# from this stamp, which must therefore be the Kubernetes release it is built
# from (go.mod); hivesched's own version is the pre-release part.
KUBE_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || echo v1.37.2)
VERSION ?= $(KUBE_VERSION)-hivesched.$(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
           -X k8s.io/component-base/version.gitCommit=$(COMMIT) \
           -X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)

.PHONY: all build test vet unit integration browser-test verify generate soak bench-core bench-core-compare core-decisions-compare fuzz clean demo e2e sim sim-speed sim-trace sim-paper sim-philly sim-nvl72 chaos

all: build

## demo: a local control plane (etcd, kube-apiserver, kube-controller-manager, kwok, hivesched) and a
## short scenario on it; it refuses a cluster that holds other state (other VirtualClusters, GPUs held
## elsewhere), naming it: make demo DEMO_FLAGS=--clean starts from an empty etcd instead
demo:
	bash hack/demo.sh $(DEMO_FLAGS)

## e2e: the end-to-end suite on the local cluster (brought up if it is not), with Kubeflow's
## training-operator started on it (hack/local-kubeflow.sh: ~1.5-5 min to build the first time; its
## PyTorchJob and MPIJob controllers: TestTrainingOperator, TestMPIJob);
## E2E_KUBEFLOW=0 leaves the operator out and its test skips
E2E_KUBEFLOW ?= 1
e2e:
	bash hack/local-up.sh
	if [ "$(E2E_KUBEFLOW)" = 1 ]; then bash hack/local-kubeflow.sh; fi
	HIVESCHED_E2E_KUBECONFIG=$(LOCAL_DIR)/kubeconfig HIVESCHED_E2E_KUBEFLOW=$(filter 1,$(E2E_KUBEFLOW)) \
		$(GO) test -count=1 -v -timeout 20m ./test/e2e/...

## conformance: Kubernetes' own e2e scheduling specs ([sig-scheduling], the CI subset: all but the specs in
## test/conformance/skip.txt and ci-skip.txt) on a fresh local cluster with kube-scheduler's stock default
## profile, then on one with hivesched as the default profile (HIVESCHED_PROFILE=stock, default; the same
## binary), side by side; fails if a spec passes on stock only. The e2e binary is built once from
## test/conformance's module into $(OUT)/conformance (hack/conformance.sh, docs/conformance.md); the table
## lands in $(OUT)/conformance/results.md. The two profiles' clusters run side by side (the second in
## _output/local-conformance-default at HIVESCHED_PORT_OFFSET+100; CONFORMANCE_PARALLEL=0: one after the
## other), the specs in the order of CONFORMANCE_SEED (else one from the clock; results.md names it), the
## suite waiting between specs for the previous one's pods. Honours HIVESCHED_PORT_OFFSET; brings the clusters down after.
## conformance-full: the same with every [sig-scheduling] spec but those of skip.txt
.PHONY: conformance conformance-full
conformance:
	bash hack/conformance.sh

conformance-full:
	CONFORMANCE_FULL=1 bash hack/conformance.sh

## e2e-gb200: the end-to-end tests of the GB200-shaped local cluster (issue 45, docs/nvlink.md): a second
## local cluster (HIVESCHED_CLUSTER=gb200, in $(OUT)/local-gb200, ports +200: two NVL72 NVLink domains of 18
## 4-GPU trays and three 8-GPU H100 nodes) brought up if it is not, TestGB200 run on it (about 2 minutes
## warm), then brought down; GB200_KEEP=1 leaves it up
GB200_ENV = HIVESCHED_CLUSTER=gb200 HIVESCHED_LOCAL_DIR=$(CURDIR)/$(OUT)/local-gb200 HIVESCHED_PORT_OFFSET=200
.PHONY: e2e-gb200 up-gb200 demo-gb200
e2e-gb200:
	$(GB200_ENV) bash hack/local-up.sh
	$(GB200_ENV) HIVESCHED_E2E_KUBECONFIG=$(CURDIR)/$(OUT)/local-gb200/kubeconfig \
		$(GO) test -count=1 -v -timeout 15m -run 'TestGB200' ./test/e2e/; st=$$?; \
	if [ "$(GB200_KEEP)" != 1 ]; then $(GB200_ENV) bash hack/local-down.sh; fi; exit $$st

## up-gb200: the GB200-shaped local cluster alone (as e2e-gb200 brings it up); make down-gb200 stops it
up-gb200:
	$(GB200_ENV) bash hack/local-up.sh
down-gb200:
	$(GB200_ENV) bash hack/local-down.sh $(DOWN_FLAGS)

## demo-gb200: the NVLink-domain demo on the GB200-shaped local cluster (hack/demo-gb200.sh): a tenant's
## 72-GPU job in one domain, another tenant's 1-GPU jobs filling the rest, the first tenant's next 72-GPU
## job getting a whole domain back by preempting only opportunistic pods
demo-gb200:
	$(GB200_ENV) bash hack/demo-gb200.sh $(DEMO_FLAGS)

## e2e-frameworks: the framework tests whose controllers are slow to build (issue 39; 3-5 min each the
## first time), on the local cluster (brought up if it is not): JobSet v0.12.0's controller
## (hack/local-jobset.sh), Kubeflow Trainer v2.3.0's (hack/local-trainer.sh), LeaderWorkerSet v0.8.0's
## (hack/local-lws.sh) and Kueue v0.17.0's (hack/local-kueue.sh), TestJobSet, TestTrainer, TestLeaderWorkerSet
## and TestKueue, then KubeRay v1.5.0's operator (hack/local-kuberay.sh, scheduler-plugins mode), TestKubeRay and
## TestKubeRayAutoscaling and TestKubeRayAutoscalingPromotion (elastic gangs: a worker group scaled as Ray's autoscaler does), with the
## hivesched profile renamed to scheduler-plugins-scheduler (the name KubeRay writes into every pod;
## HIVESCHED_SCHEDULER_NAME) while it runs, and named hivesched again after
.PHONY: e2e-frameworks
e2e-frameworks:
	bash hack/local-up.sh
	bash hack/local-jobset.sh
	bash hack/local-trainer.sh
	bash hack/local-lws.sh
	bash hack/local-kueue.sh
	HIVESCHED_E2E_KUBECONFIG=$(LOCAL_DIR)/kubeconfig HIVESCHED_E2E_FRAMEWORKS=1 \
		$(GO) test -count=1 -v -timeout 10m -run '^(TestJobSet|TestTrainer|TestLeaderWorkerSet|TestKueue)$$' ./test/e2e/
	bash hack/local-kuberay.sh --build
	HIVESCHED_SCHEDULER_NAME=scheduler-plugins-scheduler bash hack/local-up.sh; \
		bash hack/local-kuberay.sh && \
		HIVESCHED_E2E_KUBECONFIG=$(LOCAL_DIR)/kubeconfig HIVESCHED_E2E_FRAMEWORKS=1 \
		$(GO) test -count=1 -v -timeout 10m -run '^(TestKubeRay|TestKubeRayAutoscaling|TestKubeRayAutoscalingPromotion)$$' ./test/e2e/; st=$$?; \
		bash hack/local-up.sh; exit $$st

## kubeflow: build Kubeflow's training-operator v1.8.1 (a throwaway module in _output/kubeflow), install its
## CRDs and start it on the local cluster with --gang-scheduler-name=hivesched (make down stops it)
.PHONY: kubeflow
kubeflow:
	bash hack/local-kubeflow.sh

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
	HIVESCHED_CHAOS_KUBECONFIG=$(LOCAL_DIR)/kubeconfig CHAOS_KILLS=$(CHAOS_KILLS) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -count=1 -v -timeout 4h -run '^TestChaos$$' ./test/chaos/

## build: the scheduler binary, version stamped, hived-convert (HiveD's virtualClusters to VirtualClusters) and the kubectl plugin kubectl-hivesched into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hivesched-scheduler ./cmd/hivesched-scheduler
	$(GO) build -o $(BIN)/hived-convert ./cmd/hived-convert
	$(GO) build -o $(BIN)/kubectl-hivesched ./cmd/kubectl-hivesched
	$(GO) build -o $(BIN)/hivesched-sim ./cmd/hivesched-sim

## image: the scheduler's container image, built here without Docker or a base image (hack/image, a
## module of its own on go-containerregistry): a static binary (CGO_ENABLED=0, -trimpath, version stamped)
## per IMAGE_PLATFORMS on an empty base, run as 65532:65532, in one OCI image index; written as an OCI
## layout ($(IMAGE_OUT)/oci) and one docker-archive per platform ($(IMAGE_OUT)/hivesched-scheduler-<arch>.tar).
## Reproducible: every time in it is the commit's (SOURCE_DATE_EPOCH), so one commit gives one digest
## ($(IMAGE_OUT)/digest). image-reproducible builds it twice and compares the digests.
IMAGE_REPO      ?= ghcr.io/hivesched/hivesched-scheduler
IMAGE_TAG       ?= $(subst +,_,$(VERSION))
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_OUT       ?= $(OUT)/image
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# As LDFLAGS, but the build date is the commit's: the same commit, the same bytes.
IMAGE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
                 -X k8s.io/component-base/version.gitCommit=$(COMMIT) \
                 -X k8s.io/component-base/version.buildDate=$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
.PHONY: image image-binaries image-builder image-reproducible image-tag
## image-tag: the tag make image gives the image (for crane push / skopeo copy)
image-tag:
	@echo $(IMAGE_TAG)

image: image-binaries image-builder
	$(OUT)/bin/image-builder $(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(IMAGE_OUT)/bin/$(subst /,_,$(p))/hivesched-scheduler) \
		-layout $(IMAGE_OUT)/oci -archive-dir $(IMAGE_OUT) -repo $(IMAGE_REPO) -tag $(IMAGE_TAG) \
		-version $(VERSION) -revision $(COMMIT) -source-date-epoch $(SOURCE_DATE_EPOCH) -digest-file $(IMAGE_OUT)/digest

image-binaries:
	$(foreach p,$(IMAGE_PLATFORMS),CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(p))) GOARCH=$(word 2,$(subst /, ,$(p))) \
		$(GO) build -trimpath -buildvcs=false -ldflags "$(IMAGE_LDFLAGS)" \
		-o $(IMAGE_OUT)/bin/$(subst /,_,$(p))/hivesched-scheduler ./cmd/hivesched-scheduler &&) true

image-builder:
	cd hack/image && $(GO) build -trimpath -o $(CURDIR)/$(OUT)/bin/image-builder .

## image-push-test: push make image's OCI layout to crane's in-memory registry on a loopback port, as README
## says to push it, and validate what a client pulls (and the docker-archives); the pinned crane is built
## into $(OUT)/bin (seconds)
GGCR_VERSION ?= v0.22.1
CRANE := $(OUT)/bin/crane-$(GGCR_VERSION)
.PHONY: image-push-test crane
crane: $(CRANE)
$(CRANE):
	@mkdir -p $(OUT)/crane-gobin
	GOBIN=$(CURDIR)/$(OUT)/crane-gobin $(GO) install -trimpath github.com/google/go-containerregistry/cmd/crane@$(GGCR_VERSION)
	mv $(OUT)/crane-gobin/crane $@
image-push-test: $(CRANE)
	CRANE=$(CRANE) IMAGE_TAG=$(IMAGE_TAG) bash hack/image-push-test.sh

## image-reproducible: make image twice from scratch (binaries rebuilt) and require the same index digest
image-reproducible:
	$(MAKE) image
	cp $(IMAGE_OUT)/digest $(OUT)/image-digest.first
	rm -rf $(IMAGE_OUT)
	$(MAKE) image
	@echo "first:  $$(cat $(OUT)/image-digest.first)"; echo "second: $$(cat $(IMAGE_OUT)/digest)"
	cmp $(OUT)/image-digest.first $(IMAGE_OUT)/digest

## helm: the pinned Helm, built from the Go module proxy into $(OUT)/bin (about 5 minutes the first time),
## its default Kubernetes version stamped 1.37 (else helm template and lint assume 1.20)
HELM_VERSION ?= v3.22.0
HELM := $(OUT)/bin/helm-$(HELM_VERSION)
HELM_LDFLAGS := -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 \
                -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37
.PHONY: helm chart-test chart-test-server chart-generate
helm: $(HELM)
$(HELM):
	@mkdir -p $(OUT)/helm-gobin
	GOBIN=$(CURDIR)/$(OUT)/helm-gobin $(GO) install -trimpath -ldflags "$(HELM_LDFLAGS)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(OUT)/helm-gobin/helm $@

## chart-test: the Helm chart (manifests/charts/hivesched): the generated copies of manifests/ up to date,
## helm lint --strict and helm template of each ci/ values combination, and test/chart (the rendered
## scheduler configuration through the scheduler's own loader and validation; hack/chart-test.sh)
chart-test: $(HELM)
	$(GO) run ./hack/chartgen -check
	HELM=$(HELM) GO=$(GO) bash hack/chart-test.sh

## chart-test-server: chart-test, then each rendering applied with kubectl apply --dry-run=server to the
## local cluster (make up; HIVESCHED_PORT_OFFSET as for make up)
chart-test-server: $(HELM)
	$(GO) run ./hack/chartgen -check
	HELM=$(HELM) GO=$(GO) CHART_TEST_KUBECONFIG=$(CURDIR)/$(OUT)/local/kubeconfig KUBECTL=$(CURDIR)/$(OUT)/local/bin/kubectl \
		bash hack/chart-test.sh

## chart-install-test: on the local cluster (make up; make image first): helm install the chart, run the
## scheduler from the image's layer as its pod would (uid 65532, the chart's ConfigMap, a token of its
## ServiceAccount, no kubeconfig: under the chart's RBAC), probes, /metrics for the listed scraper, a gang,
## a Workload API PodGroup gang and a DRA claim bound (the VCs' usedLeafCells checked), a tenant's forged
## placement refused by the chart's policy, a helm upgrade of config and replicas while gangs are created
## with the scheduler rolled (chaos checks: no double booking, no partly bound gang), then helm uninstall
## keeps the CRDs, VCs and AffinityGroups; prints its time and the time to a leader
## (hack/chart-install-test.sh; needs root for unshare and setpriv). It leaves the local scheduler stopped.
.PHONY: chart-install-test
chart-install-test: $(HELM) image-builder
	HELM=$(HELM) IMAGE_BUILDER=$(OUT)/bin/image-builder IMAGE_TAG=$(IMAGE_TAG) bash hack/chart-install-test.sh

## chart-package: the chart as a .tgz in $(OUT)/chart-package whose appVersion, the default image tag, is
## make image's tag (IMAGE_TAG): with image.repository set to where you pushed it, it installs that image
.PHONY: chart-package
chart-package: $(HELM)
	$(HELM) package manifests/charts/hivesched --app-version $(IMAGE_TAG) -d $(OUT)/chart-package

## chart-generate: rewrite the chart's copies of the CRDs, RBAC, admission policies, inspect roles and
## sample VCs from manifests/ (hack/chartgen; make verify checks them)
chart-generate:
	$(GO) run ./hack/chartgen

## test: what CI runs: vet, unit tests (with 100k model operations), integration tests on a real API server
test: vet unit integration

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./apis/... ./cmd/... ./plugins/... ./test/fakedra/... ./test/manifests/... ./test/perf/... ./test/chaos/... ./test/localenv/...

# The suite's output (every API server's log included) is kept in
# $(OUT)/integration.txt; on a failure the failing tests' own lines are
# printed again at the end, where CI's tail shows them.
integration:
	@mkdir -p $(OUT)
	@{ $(GO) test -count=1 -timeout 20m ./test/integration/... 2>&1; echo $$? > $(OUT)/integration.rc; } | tee $(OUT)/integration.txt; \
	st=$$(cat $(OUT)/integration.rc); if [ "$$st" != 0 ]; then \
	  echo "=== integration failed (exit $$st); the failing tests' lines (full log: $(OUT)/integration.txt):"; \
	  grep -E -e '^\s*--- FAIL|^FAIL|^panic:|_test\.go:[0-9]+:|^\s+(Error Trace|Error|Messages|Test):|^\s+(expected|actual)' $(OUT)/integration.txt | grep -v -E '^[IWE][0-9]{4} ' | head -n 300; \
	fi; exit $$st

## browser-test: the dashboard in a real headless Chromium (CHROMIUM, default /usr/bin/chromium; Debian's
## package chromium) against a scheduler on a real API server, and at 10,000 nodes; screenshots in
## $(OUT)/dashboard (test/integration/dashboard_browser_test.go; about a minute)
CHROMIUM ?= /usr/bin/chromium
browser-test:
	@test -x "$(CHROMIUM)" || { echo "no Chromium at $(CHROMIUM): apt-get install -y chromium, or set CHROMIUM=..."; exit 2; }
	@mkdir -p $(OUT)
	@HIVESCHED_CHROMIUM=$(CHROMIUM) $(GO) test -count=1 -timeout 10m -run 'TestDashboardBrowser' -v ./test/integration/ > $(OUT)/browser-test.txt 2>&1; st=$$?; \
	grep -E '^(=== RUN|--- |PASS|FAIL|ok)|dashboard_browser_test.go|Error:|expected|actual' $(OUT)/browser-test.txt; echo "full log: $(OUT)/browser-test.txt"; exit $$st

## verify: generated code (and the chart's copies of manifests/) is up to date and Go files are formatted
verify:
	bash hack/verify-codegen.sh
	$(GO) run ./hack/chartgen -check
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

## sim-trace: the simulator on a trace in a published format (docs/simulator.md, "Public traces"):
##   make sim-trace TRACE=FILE FORMAT=csv|philly|helios|alibaba2020|openb [TASKS=pai_task_table.csv]
##     [VC_MAP=from=to,...] [SIM_CONFIG=scheduler-config.yaml] [SIM_VCS=virtualclusters.yaml] [SIM_FLAGS=...]
## report and plots in _output/sim-trace (SIM_OUT)
SIM_CONFIG ?= manifests/sim/scheduler-config.yaml
SIM_VCS ?= manifests/sim/virtualclusters.yaml
FORMAT ?= csv
sim-trace:
	@test -n "$(TRACE)" || { echo "usage: make sim-trace TRACE=FILE FORMAT=csv|philly|helios|alibaba2020|openb [TASKS=FILE] [VC_MAP=from=to,...] [SIM_CONFIG=...] [SIM_VCS=...]"; exit 2; }
	$(GO) run ./cmd/hivesched-sim -config $(SIM_CONFIG) -vcs $(SIM_VCS) -trace $(TRACE) -format $(FORMAT) \
		$(if $(TASKS),-task-table $(TASKS)) $(if $(VC_MAP),-vc-map $(VC_MAP)) $(SIM_FLAGS) -out $(or $(SIM_OUT),$(OUT)/sim-trace)

## sim-paper: the paper scenario (docs/simulator.md): Helios' Earth as published (143 nodes, 18 VCs), two
## weeks of jobs calibrated to its figures (calibrated, not real), without and with node failures
## (an assumed MTBF, SIM_MTBF_HOURS / SIM_REPAIR_HOURS); timed; reports in _output/sim-paper{,-failures}
SIM_MTBF_HOURS ?= 720
SIM_REPAIR_HOURS ?= 24
SIM_TIME := $(if $(wildcard /usr/bin/time),/usr/bin/time -f 'wall %e s; peak memory %M KiB')
sim-paper:
	$(GO) build -o $(OUT)/sim-paper-bin ./cmd/hivesched-sim
	$(SIM_TIME) $(OUT)/sim-paper-bin -config manifests/sim/paper/scheduler-config.yaml \
		-vcs manifests/sim/paper/virtualclusters.yaml -generate manifests/sim/paper/generator.yaml -out $(OUT)/sim-paper
	$(SIM_TIME) $(OUT)/sim-paper-bin -config manifests/sim/paper/scheduler-config.yaml \
		-vcs manifests/sim/paper/virtualclusters.yaml -generate manifests/sim/paper/generator.yaml \
		-mtbf-hours $(SIM_MTBF_HOURS) -repair-hours $(SIM_REPAIR_HOURS) -out $(OUT)/sim-paper-failures

## sim-philly: the Philly scenario (docs/simulator.md): 352 nodes and 11 VCs as the Helios authors modelled
## Microsoft's Philly, seven weeks of jobs calibrated to what is published of its trace (calibrated, not real),
## without and with node failures (the same assumed MTBF as sim-paper); timed; reports in _output/sim-philly{,-failures}
sim-philly:
	$(GO) build -o $(OUT)/sim-philly-bin ./cmd/hivesched-sim
	$(SIM_TIME) $(OUT)/sim-philly-bin -config manifests/sim/philly/scheduler-config.yaml \
		-vcs manifests/sim/philly/virtualclusters.yaml -generate manifests/sim/philly/generator.yaml -out $(OUT)/sim-philly
	$(SIM_TIME) $(OUT)/sim-philly-bin -config manifests/sim/philly/scheduler-config.yaml \
		-vcs manifests/sim/philly/virtualclusters.yaml -generate manifests/sim/philly/generator.yaml \
		-mtbf-hours $(SIM_MTBF_HOURS) -repair-hours $(SIM_REPAIR_HOURS) -out $(OUT)/sim-philly-failures

## sim-nvl72: the NVL72 scenario (docs/simulator.md): 6 GB200 NVL72 NVLink domains (18 nodes x 4 GPUs each)
## beside 4 H100 nodes, two weeks of a hand-chosen mix (synthetic, not real) under hivesched, the quota
## baselines and quota-one-clique (one clique if free); counts jobs that could not get one domain; timed;
## report in _output/sim-nvl72
sim-nvl72:
	$(GO) build -o $(OUT)/sim-nvl72-bin ./cmd/hivesched-sim
	$(SIM_TIME) $(OUT)/sim-nvl72-bin -config manifests/sim/nvl72/scheduler-config.yaml \
		-vcs manifests/sim/nvl72/virtualclusters.yaml -generate manifests/sim/nvl72/generator.yaml -out $(OUT)/sim-nvl72

## sim-speed: a month of ~100k jobs on 1,000 nodes, every policy, timed (hack/sim-speed.sh)
sim-speed:
	bash hack/sim-speed.sh

## bench-core: the cell core's placement, preemption and build benchmarks
bench-core:
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./plugins/cellcore/ | tee $(OUT)/bench-core.txt

## bench-core-compare: the cell core's benchmarks at commit BASE against the working tree's, the two test
## binaries run alternately ROUNDS times (6) on this machine and compared by benchstat (ratios with confidence
## intervals and p-values); BENCH, BENCHTIME narrow it (hack/bench-core-compare.sh; output in _output/bench-compare)
bench-core-compare:
	BASE=$(BASE) bash hack/bench-core-compare.sh

## perf-compare: scheduler_perf (test/perf) at commit BASE against the working tree, the two perf.test binaries
## run alternately ROUNDS times (5) on the workloads PERF_FILTER selects (Gangs8x1_500Nodes_HiveSched$), BENCH_NODES
## nodes, compared by benchstat (hack/perf-compare.sh; needs the local etcd: make bench or make up once)
.PHONY: perf-compare
perf-compare:
	BASE=$(BASE) bash hack/perf-compare.sh

## perf-contenders: contenders of one scheduler_perf workload side by side, from one perf.test of the working tree,
## run alternately ROUNDS times (3): CONTENDERS (HiveSched HiveSchedUngated), WORKLOAD (Gangs8x1), BENCH_NODES;
## per run throughput, latency p50, gang and claims checks; benchstat on throughput (hack/perf-contenders.sh)
.PHONY: perf-contenders
perf-contenders:
	bash hack/perf-contenders.sh

## core-decisions-compare: the randomized model test at commit BASE and in the working tree, each logging a
## digest of the core's state after every step: equal digests, the same decisions (MODEL_OPS, default 100000;
## hack/core-decisions-compare.sh)
core-decisions-compare:
	BASE=$(BASE) bash hack/core-decisions-compare.sh

## fuzz: the fuzz targets (config, group requests, recovery, every pod request form: native, HiveD, explicit AffinityGroup,
## scheduler-plugins PodGroup, Workload API; the placement decoder), FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzAffinityGroupRequest$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzRecoverAffinityGroup$$' -fuzztime $(FUZZTIME) ./plugins/cellcore/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodNative$$' -fuzztime $(FUZZTIME) ./plugins/podrequest/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodHived$$' -fuzztime $(FUZZTIME) ./plugins/podrequest/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodExplicit$$' -fuzztime $(FUZZTIME) ./plugins/podrequest/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodPodGroup$$' -fuzztime $(FUZZTIME) ./plugins/podrequest/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePodWorkload$$' -fuzztime $(FUZZTIME) ./plugins/podrequest/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodePlacement$$' -fuzztime $(FUZZTIME) ./plugins/placement/

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
