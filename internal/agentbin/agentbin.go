// Package agentbin holds the small agent binary (cmd/paddock-agent) that
// release builds embed, gzip-compressed, so that Paddock stays one file
// while each sandbox's PID 1 is a program that links only the agent.
//
// scripts/build.sh (behind `make build`) builds cmd/paddock-agent, writes
// it here as paddock-agent.gz and builds cmd/paddock with the build tag
// embedagent. A build without the tag embeds nothing, and the daemon then
// gives sandboxes its own executable, whose `paddock agent` is the same
// agent with more memory per sandbox.
package agentbin

import (
	"bytes"
	"compress/gzip"
	"io"
)

// Open returns the embedded agent binary, or false when this build has none.
func Open() (io.Reader, bool, error) {
	if len(compressed) == 0 {
		return nil, false, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, false, err
	}
	return zr, true, nil
}
