#!/bin/sh
# Builds, or reuses, the binaries of the one-node test cluster and prints the
# directory that holds them.
#
# The binaries come from the Go modules pinned in this directory's go.mod
# (k8s.io/kubernetes, go.etcd.io/etcd, sigs.k8s.io/agent-sandbox), built
# static. They are cached under $PADDOCK_K8S_CACHE/<kubernetes version>
# (default /var/cache/paddock-test/k8s): a complete directory is reused as
# is; an absent one is built in a temporary directory beside it and renamed
# into place only when every binary is there, so a build cut short never
# leaves a directory that looks complete. A lock keeps two runs from building
# the same version at once (the second waits, then reuses).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--p=2}"

version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
case "$version" in
v[0-9]*.[0-9]*.[0-9]*) ;;
*) echo "build.sh: unexpected k8s.io/kubernetes version '$version'" >&2; exit 1 ;;
esac
cache="${PADDOCK_K8S_CACHE:-/var/cache/paddock-test/k8s}"
dest="$cache/$version"

if [ -f "$dest/.complete" ]; then
	echo "$dest"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.build-$version.lock"
flock 9
if [ -f "$dest/.complete" ]; then
	echo "$dest"
	exit 0
fi

tmp=$(mktemp -d "$cache/.build-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/crds"

major=$(echo "$version" | sed 's/^v\([0-9]*\)\..*/\1/')
minor=$(echo "$version" | sed 's/^v[0-9]*\.\([0-9]*\)\..*/\1/')
vpkg=k8s.io/component-base/version
kflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"

# build OUT FLAGS PKG...: one `go build` for several commands shares the
# compiling of the packages they have in common (most of Kubernetes).
build() {
	out=$1 flags=$2
	shift 2
	start=$(date +%s)
	echo "build.sh: building $*" >&2
	nice -n 15 go build -trimpath -ldflags="$flags" -o "$out" "$@"
	echo "build.sh: built $* in $(($(date +%s) - start))s" >&2
}

# The kubelet first: it is the part that must accept this host (cgroup v1,
# Debian's containerd), so it fails fastest when the version cannot run here.
build "$tmp/bin/kubelet" "$kflags" k8s.io/kubernetes/cmd/kubelet
build "$tmp/bin/" "$kflags" k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
build "$tmp/bin/etcd" "-s -w" go.etcd.io/etcd/server/v3
build "$tmp/bin/agent-sandbox-controller" "-s -w" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
for b in kubelet kube-apiserver kube-controller-manager kube-scheduler etcd agent-sandbox-controller; do
	test -x "$tmp/bin/$b" || { echo "build.sh: $b was not built" >&2; exit 1; }
	echo "build.sh: $b $(du -h "$tmp/bin/$b" | cut -f1)" >&2
done

# agent-sandbox's CRDs are taken from the module cache at build time rather
# than committed here, so they always match the controller built above.
asdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
cp "$asdir"/k8s/crds/*.yaml "$tmp/crds/"
chmod 0644 "$tmp"/crds/*.yaml
chmod 0755 "$tmp/bin"/* "$tmp/bin" "$tmp/crds" "$tmp"

go list -m -f '{{.Path}} {{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3 sigs.k8s.io/agent-sandbox >"$tmp/VERSIONS"
date -u +%Y-%m-%dT%H:%M:%SZ >"$tmp/.complete"

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
