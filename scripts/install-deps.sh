#!/usr/bin/env bash
# Installs what Paddock needs on a Debian machine, only when it is missing.
# Runtime: runc, runsc (gVisor), crun, mmdebstrap (the base image), busybox-static
# (the busybox image), e2fsprogs (size-capped writable layers), iproute2,
# nftables and iptables (egress networking's firewall; either works, tests use both).
# The tests also need what they compare against or drive (PADDOCK_TEST_DEPS=1,
# set by `make test`): podman (the benchmark baseline), node and npm (the E2B
# and MCP client suites), python3 (code contexts' drivers, unit-tested on the
# host), gcc (the race detector of the unit tier needs cgo; the binaries
# Paddock ships stay static, built with CGO_ENABLED=0), chromium (the web
# console's tests and its benchmark drive it headless). Benchmarks add hyperfine
# (PADDOCK_BENCH_DEPS=1). The Kubernetes test cluster adds containerd (its
# own instance, started by the tests) and the CNI plugins (PADDOCK_K8S_DEPS=1,
# set by `make test-kubernetes`; `make test` installs them too). The cgroup v2
# suite boots a Debian VM under QEMU (software emulation, no KVM needed) and
# builds its disk with qemu-img and mmdebstrap (PADDOCK_CGROUPV2_DEPS=1, set by
# `make test-cgroupv2`; `make test` runs a subset of it and installs them too).
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have runc || need+=(runc)
have runsc || need+=(runsc)
# crun: probed at daemon start; test/e2e checks its verdict on this host's cgroup layout.
have crun || need+=(crun)
have mmdebstrap || need+=(mmdebstrap)
# busybox-static, not the dynamic busybox: its binary must run in an empty rootfs.
if ! { [ -x /bin/busybox ] && { LC_ALL=C ldd /bin/busybox 2>&1 || true; } | grep -q 'not a dynamic executable'; }; then
	need+=(busybox-static)
fi
have mkfs.ext4 || need+=(e2fsprogs)
have ip || need+=(iproute2)
have losetup || need+=(mount)
have nft || need+=(nftables)
have iptables || need+=(iptables)
if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ] || [ "${PADDOCK_BENCH_DEPS:-0}" = 1 ]; then
	have podman || need+=(podman)
	have python3 || need+=(python3)
	{ have node && have npm; } || need+=(nodejs npm)
fi
if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
	have gcc || need+=(gcc)
fi
if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ] || [ "${PADDOCK_BENCH_DEPS:-0}" = 1 ]; then
	have chromium || need+=(chromium)
fi
if [ "${PADDOCK_BENCH_DEPS:-0}" = 1 ]; then
	have hyperfine || need+=(hyperfine)
