#!/usr/bin/env bash
# Runs every test of the project: formatting and vet, unit tests (with the
# race detector, scripts/unit.sh), the shared runtime suite on runc and
# runsc, end-to-end tests that drive the real CLI against a real daemon, the
# Kubernetes suite on a one-node cluster, and a subset of the cgroup v2 VM
# suite. Tests that need root or a runtime skip with a
# reason when those are absent; the summary lists every skip.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${PADDOCK_TEST_OUT:-.test-output}
mkdir -p "$out"
# One image cache for every test package, so Debian's base image is built
# once per machine rather than once per package.
export PADDOCK_TEST_IMAGE_CACHE=${PADDOCK_TEST_IMAGE_CACHE:-/var/cache/paddock-test/images}
export CGO_ENABLED=0
# The S3-compatible server the backup tests run against, built by
# scripts/install-deps.sh (PADDOCK_TEST_DEPS=1).
export PADDOCK_TEST_S3_SERVER=${PADDOCK_TEST_S3_SERVER:-/var/cache/paddock-test/bin/weed}
# The pinned runsc, built by scripts/install-deps.sh (PADDOCK_TEST_DEPS=1):
# every test daemon and the runtime suite run it (Debian's runsc keeps its
# own run of the runtime suite, internal/runtime/oci).
export PADDOCK_RUNSC=${PADDOCK_RUNSC:-/var/cache/paddock-test/bin/runsc-$(cat internal/config/runsc.version)-precompiled}

fail=0
# The suite must leave the host's account files as it found them: a test
# that wrote through a path it does not own shows here. A host without
# them is broken before any test runs (the kubelet of the Kubernetes suite
# and user lookups need them): say so first.
host_files="/etc/passwd /etc/group /etc/shadow"
for f in $host_files; do
	if [ ! -f "$f" ]; then
		echo "this host has no $f (every Debian system has one; restore it, e.g. from $f-): the tests need it"; fail=1
	fi
done
host_sums=$(sha256sum $host_files 2>&1)
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '/gen/' || true)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; fail=1
fi
if ! go vet ./...; then
	fail=1
fi
# staticcheck at the version scripts/install-deps.sh builds (PADDOCK_TEST_DEPS=1).
staticcheck=${PADDOCK_TEST_STATICCHECK:-/var/cache/paddock-test/bin/staticcheck-v0.8.2}
if [ ! -x "$staticcheck" ]; then
	echo "staticcheck is missing at $staticcheck: run PADDOCK_TEST_DEPS=1 scripts/install-deps.sh"; fail=1
elif ! "$staticcheck" ./...; then
	fail=1
fi

# The Kubernetes suite's binaries are built (once, then cached by version)
# while the other tiers run: build.sh compiles at a low priority, so on a
# machine without the cache the build overlaps the tests instead of adding
# its half hour after them; with the cache it returns at once.
(cd test/kubernetes && ./build.sh) >"$out/k8s-build.dir" 2>"$out/k8s-build.log" &
k8s_build=$!

log="$out/go-test.log"
echo "running go test (full log: $log)"
# The unit tier runs under the race detector (scripts/unit.sh), after the
# other packages, and only there: its
# packages are left out of the plain run.
unit=$(./scripts/unit.sh --list)
rest=$(go list ./... | grep -vxF "$unit")
# shellcheck disable=SC2086 # one argument per package
go test -count=1 -v -timeout 45m $rest >"$log" 2>&1
rc=$?
# After the plain run, not beside it: the end-to-end tests measure time on
# a loaded machine, and the race tier would load it more.
echo "running the unit tier with the race detector (log: $out/go-test-race.log)"
./scripts/unit.sh --race -v >"$out/go-test-race.log" 2>&1
race_rc=$?
cat "$out/go-test-race.log" >>"$log"
if [ "$race_rc" -ne 0 ] && [ "$rc" -eq 0 ]; then
	rc=$race_rc
fi
# The Kubernetes suite is a module of its own (test/kubernetes): it builds
# or reuses the test cluster's binaries (cached under
# /var/cache/paddock-test/k8s, keyed by version), starts a one-node cluster,
# and tears it down.
echo "running the Kubernetes suite (test/kubernetes; log: $log)"
if wait "$k8s_build" && k8sbin=$(cat "$out/k8s-build.dir") && [ -n "$k8sbin" ]; then
	(cd test/kubernetes && go vet ./... && PADDOCK_K8S_BIN=$k8sbin go test -count=1 -v -timeout 30m ./...) >>"$log" 2>&1
	krc=$?
else
	echo "test/kubernetes/build.sh failed:" | tee -a "$log"
	tail -20 "$out/k8s-build.log" | tee -a "$log"
	krc=1
