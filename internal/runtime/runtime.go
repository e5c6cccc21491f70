// Package runtime defines how Paddock runs a sandbox's compute. Backend is
// deliberately small; optional capabilities (Pauser, ...) are their own
// interfaces, found by type assertion. Implementations live in subpackages
// (oci for runc and runsc).
package runtime

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// Status is what the runtime says about one sandbox's container.
type Status string

const (
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"
	// StatusStopped: the sandbox's files are on disk but no container runs.
	StatusStopped Status = "stopped"
)

// ErrNotFound is returned (wrapped) for a sandbox the backend knows nothing of.
var ErrNotFound = errors.New("runtime: sandbox not found")

// Resources are enforced limits. Zero means "no limit" only for Pids; the
// controller always fills CPU, memory and disk.
type Resources struct {
	CPUMillis   int64 // 1000 = one vCPU (CFS quota)
	MemoryBytes int64 // hard limit, swap equal to it (no swap)
	DiskBytes   int64 // size cap of the writable layer
	Pids        int64
}

// TrustBundlePath is where a sandbox's CA bundle is mounted: the path
// Debian's ca-certificates writes and OpenSSL, curl and Python read.
const TrustBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// Spec is everything a backend needs to start a sandbox.
type Spec struct {
	// ID is the sandbox id: [a-z0-9]{1,32}. It is also the hostname.
	ID string
	// Layers are read-only host directories forming the image, lowest first.
	Layers []string
	// AgentBinary is the host path of the sealed, read-only paddock binary
	// that runs as PID 1 (`paddock agent`).
	AgentBinary string
	// Env is the sandbox-wide environment (KEY=VALUE), given to the agent,
	// which passes it on to every process.
	Env       []string
	Resources Resources
	// NetNSPath, when set, is a prepared network namespace the sandbox
	// joins instead of a new loopback-only one (egress networking).
	NetNSPath string
	// ResolvConf, when set, is a host file bind-mounted read-only as the
	// sandbox's /etc/resolv.conf.
	ResolvConf string
	// TrustBundle, when set, is a host file bind-mounted read-only as the
	// sandbox's /etc/ssl/certs/ca-certificates.crt (egress interception).
	TrustBundle string
	// Image names the image the sandbox runs, for backends that run
	// sandboxes away from the host's layers (Kubernetes); Layers holds
	// the same image on this host.
	Image ImageRef
	// SnapshotLayers are the snapshot layers among Layers (host
	// directories in overlay format, lowest first), for backends that do
	// not stack Layers themselves and write a restored sandbox's files in
	// through its agent instead (Kubernetes). Backends that mount Layers
	// ignore it.
	SnapshotLayers []string
	// ImageLayers is how many of the lowest SnapshotLayers Image already
	// holds (a template's build layers in the template's image; a warm
	// pool's spec sets it without SnapshotLayers): a backend whose home
	// directory is a volume of its own copies the image's home into it
	// before the agent starts (Kubernetes) and writes in through the
	// agent only the layers above.
	ImageLayers int
	// SecretEnv are variables of the sandbox-wide environment that carry a
	// credential (its egress proxy's, on a cluster). Backends that write
	// their sandboxes' definitions where others read them (Kubernetes)
	// keep these in the sandbox's Secret; the others add them to Env.
	SecretEnv []string
	// Egress, for backends without host networking (Kubernetes), is the
	// egress proxy and direct addresses the sandbox may reach, and nothing
	// else; nil, the sandbox reaches nothing (network none).
	Egress *Egress
	// WarmPool, on a sandbox's first start, asks a WarmPooler backend to
	// take it from that warm pool instead of starting it cold. Later
	// starts of the same sandbox ignore it.
	WarmPool string
	// Start, on a WarmPooler's pool (SetWarmPool), is the template's
	// start command, which the pool's agents run at boot and check
	// themselves: the daemon cannot reach a pooled pod before its claim.
	Start *wire.StartSpec
}

// Egress is what a sandbox with network egress may reach on a backend
// without host networking: the egress proxy (its HTTP_PROXY variables,
// in SecretEnv, name it with the sandbox's credentials) and the prefixes
// its address rules allow directly, any port.
type Egress struct {
	Proxy  netip.AddrPort
	Direct []netip.Prefix
}