fi
# `make test` runs the Kubernetes suite too.
if [ "${PADDOCK_K8S_DEPS:-0}" = 1 ] || [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
	{ have containerd && have ctr && have containerd-shim-runc-v2; } || need+=(containerd)
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
fi
# `make test` runs a subset of the cgroup v2 VM suite too.
if [ "${PADDOCK_CGROUPV2_DEPS:-0}" = 1 ] || [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
	have qemu-system-x86_64 || need+=(qemu-system-x86)
	have qemu-img || need+=(qemu-utils)
fi
# The S3-compatible server that S3 backup storage is tested against
# (SeaweedFS, Apache-2.0), built once into a cache and never part of go.mod.
# `go install mod@version` refuses it (its go.mod has replace directives), so
# it is built inside its downloaded module.
if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
	s3bin=${PADDOCK_TEST_S3_SERVER:-/var/cache/paddock-test/bin/weed}
	if [ ! -x "$s3bin" ]; then
		s3mod=github.com/seaweedfs/seaweedfs@v0.0.0-20261109003541-7506e5f91cd6
		echo "building the S3 test server ($s3mod) into $s3bin (a few minutes, once)" >&2
		mkdir -p "$(dirname "$s3bin")"
		s3dir=$(cd "$(mktemp -d)" && go mod download -json "$s3mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		(cd "$s3dir" && CGO_ENABLED=0 go build -o "$s3bin.tmp" ./weed)
		mv "$s3bin.tmp" "$s3bin"
	fi
	# staticcheck, the linter `make test` runs beside go vet, at a pinned
	# version, into the same cache (its name carries the version).
	scbin=${PADDOCK_TEST_STATICCHECK:-/var/cache/paddock-test/bin/staticcheck-v0.8.2}
	if [ ! -x "$scbin" ]; then
		echo "building staticcheck into $scbin (once)" >&2
		scdir=$(mktemp -d)
		GOBIN=$scdir go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
		mkdir -p "$(dirname "$scbin")"
		mv "$scdir/staticcheck" "$scbin"
		rmdir "$scdir"
	fi
fi
# runsc_from_source builds runsc at module version $2 into $1/runsc: from a
# copy of the module whose seccomp programs scripts/runsc/precompile.go
# wrote in first, as gVisor's own build does (a plain `go install` of the
# module has none, and every sandbox then builds its own at start).
runsc_from_source() {
	local out=$1 version=$2 src work
	src=$(GOFLAGS=-mod=mod go mod download -json "gvisor.dev/gvisor@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ ! -d "$src" ]; then
		echo "cannot download gvisor.dev/gvisor@$version" >&2
		return 1
	fi
	work=$out/work
	mkdir -p "$work/precompile"
	cp -r "$src" "$work/gvisor"
	chmod -R u+w "$work/gvisor"
	sed '/^\/\/go:build ignore$/d' "$(dirname "$0")/runsc/precompile.go" >"$work/precompile/main.go"
	# A go line of this toolchain: without one, `go mod tidy` reads the
	# whole module graph of gVisor's dependencies, their tests' included.
	printf 'module paddock.local/runsc-build\n\ngo %s\n\nrequire gvisor.dev/gvisor %s\n\nreplace gvisor.dev/gvisor => ./gvisor\n' \
		"$(go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/')" "$version" >"$work/go.mod"
	(
		cd "$work"
		export GOFLAGS=-mod=mod CGO_ENABLED=0
		go mod tidy &&
			go run ./precompile gvisor/runsc/boot/filter/filter_precompiled.go gvisor/runsc/fsgofer/filter/filter_precompiled.go &&
			go build -trimpath -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$version" -o "$out/runsc" gvisor.dev/gvisor/runsc
	)
}
# gVisor's runsc at the version Paddock pins (internal/config/runsc.version),
# built once from the Go module proxy into a path whose name carries the
# version: /var/cache/paddock/bin for `make run` (the daemon's default),
# the test cache for `make test` (scripts/test.sh points $PADDOCK_RUNSC
# there). Debian's runsc above stays installed: the daemon falls back to it
# while the pinned build is missing, and `PADDOCK_RUNSC=runsc` selects it.
build_runsc() {
	local version dir bin tmp lock pid started n
	version=$(cat "$(dirname "$0")/../internal/config/runsc.version")
	dir=/var/cache/paddock/bin
	if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
		dir=/var/cache/paddock-test/bin
	fi
	dir=${PADDOCK_RUNSC_DIR:-$dir}
	# The name says how it was built (its seccomp programs precompiled),
	# so a build made before that is not taken for it.
	bin=$dir/runsc-$version-precompiled
	[ -x "$bin" ] && return 0
	if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
		echo "cannot build the pinned runsc into $dir (run as root); gVisor will use runsc from PATH" >&2
		return 0
	fi
	# One build per machine: a second run waits for the first, then finds
	# the binary. It is renamed into place only when complete.
	lock=$dir/.runsc.lock
	exec 9>"$lock"
	if ! flock -n 9; then
		echo "waiting for another build of runsc $version into $bin" >&2
		flock 9
	fi
	if [ ! -x "$bin" ]; then
		echo "building gVisor's runsc $version into $bin (about 5 minutes on 2 cores, once)" >&2
		tmp=$(mktemp -d "$dir/.runsc-build.XXXXXX")
		started=$(date +%s)
		runsc_from_source "$tmp" "$version" &
		pid=$!
		n=0
		while kill -0 "$pid" 2>/dev/null; do
			sleep 1
			n=$((n + 1))
			if [ $((n % 30)) = 0 ]; then
				echo "  still building runsc (${n}s)" >&2
			fi
		done
		if ! wait "$pid"; then
			rm -rf "$tmp"
			exec 9>&-
			if [ "${PADDOCK_TEST_DEPS:-0}" = 1 ]; then
				echo "building runsc $version failed" >&2
				exit 1
			fi
			echo "building runsc $version failed; gVisor will use runsc from PATH" >&2
			return 0
		fi
		mv "$tmp/runsc" "$bin"
		rm -rf "$tmp"
		echo "built runsc $version in $(($(date +%s) - started))s" >&2
	fi
	exec 9>&-
}
# The Kubernetes suite alone (`make test-kubernetes`) runs no local gVisor
# sandbox, so it does not wait for this build.
if [ "${PADDOCK_NO_RUNSC:-0}" != 1 ]; then
	build_runsc
fi
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "paddock needs these Debian packages: ${need[*]}" >&2
	echo "install them as root: apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
