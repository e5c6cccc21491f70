#!/bin/sh
# Builds and runs paddock-bench against bin/paddock (built by `make build`).
# Extra arguments go to paddock-bench, e.g. ./bench/run.sh -n 10 -items do,exec
# Set PADDOCK_IMAGES_DIR to share an image store between runs, so the base
# image is built only once.
set -eu
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/run.sh: must run as root (it starts containers); try: sudo make bench" >&2
	exit 1
fi
if [ ! -x bin/paddock ]; then
	echo "bench/run.sh: bin/paddock is missing; run make build first" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
CGO_ENABLED=0 go build -o "$tmp/paddock-bench" ./bench/cmd/paddock-bench
"$tmp/paddock-bench" -paddock bin/paddock -out bench/results -repo . "$@"
