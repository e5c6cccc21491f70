#!/usr/bin/env bash
# Runs the unit tier: the tests of every package that needs neither root
# nor an installed package (no runc, runsc, mkfs, nft, S3 server, podman).
# The controller's and the server's lifecycle tests run the real agent as
# plain child processes (internal/runtime/processbackend).
#   scripts/unit.sh [--race] [go test flags...]
#   scripts/unit.sh --list
# Without --race it needs Go alone and takes about a minute on two cores
# with a warm build cache. --race runs it under the race detector (about
# three minutes; it needs cgo and a C compiler), as `make test` does; the
# binaries Paddock ships stay static (CGO_ENABLED=0, scripts/build.sh).
# Other arguments go to go test (e.g. -run X, -v). --list prints the
# tier's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
# The packages of the other tiers (DEVELOPING.md, "Test tiers"): they need
# root, runtimes or tools, or drive a real daemon. A new package is in the
# unit tier unless it is listed here.
host='^github.com/paddock-dev/paddock/(test/|bench(/|$)|internal/(runtime/oci|image|snapshot|agent|agent/client|egress|netns|objstore)$)'
pkgs=$(go list ./... | grep -Ev "$host")
if [ "${1:-}" = --list ]; then
	echo "$pkgs"
	exit 0
fi
if [ "${1:-}" = --race ]; then
	shift
	if ! command -v "${CC:-gcc}" >/dev/null; then
		echo "the race detector needs a C compiler: apt-get install gcc" >&2
		exit 1
	fi
	# shellcheck disable=SC2086 # one argument per package
	CGO_ENABLED=1 exec go test -race -count=1 -timeout 15m "$@" $pkgs
fi
# shellcheck disable=SC2086 # one argument per package
CGO_ENABLED=0 exec go test -count=1 -timeout 15m "$@" $pkgs