// AllEnv is the sandbox-wide environment with SecretEnv, for backends
// that keep no secrets apart.
func (s Spec) AllEnv() []string {
	if len(s.SecretEnv) == 0 {
		return s.Env
	}
	return append(append([]string(nil), s.Env...), s.SecretEnv...)
}

// ImageRef says which stored image a sandbox runs.
type ImageRef struct {
	Name   string // "busybox", "base", an imported reference
	Digest string // "sha256:<hex>" of its content
}

// WarmPooler is a backend whose platform keeps warm pools of sandboxes
// itself (agent-sandbox's SandboxWarmPool on Kubernetes): the controller
// sets a pool's size and Spec.WarmPool takes a sandbox from it. Pools are
// named by the controller; a backend keeps them apart from another
// daemon's of the same name.
type WarmPooler interface {
	// SetWarmPool creates or updates the pool name to keep ready sandboxes
	// of spec (its ID is ignored): Replicas of them.
	SetWarmPool(ctx context.Context, name string, spec Spec, replicas int) error
	// WarmPoolReady says how many of the pool's sandboxes are ready to be
	// taken; a pool that does not exist has none.
	WarmPoolReady(ctx context.Context, name string) (int, error)
	// DeleteWarmPool removes the pool and its sandboxes not taken yet;
	// those taken keep running. A pool that does not exist is no error.
	DeleteWarmPool(ctx context.Context, name string) error
	// WarmPools lists the pools this backend keeps.
	WarmPools(ctx context.Context) ([]string, error)
}

// WarmPoolDiagnoser is a WarmPooler that can say why a pool's sandboxes
// do not become ready (an image that cannot be pulled, pods no node
// takes, a start command that fails its check), for the pool's status.
type WarmPoolDiagnoser interface {
	// WarmPoolProblem is that reason, or "" when none is seen.
	WarmPoolProblem(ctx context.Context, name string) string
}

// StartBounder is a backend whose Start may wait much longer than a local
// start (a cluster schedules the pod, binds its volumes, pulls its image):
// StartTimeout is the longest its Start waits before it fails with the
// platform's reason, and the controller gives a start that long on top of
// its own bounds.
type StartBounder interface {
	StartTimeout() time.Duration
}

// Info says where to reach a started sandbox's agent.
type Info struct {
	// AgentSocket is the host path of the agent's unix socket.
	AgentSocket string
	// AgentAddr is set instead of AgentSocket for a sandbox reached over a
	// network (host:port), with AgentToken, the secret its agent wants in
	// every request.
	AgentAddr  string
	AgentToken string
	// Pid is the host pid of the container's init (0 if unknown, e.g. runsc).
	Pid int
}

// Backend runs sandboxes. All methods are safe for concurrent use on
// different ids; the controller serialises calls for one id.
type Backend interface {
	// Name is the runtime name as the API shows it ("runc", "gvisor").
	Name() string
	// Start prepares the root filesystem (reusing an existing writable
	// layer, so a stopped sandbox keeps its files) and starts the
	// container detached: it outlives the daemon. It returns once the
	// container runs; readiness of the agent is the caller's to wait for.
	Start(ctx context.Context, spec Spec) (Info, error)
	// Status reports the container's state; ErrNotFound if nothing of the
	// sandbox exists.
	Status(ctx context.Context, id string) (Status, error)
	// Info returns how to reach a running sandbox's agent (after a daemon
	// restart, for re-adoption).
	Info(ctx context.Context, id string) (Info, error)
	// Signal sends sig to the container's init.
	Signal(ctx context.Context, id string, sig syscall.Signal) error
	// Stop kills and deletes the container and unmounts its root
	// filesystem, keeping the writable layer on disk. Idempotent.
	Stop(ctx context.Context, id string) error
	// Destroy does Stop and removes everything of the sandbox: writable
	// layer, mounts, cgroups, state. Idempotent: no error if absent.
	Destroy(ctx context.Context, id string) error
	// List returns the ids of every sandbox this backend has anything of
	// (containers, mounts, state dirs), for reconciliation.
	List(ctx context.Context) ([]string, error)
}

