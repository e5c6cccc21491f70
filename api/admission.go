package api

// RuntimeCrun names crun, usable where the host has a pure cgroup v2
// hierarchy (see GET /v1/info for why it is or is not usable here).
const RuntimeCrun = "crun"

// Size presets a create may name in CreateSandboxRequest.Size.
const (
	SizeLite      = "lite"
	SizeBasic     = "basic"
	SizeStandard1 = "standard-1"
	SizeStandard2 = "standard-2"
	SizeStandard3 = "standard-3"
	SizeStandard4 = "standard-4"
)

// CallerLocal is the caller id of requests over the unix socket, where
// file permissions are the authentication and no API key is sent.
const CallerLocal = "local"

// SizeInfo is one size preset and whether this host can give it.
type SizeInfo struct {
	Name      string    `json:"name"`
	Resources Resources `json:"resources"`
	// Fits is false when a field exceeds what this host allows; Reason
	// then gives the numbers.
	Fits   bool   `json:"fits"`
	Reason string `json:"reason,omitempty"`
}

// RuntimeInfo is what probing one container runtime found at daemon start.
type RuntimeInfo struct {
	// Name is the API name ("runc", "gvisor", "crun").
	Name string `json:"name"`
	// Binary is the executable probed ("runc", "runsc", "crun").
	Binary    string `json:"binary"`
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	Available bool   `json:"available"`
	// Reason says why the runtime is unavailable.
	Reason string `json:"reason,omitempty"`
	// Note says which build is in use where there is a choice (gVisor:
	// Paddock's pinned runsc, or runsc from PATH).
	Note    string `json:"note,omitempty"`
	Default bool   `json:"default,omitempty"`
	// UserNamespaces, for runc and crun: "on" (root in a sandbox is an
	// unprivileged id of a range of its own on the host), or "off: " and
	// why.
	UserNamespaces string `json:"user_namespaces,omitempty"`
}

// InfoDefaults is what a create gets for what it leaves out.
type InfoDefaults struct {
	Image      string    `json:"image"`
	Runtime    string    `json:"runtime"`
	Resources  Resources `json:"resources"`
	SleepAfter string    `json:"sleep_after"`
}

// Info is the body of GET /v1/info.
type Info struct {
	Version  string        `json:"version"`
	Runtimes []RuntimeInfo `json:"runtimes"`
	Sizes    []SizeInfo    `json:"sizes"`
	// Limits is the most one sandbox may be given on this host.
	Limits   Resources    `json:"limits"`
	Defaults InfoDefaults `json:"defaults"`
	// CgroupLayout is "unified" (pure cgroup v2), "hybrid" (v1 controllers
	// with a v2 mount beside them) or "legacy" (v1 only).
	CgroupLayout string `json:"cgroup_layout"`
	// PolicyActive is true when an admission policy restricts creates.
	PolicyActive bool `json:"policy_active"`
	// SnapshotStore is the local snapshot store's use and cap.
	SnapshotStore *StoreUsage `json:"snapshot_store,omitempty"`
	// BackupS3 is set when S3-compatible backup storage is configured.
	BackupS3 *S3Info `json:"backup_s3,omitempty"`
	// Firewall is the backend confining egress sandboxes ("nftables" or
	// "iptables", or on a cluster "networkpolicy, proxy IP:PORT"); empty
	// when this daemon has no networking (mode none only).
	Firewall string `json:"firewall,omitempty"`
}

// Policy is the admission policy (GET/PUT /v1/policy, or the daemon's
// --policy file). Empty or zero fields impose nothing.
type Policy struct {
	// AllowedImages lists image names ("base") or digests ("sha256:<hex>");
	// a create is admitted when its image's name or resolved digest is listed.
	AllowedImages []string `json:"allowed_images,omitempty"`
	// AllowedTemplates lists template names; when set, a sandbox made from a
	// template (directly, or claimed from a pool of it) is admitted only if
	// its template is listed. Sandboxes not made from a template are
	// governed by AllowedImages alone.
	AllowedTemplates []string `json:"allowed_templates,omitempty"`
	// AllowedRuntimes lists runtime names ("runc", "gvisor", "crun").
	AllowedRuntimes []string `json:"allowed_runtimes,omitempty"`
	// MaxSize is a size preset no field of a sandbox may exceed.
	MaxSize string `json:"max_size,omitempty"`
	// MaxResources bounds each field of a sandbox's resources; with
	// MaxSize too, both apply.
	MaxResources *Resources `json:"max_resources,omitempty"`
	// MaxLifetime (Go duration) bounds a sandbox's timeout; a create that
	// sets none gets this lifetime.
	MaxLifetime string `json:"max_lifetime,omitempty"`
	// MaxSandboxesPerKey bounds the sandboxes (not destroyed, in any state)
	// each API key may have at once.
	MaxSandboxesPerKey int `json:"max_sandboxes_per_key,omitempty"`
	// MaxSandboxesLocal bounds the unix socket caller's sandboxes the same
	// way; 0 = no bound (the socket is the operator's).
	MaxSandboxesLocal int `json:"max_sandboxes_local,omitempty"`
	// AllowNetwork says whether a create may ask for network access. It is
	// stored and shown; it takes effect when sandbox networking lands.
	AllowNetwork bool `json:"allow_network"`
}
