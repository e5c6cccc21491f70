//go:build !embedagent

package agentbin

var compressed []byte
