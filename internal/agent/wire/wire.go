// Package wire is the agent's contract with everything that starts it or
// talks to it: the variables it reads, the header and routes it serves
// beside envd's RPCs, and the small messages on them. It has no code to
// speak of, so the daemon's packages (the agent client, the runtimes, the
// controller, the E2B layer) depend on it and not on the agent itself.
package wire

import (
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// EnvdVersion is the envd version the agent reports: the envd protocol
// level its process and filesystem services follow.
const EnvdVersion = "0.6.4"

// The agent's own settings in its environment. Every variable with
// EnvPrefix is the agent's and is not passed on to the processes it
// starts.
const (
	EnvPrefix = "PADDOCK_AGENT_"
	// EnvToken carries the agent's token when it listens on TCP.
	EnvToken = EnvPrefix + "TOKEN"
	// EnvPoolToken carries a warm pool's token to an agent that starts
	// unclaimed (see ClaimPath), instead of EnvToken.
	EnvPoolToken = EnvPrefix + "POOL_TOKEN"
	// EnvOwnHome asks the agent to give the default user its home
	// directory (a fresh volume mounted there is root's).
	EnvOwnHome = EnvPrefix + "OWN_HOME"
	// EnvDefaultUser and EnvDefaultCwd are who requests naming no user
	// run as, and where (an image's User and WorkingDir).
	EnvDefaultUser = EnvPrefix + "USER"
	EnvDefaultCwd  = EnvPrefix + "WORKDIR"
	// EnvStart carries a template's start command (StartSpec as JSON)
	// to an agent that runs it itself at boot: a warm pool's pod on a
	// cluster, which the daemon cannot reach before it is claimed.
	EnvStart = EnvPrefix + "START"
	// EnvEgressRelay is an address on the sandbox's loopback where the
	// agent relays each connection to EnvEgressUpstream, the egress proxy
	// of the daemon (see EgressUpstreamPath): the sandbox's proxy
	// variables name the relay, so they stay right when the daemon's
	// address changes (a daemon running in a cluster's pod).
	EnvEgressRelay    = EnvPrefix + "EGRESS_RELAY"
	EnvEgressUpstream = EnvPrefix + "EGRESS_UPSTREAM"
)

// EgressRelayAddr is where a pod's agent relays to the egress proxy: a
// port next to envd's on the pod's loopback.
const EgressRelayAddr = "127.0.0.1:49985"

// EgressUpstream is the body of a PUT to EgressUpstreamPath.
type EgressUpstream struct {
	// Upstream is the egress proxy's address, IP:PORT.
	Upstream string `json:"upstream"`
}

// StartProcessID is the id of a template's start command among the
// sandbox's background processes.
const StartProcessID = "start"

// DefaultReadyTimeout is how long a start command's readiness check may
// take when its template names no timeout.
const DefaultReadyTimeout = 30 * time.Second

// StartSpec is a template's start command and its readiness check, as
// EnvStart gives it to the agent.
type StartSpec struct {
	Cmd  []string `json:"cmd"`
	Cwd  string   `json:"cwd,omitempty"`
	User string   `json:"user,omitempty"`
	// ReadyPort (a TCP port on the sandbox's loopback) or ReadyLog (a
	// pattern a line of its output matches) is the check, within
	// ReadyTimeoutMs; neither: ready once started.
	ReadyPort      int    `json:"ready_port,omitempty"`
	ReadyLog       string `json:"ready_log,omitempty"`
	ReadyTimeoutMs int64  `json:"ready_timeout_ms,omitempty"`
}

// DefaultPort is the agent's TCP port when it listens on one: envd's.
const DefaultPort = 49983

// TokenHeader carries the agent's token on a TCP listener (Authorization
// is taken: it selects envd's user).
const TokenHeader = "X-Paddock-Agent-Token"

// Routes the agent serves beside envd's.
const (
	// TerminalsPath lists the terminals the agent keeps.
	TerminalsPath = "/paddock/v1/terminals"
	// ProcsPath lists every process of the sandbox; KillAllPath ends them.
	ProcsPath   = "/paddock/v1/procs"
	KillAllPath = "/paddock/v1/procs/kill-all"
	// PortForwardPath upgrades an HTTP/1.1 request with "Upgrade:
	// PortForwardProtocol" and ?port=N to a TCP stream to that port on
	// the sandbox's loopback.
	PortForwardPath     = "/paddock/v1/portforward"
	PortForwardProtocol = "paddock-tcp"
	// ClaimPath is where an unclaimed agent takes its claim: a POST with
	// the pool's token in TokenHeader and a ClaimRequest.
	ClaimPath = "/paddock/v1/claim"
	// UsagePath answers the sandbox's CPU, memory and disk use (Usage),
	// read by the agent from its own cgroup: for backends whose daemon
	// cannot read the sandbox's cgroup on its host (a pod's node).
	UsagePath = "/paddock/v1/usage"
	// StartedPath answers whether the start command the agent was given
	// (EnvStart) passed its readiness check: 200 when it did (or there is
	// none), 503 while it is checked, 500 once it failed. It needs no
	// token (a kubelet's readiness probe asks it) and says nothing more.
	StartedPath = "/paddock/v1/started"
	// EgressUpstreamPath changes where the egress relay (EnvEgressRelay)
	// sends new connections: a PUT of EgressUpstream. 409 when the agent
	// runs no relay.
	EgressUpstreamPath = "/paddock/v1/egress/upstream"
)

// Usage is what UsagePath answers: the cgroup the agent sees as its own
// (a pod's container) and the filesystem at "/".
type Usage struct {
	CPUNanos         uint64 `json:"cpu_nanos"`
	MemoryBytes      uint64 `json:"memory_bytes"`
	MemoryCacheBytes uint64 `json:"memory_cache_bytes"`
	MemoryLimitBytes uint64 `json:"memory_limit_bytes"`
	DiskUsedBytes    uint64 `json:"disk_used_bytes"`
	DiskTotalBytes   uint64 `json:"disk_total_bytes"`
}

// The signals that take the agent off its unix socket and put it back.
// The daemon sends them through the runtime (`runsc kill`) around a gVisor
// checkpoint, which cannot save a socket bound on the host; the socket
// file disappears once the agent is detached, and reappears when it
// listens again. Only the daemon's side is cut: the sandbox's processes,
// sessions and terminals run on.
const (
	SignalDetach = syscall.SIGUSR1
	SignalAttach = syscall.SIGUSR2
)

// TerminalTagPrefix marks the tag of a process that is a terminal.
const TerminalTagPrefix = "paddock-terminal:"

// ClaimRequest gives an unclaimed agent the token it answers to from then
// on.
type ClaimRequest struct {
	Token string `json:"token"`
}

// CodeLanguage maps the names callers use to a code context's language:
// "python" or "javascript"; "" means python.
func CodeLanguage(s string) (string, error) {
	switch strings.ToLower(s) {
	case "", "python", "python3", "py":
		return "python", nil
	case "javascript", "js", "node", "nodejs":
		return "javascript", nil
	}
	return "", errdefs.Invalid("language %q: want python or javascript", s)
}

// MountPointRecord is the PAX record that marks, in a tar the agent
// writes of one filesystem (GET /paddock/v1/tar?one_file_system=true), an
// entry on another filesystem than the directory's: a mount point (/proc,
// a volume, a file the runtime bind-mounts). Such an entry comes with its
// name and type alone: no content, nothing under it.
const MountPointRecord = "PADDOCK.mountpoint"

// UnchangedRecord is the PAX record that marks, in a tar the agent writes
// with unchanged_before, a regular file whose inode has not changed since
// that time: it comes without its content (size 0).
const UnchangedRecord = "PADDOCK.unchanged"
