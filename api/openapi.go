package api

import (
	"bytes"
	_ "embed"
)

// openapiDoc is written by hand rather than generated, so that it can say
// what the Go types cannot (stream order, status per code, auth per
// listener); openapi_test.go keeps it in step with the routes and types.
//
//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the OpenAPI 3.1 document of the /v1 API, as served at
// GET /v1/openapi.json. Each call returns a fresh copy, so a caller that
// modifies it cannot change what later callers get.
func OpenAPI() []byte { return bytes.Clone(openapiDoc) }
