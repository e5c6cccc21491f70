#!/usr/bin/env bash
# Builds Paddock's one binary: first the small in-sandbox agent
# (cmd/paddock-agent), which is compressed into internal/agentbin, then
# the console's npm packages (internal/console/fetch), then the daemon with
# the Kubernetes backend (cmd/paddock-kubernetes, with that agent
# embedded), which is compressed into internal/kubebin, then cmd/paddock
# with both embedded (build tags embedagent and embedkube).
#   scripts/build.sh OUT [LDFLAGS]
# Tests call it too, so what they run is what `make build` makes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build.sh OUT [LDFLAGS]}
ldflags=${2:-"-s -w"}
export CGO_ENABLED=0
go=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
# The agent gets no version stamp, so its bytes (and the sealed copy's
# name) change only when its code does.
"$go" build -trimpath -ldflags "-s -w" -o "$tmp/paddock-agent" ./cmd/paddock-agent
gzip -n -9 -c "$tmp/paddock-agent" >"$tmp/paddock-agent.gz"
# Concurrent builds (test packages in parallel) each replace the file whole.
mv -f "$tmp/paddock-agent.gz" internal/agentbin/paddock-agent.gz.$$
mv -f internal/agentbin/paddock-agent.gz.$$ internal/agentbin/paddock-agent.gz
# The console's npm packages (xterm.js), pinned and checked by integrity;
# without them the console works but has no terminal, so say so and go on.
if ! "$go" run ./internal/console/fetch; then
	echo "build.sh: the console's terminal (xterm.js) could not be fetched from the npm registry; this build's console has no terminal" >&2
fi
case $out in /*) ;; *) out="$OLDPWD/$out" ;; esac
"$go" build -tags embedagent -trimpath -ldflags "$ldflags" -o "$tmp/paddock-kubernetes" ./cmd/paddock-kubernetes
gzip -n -c "$tmp/paddock-kubernetes" >"$tmp/paddock-kubernetes.gz"
mv -f "$tmp/paddock-kubernetes.gz" internal/kubebin/paddock-kubernetes.gz.$$
mv -f internal/kubebin/paddock-kubernetes.gz.$$ internal/kubebin/paddock-kubernetes.gz
"$go" build -tags embedagent,embedkube -trimpath -ldflags "$ldflags" -o "$out" ./cmd/paddock
