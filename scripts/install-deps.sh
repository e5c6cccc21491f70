#!/usr/bin/env bash
# Installs what Paddock needs on a Debian machine, only when it is missing.
# Runtime: runc, runsc (gVisor), crun, mmdebstrap (the base image), busybox-static
# (the busybox image), e2fsprogs (size-capped writable layers), iproute2,
# nftables and iptables (egress networking's firewall; either works, tests use both).
# The tests also need what they compare against or drive (PADDOCK_TEST_DEPS=1,
# set by `make test`): podman (the benchmark baseline), node and npm (the E2B
# and MCP client suites), python3 (code contexts' drivers, unit-tested on the
# host). Benchmarks add hyperfine
# (PADDOCK_BENCH_DEPS=1). The Kubernetes test cluster adds containerd (its
# own instance, started by the tests) and the CNI plugins (PADDOCK_K8S_DEPS=1,
# set by `make test-kubernetes`). The cgroup v2 suite boots a Debian VM under
# QEMU (software emulation, no KVM needed) and builds its disk with qemu-img and
# mmdebstrap (PADDOCK_CGROUPV2_DEPS=1, set by `make test-cgroupv2`).
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
if [ "${PADDOCK_BENCH_DEPS:-0}" = 1 ]; then
	have hyperfine || need+=(hyperfine)
fi
if [ "${PADDOCK_K8S_DEPS:-0}" = 1 ]; then
	{ have containerd && have ctr && have containerd-shim-runc-v2; } || need+=(containerd)
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
fi
if [ "${PADDOCK_CGROUPV2_DEPS:-0}" = 1 ]; then
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