// Exit says why a sandbox's compute ended when nobody asked it to.
type Exit struct {
	// Reason is short and safe to show a user: "out of memory",
	// "agent exited: signal 15", "gVisor sentry killed".
	Reason string
	// Known: the reason comes from a record (the agent's own, the memory
	// cgroup's OOM count), not from the mere absence of one, which a host
	// reboot also leaves.
	Known bool
}

// Watcher follows a running sandbox's container.
type Watcher interface {
	// Wait blocks until the sandbox's container (or, for gVisor, its
	// whole sandbox) ends, and says why. It returns at once when none
	// runs, and ctx's error when ctx ends first. A stop or destroy the
	// caller asked for ends it too: the caller tells those apart.
	Wait(ctx context.Context, id string) (Exit, error)
}

// OOMCounter counts the kernel's OOM kills in a running sandbox, so a
// process ended by SIGKILL can be told apart as killed for memory.
type OOMCounter interface {
	// OOMKills is the count since the container started; ok is false
	// when the host does not say.
	OOMKills(id string) (n int64, ok bool)
}

// Pauser freezes and thaws a sandbox (memory and processes kept).
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
}

// Checkpointer keeps a sandbox's memory and processes on disk (gVisor's
// checkpoint and restore). A checkpoint is a directory of files the
// backend writes and reads; the caller stores it, and must restore it
// only with a backend of the same CheckpointFormat.
type Checkpointer interface {
	// CanCheckpoint says why this backend cannot, or nil if it can.
	CanCheckpoint() error
	// CheckpointFormat names what restoring needs ("runsc <version>").
	CheckpointFormat() string
	// Checkpoint saves the running sandbox into dir, an empty host
	// directory, and ends its compute as Stop does (its files stay). If
	// it fails, the sandbox runs on.
	Checkpoint(ctx context.Context, id, dir string) error
	// Restore starts spec's sandbox from the checkpoint in dir instead of
	// booting it. Its files (writable layer and spec.Layers) must be those
	// the checkpoint saw.
	Restore(ctx context.Context, spec Spec, dir string) (Info, error)
}

// LayerExporter writes a sandbox's writable layer (its changes against the
// image) as a tar stream; deletions appear as OCI whiteouts (".wh.<name>").
// Reading happens on the host, so it must never follow a symlink or open
// anything but a regular file the sandbox controls.
type LayerExporter interface {
	ExportLayer(ctx context.Context, id string, w io.Writer) error
}

// LayerSnapshotter copies a sandbox's writable layer, in overlayfs format
// (whiteouts as 0/0 character devices, opaque directories marked with the
// trusted.overlay.opaque xattr), into dst, an empty host directory. It
// works on running and stopped sandboxes; the caller freezes a running one
// first so the copy is consistent. It must never follow a symlink on the
// host and must keep owners, modes, times and xattrs.
type LayerSnapshotter interface {
	SnapshotLayer(ctx context.Context, id, dst string) error
}

// RootLayerSnapshotter is a LayerSnapshotter of a backend that runs
// sandboxes away from this host's layers (Kubernetes), whose snapshots
// keep only what a stop keeps (the home directory). For a template's
// build it takes the whole root filesystem instead, as it differs from
// lower (the host directories of the layers the sandbox was started
// from, lowest first): new and changed files, and whiteouts for what was
// removed, into dst in overlayfs format.
type RootLayerSnapshotter interface {
	LayerSnapshotter
	SnapshotRootLayer(ctx context.Context, id, dst string, lower []string) error
}

// LiveLayerSnapshotter marks a LayerSnapshotter that copies a running
// sandbox's files while its processes keep running, because the backend
// cannot freeze a sandbox (Kubernetes: the copy goes through the
// sandbox's agent). The caller does not ask for a Pauser then. The copy
// is not frozen: a file written during the copy may be captured torn
// (part old, part new), and files changed in different places during the
// copy may be captured at different moments.
type LiveLayerSnapshotter interface {
	LayerSnapshotter
	// SnapshotsLive only marks the capability; it does nothing.
	SnapshotsLive()
}
