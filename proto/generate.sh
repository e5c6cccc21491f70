#!/bin/sh
# Regenerates proto/gen from the .proto files. Tool versions are pinned here
# so the output is the same on every machine; the tools are built into a
# throwaway directory, not installed globally.
set -eu

BUF_VERSION=v1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_CONNECT_GO_VERSION=v1.19.1

cd "$(dirname "$0")"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT

GOBIN="$bin" go install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}"
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
GOBIN="$bin" go install "connectrpc.com/connect/cmd/protoc-gen-connect-go@${PROTOC_GEN_CONNECT_GO_VERSION}"

rm -rf gen
PATH="$bin:$PATH" "$bin/buf" generate
