# Paddock's two set-up commands are `make run` and `make test`; both install
# what is missing (as root, from Debian's packages) before they start.
GO      ?= go
BIN     ?= bin/paddock
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/paddock-dev/paddock/internal/daemon.Version=$(VERSION)
export CGO_ENABLED = 0

.PHONY: all build run test unit unit-race test-cgroupv2 test-kubernetes deps generate vet bench bench-kubernetes soak clean

all: build

build:
	GO=$(GO) ./scripts/build.sh $(BIN) "$(LDFLAGS)"

deps:
	@./scripts/install-deps.sh

## run: install what is missing, build, and serve on the embedded defaults.
run: deps build
	./$(BIN) serve

## test: every test (unit, runtime suites on runc and runsc, end to end,
## Kubernetes) and a subset of test-cgroupv2 (about 7 minutes warm).
test:
	@PADDOCK_TEST_DEPS=1 ./scripts/install-deps.sh
	./scripts/test.sh

## unit: the unit tier alone: no root, no runtime, no installed package
## but Go (about a minute warm; DEVELOPING.md). unit-race: the same under
## the race detector (needs gcc), as `make test` runs it.
unit:
	./scripts/unit.sh

unit-race:
	./scripts/unit.sh --race

## test-cgroupv2: the runtime suite, an end-to-end subset and the systemd
## unit inside a Debian VM with only cgroup v2 (QEMU, no KVM needed); the VM
## image is built once into /var/cache/paddock-test/cgroupv2. `make test`
## runs a subset of it (scripts/test.sh); this target runs all of it.
test-cgroupv2:
	@PADDOCK_CGROUPV2_DEPS=1 ./scripts/install-deps.sh
	PADDOCK_RUNSC=$${PADDOCK_RUNSC:-/var/cache/paddock-test/bin/runsc-$$(cat internal/config/runsc.version)-precompiled} \
		$(GO) test -tags cgroupv2vm -count=1 -v -timeout 90m -run '^TestCgroupV2$$' ./test/cgroupv2/

## test-kubernetes: the Kubernetes suite alone, on a one-node cluster it
## builds (or reuses from /var/cache/paddock-test/k8s), starts and tears down.
test-kubernetes:
	@PADDOCK_K8S_DEPS=1 PADDOCK_NO_RUNSC=1 ./scripts/install-deps.sh
	cd test/kubernetes && PADDOCK_K8S_BIN=$$(./build.sh) && \
		PADDOCK_K8S_BIN=$$PADDOCK_K8S_BIN $(GO) test -count=1 -v -timeout 30m ./...

generate:
	./proto/generate.sh

vet:
	$(GO) vet ./...

bench: build
	PADDOCK_BENCH_DEPS=1 ./scripts/install-deps.sh
	./bench/run.sh

## bench-kubernetes: the kubernetes backend against a plain pod and the
## local runc backend, same run, on the test cluster; the figures go to
## bench/results/.
bench-kubernetes:
	@PADDOCK_K8S_DEPS=1 PADDOCK_NO_RUNSC=1 ./scripts/install-deps.sh
	mkdir -p bench/results
	cd test/kubernetes && PADDOCK_K8S_BIN=$$(./build.sh) && \
		PADDOCK_K8S_BIN=$$PADDOCK_K8S_BIN PADDOCK_K8S_BENCH_N=$${PADDOCK_K8S_BENCH_N:-10} \
		PADDOCK_K8S_BENCH_POOL=$${PADDOCK_K8S_BENCH_POOL:-20} PADDOCK_K8S_BENCH_CLAIMS=$${PADDOCK_K8S_BENCH_CLAIMS:-100} \
		PADDOCK_K8S_BENCH_OUT=$(CURDIR)/bench/results/$$(date +%F)-kubernetes-backend-vs-plain-pod$${PADDOCK_KUBE_QPS:+-qps$$PADDOCK_KUBE_QPS}.md \
		$(GO) test -count=1 -v -timeout 30m -run 'TestKubernetesBench$$' .

## soak: 100 sandboxes, 10,000 commands and 100 daemon kill -9s, with every
## check after each; the figures go to bench/results/.
soak:
	@PADDOCK_TEST_DEPS=1 ./scripts/install-deps.sh
	mkdir -p bench/results
	PADDOCK_SOAK=100,10000,100 PADDOCK_SOAK_OUT=$(CURDIR)/bench/results/$$(date +%F)-soak.txt \
		PADDOCK_TEST_IMAGE_CACHE=$${PADDOCK_TEST_IMAGE_CACHE:-/var/cache/paddock-test/images} \
		$(GO) test -count=1 -v -timeout 90m -run 'TestSoak$$' ./test/adversarial/

clean:
	rm -rf bin .test-output internal/agentbin/paddock-agent.gz internal/kubebin/paddock-kubernetes.gz
