//go:build embedagent

package agentbin

import _ "embed"

//go:embed paddock-agent.gz
var compressed []byte
