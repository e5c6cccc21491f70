package api

import "time"

// Idle policies: what sleep_after does to an idle sandbox.
const (
	// OnIdleStop stops the compute; files stay on disk. Memory and
	// processes are lost.
	OnIdleStop = "stop"
	// OnIdlePause freezes the sandbox: memory and processes are kept, no
	// CPU is used, the host's memory stays allocated.
	OnIdlePause = "pause"
	// OnIdleSnapshot snapshots the files and frees compute and the
	// writable layer; the next request restores the files into the same
	// sandbox id. Memory and processes are lost.
	OnIdleSnapshot = "snapshot"
	// OnIdleHibernate writes memory and processes to disk and frees the
	// host's memory and CPU; the next request restores the sandbox where
	// it was. gVisor sandboxes only.
	OnIdleHibernate = "hibernate"
)

// PauseRequest is the optional body of POST /v1/sandboxes/{id}/pause.
type PauseRequest struct {
	// ToDisk hibernates instead of freezing in place: memory and
	// processes go to disk and the host frees them (gVisor only).
	ToDisk bool `json:"to_disk,omitempty"`
}

// SnapshotTTLNever in a TTL field means the snapshot never expires.
const SnapshotTTLNever = "never"

// CreateSnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshots.
// A snapshot keeps the sandbox's files (its changes against the image):
// owners, modes, times, extended attributes and deletions. It does not keep
// memory, running processes or mounts.
type CreateSnapshotRequest struct {
	// Name is optional and unique among snapshots.
	Name string `json:"name,omitempty"`
	// TTL is a Go duration ("72h", at least 1s) or "never"; "" = the
	// default of 30 days. Each restore renews the expiry to now + TTL.
	TTL string `json:"ttl,omitempty"`
	// Memory keeps the sandbox's memory and processes too (gVisor
	// sandboxes without egress networking): a sandbox created from the
	// snapshot resumes every process where it was. The sandbox is
	// checkpointed and restored for it, a pause of a fraction of a second.
	Memory bool `json:"memory,omitempty"`
}

// UpdateSnapshotRequest is the body of PATCH /v1/snapshots/{snapshot}.
type UpdateSnapshotRequest struct {
	// TTL, counted from now: a Go duration or "never". It replaces the
	// snapshot's TTL, so later restores renew by it too.
	TTL string `json:"ttl"`
}

// Snapshot is an immutable filesystem snapshot.
type Snapshot struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Size is the bytes of the snapshot's own layer (its changes against
	// its parent, or the image); SizeTotal counts every layer it stacks.
	Size      int64 `json:"size"`
	SizeTotal int64 `json:"size_total"`
	// SizeAdded is the disk space taking (or importing) the snapshot
	// added to the local store: the blocks of the files and directories
	// it did not find stored already. Files equal to stored ones are
	// shared, so it can be far below Size; 0 when everything was stored.
	SizeAdded int64 `json:"size_added"`
	// Image and ImageDigest are what a restore runs on.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest"`
	// Parent is the snapshot the source sandbox was restored from.
	Parent string `json:"parent,omitempty"`
	// Sandbox is the id of the sandbox it was taken of ("" if imported).
	Sandbox string `json:"sandbox,omitempty"`
	// Layers are the content digests of its layers, lowest first.
	Layers    []string  `json:"layers"`
	CreatedAt time.Time `json:"created_at"`
	// TTL is how long the snapshot lives after it is taken and after each
	// restore: a Go duration ("720h0m0s"), or "never".
	TTL string `json:"ttl"`
	// ExpiresAt is absent when the snapshot never expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// CreatedBy owns the snapshot: the API key id of the caller that took
	// or imported it (of the sandbox's creator for fork and idle
	// snapshots), CallerLocal for the unix socket, absent for snapshots
	// older than owners.
	CreatedBy string `json:"created_by,omitempty"`
	// Memory says the snapshot keeps memory and processes too;
	// MemorySize is the bytes of its memory image on disk.
	Memory     bool  `json:"memory,omitempty"`
	MemorySize int64 `json:"memory_size,omitempty"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 64

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork.
type ForkRequest struct {
	// Count is how many copies to make (1 to MaxForkCount; 0 means 1).
	Count int `json:"count,omitempty"`
	// NamePrefix names the copies <prefix>-1, <prefix>-2, ...; "" leaves
	// them unnamed.
	NamePrefix string `json:"name_prefix,omitempty"`
	// Labels are given to every copy.
	Labels map[string]string `json:"labels,omitempty"`
	// Memory makes live copies: memory and processes are copied too
	// (gVisor sandboxes without egress networking), each copy under its
	// own id and hostname.
	Memory bool `json:"memory,omitempty"`
}

// ForkResult is what a fork made: the snapshot taken of the source, and the
// new sandboxes restored from it.
type ForkResult struct {
	Snapshot  Snapshot  `json:"snapshot"`
	Sandboxes []Sandbox `json:"sandboxes"`
}