fi
[ "$krc" -eq 0 ] || rc=$krc
# A subset of the cgroup v2 VM suite (test/cgroupv2, docs/cgroupv2.md): a
# Debian VM under QEMU with only cgroup2 and systemd as PID 1, its image
# built once into /var/cache/paddock-test/cgroupv2. Inside: limits read back
# from memory.max, memory.swap.max, pids.max and cpu.max on runc and crun,
# freezing through cgroup.freeze, the crun probe and the shared runtime
# suite on crun, `paddock info` and pause and resume through a daemon, the
# systemd unit (install, restart and stop keeping a sandbox), an OOM kill
# counted in the sandbox's own cgroup, pause and user namespaces through a
# daemon whose default runtime is crun, user namespaces (runc and crun),
# test/adversarial's escape probes, OOM deaths and fork bomb, and gVisor
# (the pinned runsc): its limits on the host and a killed sentry reported.
# About 6 minutes warm;
# `make test-cgroupv2` runs the whole suite.
echo "running the cgroup v2 VM subset (test/cgroupv2; log: $log)"
PADDOCK_CGROUPV2_SUITES="oci e2e e2e-crun unit adversarial" \
	PADDOCK_CGROUPV2_OCI_RUN='^(TestHostCgroupLimits|TestFastFreeze|TestProbe)$/^(runc|crun)$|^TestSuite$/^crun$|^TestHostCgroupLimits$/^runsc$' \
	PADDOCK_CGROUPV2_E2E_RUN='^(TestInfoRuntimesSizesLimits|TestPauseResume|TestUserNamespaces)$' \
	PADDOCK_CGROUPV2_E2E_CRUN_RUN='^(TestPauseResume|TestUserNamespaces)$' \
	PADDOCK_CGROUPV2_RUNTIMES=runc,crun,runsc \
	PADDOCK_CGROUPV2_VM_TIMEOUT=20m \
	go test -tags cgroupv2vm -count=1 -v -timeout 45m -run '^TestCgroupV2$' ./test/cgroupv2/ >>"$log" 2>&1
vrc=$?
[ "$vrc" -eq 0 ] || rc=$vrc
# The same VM booted with a bare init instead of systemd (no unit, nothing
# loaded on demand): limits read back on runc and crun, pause and resume,
# user namespaces with egress networking. About 2 minutes.
echo "running the cgroup v2 VM with a bare init (test/cgroupv2; log: $log)"
PADDOCK_CGROUPV2_INIT=bare PADDOCK_CGROUPV2_SUITES="oci e2e" \
	PADDOCK_CGROUPV2_OCI_RUN='^TestHostCgroupLimits$/^(runc|crun)$' \
	PADDOCK_CGROUPV2_E2E_RUN='^(TestPauseResume|TestUserNamespaces)$' \
	PADDOCK_CGROUPV2_RUNTIMES=runc,crun \
	PADDOCK_CGROUPV2_VM_TIMEOUT=15m \
	go test -tags cgroupv2vm -count=1 -v -timeout 30m -run '^TestCgroupV2$' ./test/cgroupv2/ >>"$log" 2>&1
vrc=$?
[ "$vrc" -eq 0 ] || rc=$vrc
grep -E '^(ok|FAIL|---|panic:)|^\s+--- (FAIL|SKIP)' "$log" | grep -v -- '--- PASS' || true
if [ "$(sha256sum $host_files 2>&1)" != "$host_sums" ]; then
	echo "the tests changed the host's account files ($host_files): before, then after:"
	echo "$host_sums"; sha256sum $host_files 2>&1
	fail=1
fi

passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ "$failed" -gt 0 ]; then
	# What each failing test said (its t.Error and t.Fatal lines) first,
	# then the start of what else it printed (daemon logs), a bounded
	# amount per test so one long log does not hide the others.
	echo
	echo "output of the failing tests:"
	awk '
		FNR == NR { if (match($0, /^ *--- FAIL: [^ ]+/)) { n = $0; sub(/^ *--- FAIL: /, "", n); sub(/ .*/, "", n); bad[n] = 1 } next }
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^ *--- (PASS|FAIL|SKIP)/ { next }
		(cur in bad) && /^ +[A-Za-z0-9_]+\.go:[0-9]+: / && !/daemon log:$/ && said[cur] < 20 { print cur ": " $0; said[cur]++ }
	' "$log" "$log" || true
	echo
	echo "more of what the failing tests printed (at most 60 lines each):"
	awk '
		FNR == NR { if (match($0, /^ *--- FAIL: [^ ]+/)) { n = $0; sub(/^ *--- FAIL: /, "", n); sub(/ .*/, "", n); bad[n] = 1 } next }
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^ *--- (PASS|FAIL|SKIP)/ { next }
		(cur in bad) && printed[cur] < 60 && total < 1200 { print cur ": " $0; printed[cur]++; total++ }
	' "$log" "$log" || true
	echo
	echo "errors and warnings logged in what the failing tests printed (at most 30 each):"
	awk '
		FNR == NR { if (match($0, /^ *--- FAIL: [^ ]+/)) { n = $0; sub(/^ *--- FAIL: /, "", n); sub(/ .*/, "", n); bad[n] = 1 } next }
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		(cur in bad) && /level=(WARN|ERROR)|panic:/ && said[cur] < 30 { print cur ": " $0; said[cur]++ }
	' "$log" "$log" || true
fi
if [ "$skipped" -gt 0 ]; then
	echo
	echo "skipped tests and their reasons:"
	grep -E -A1 '^\s*--- SKIP' "$log" | grep -v '^--$' || true
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "go test exited $rc without a failing test (build error or panic): see $log"
	grep -E -B2 -A20 '^(panic:|FAIL\s|# )' "$log" | head -80 || true
	failed=1
fi
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
if [ "$rc" -ne 0 ] || [ "$fail" -ne 0 ]; then
	exit 1
fi
