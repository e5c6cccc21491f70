// Package config is the daemon's one typed configuration: defaults, then
// environment variables, then flags fill it, and Validate checks the result
// before anything is built from it.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// Default locations.
const (
	DefaultStateDir = "/var/lib/paddock"
	DefaultSocket   = "/run/paddock/paddock.sock"
)

// DefaultImageImportMaxPerKey is the default of ImageImportMaxPerKey.
const DefaultImageImportMaxPerKey = 32 << 30

// Config is everything `paddock serve` can be told.
type Config struct {
	// StateDir holds the database, images and sandboxes ($PADDOCK_STATE_DIR).
	StateDir string `json:"state_dir"`
	// Socket is the unix socket the API listens on ($PADDOCK_SOCKET).
	// Its file permissions (0660, root) are its authentication.
	Socket string `json:"socket"`
	// Images is the image store's directory ($PADDOCK_IMAGES_DIR); default
	// <StateDir>/images. Several daemons may share one (tests do).
	Images string `json:"images,omitempty"`
	// Listen is an optional TCP address ($PADDOCK_LISTEN); API keys are
	// required there.
	Listen string `json:"listen,omitempty"`
	// DefaultImage and DefaultRuntime apply when a create names none.
	DefaultImage   string `json:"default_image"`
	DefaultRuntime string `json:"default_runtime"`
	// Defaults fill the unset fields of a create's resources; Max bounds them.
	Defaults api.Resources `json:"defaults"`
	Max      api.Resources `json:"max"`
	// SleepAfter is the default idle time before a sandbox stops.
	SleepAfter time.Duration `json:"sleep_after"`
	// ReadyTimeout bounds how long a starting sandbox may take until its
	// agent answers.
	ReadyTimeout time.Duration `json:"ready_timeout"`
	// ExecTimeout is the longest an exec may run when the caller sets none.
	ExecTimeout time.Duration `json:"exec_timeout"`
	// PrepareDefaultImage builds the default image in the background at
	// start, so the first create does not wait for it.
	PrepareDefaultImage bool `json:"prepare_default_image"`
	// LogLevel is debug, info, warn or error ($PADDOCK_LOG_LEVEL).
	LogLevel string `json:"log_level"`
	// LedgerRetention is how long a destroyed sandbox's ledger is kept
	// after its last entry ($PADDOCK_LEDGER_RETENTION).
	LedgerRetention time.Duration `json:"ledger_retention"`
	// BackupTTL is the lifetime of a backup created without a ttl.
	BackupTTL time.Duration `json:"backup_ttl"`
	// SnapshotExpiryInterval is how often expired snapshots are deleted,
	// with the layers nothing uses any more
	// ($PADDOCK_SNAPSHOT_EXPIRY_INTERVAL). An expired snapshot is neither
	// listed nor restorable even before it is deleted.
	SnapshotExpiryInterval time.Duration `json:"snapshot_expiry_interval"`
	// PreviewListen is the TCP address of the preview listener that serves
	// exposed sandbox ports ($PADDOCK_PREVIEW_LISTEN); "off" disables it.
	PreviewListen string `json:"preview_listen"`
	// PreviewDomain is the domain of preview hosts,
	// {port}-{id}-{token}.{domain} ($PADDOCK_PREVIEW_DOMAIN).
	PreviewDomain string `json:"preview_domain"`
	// PolicyFile is the admission policy ($PADDOCK_POLICY_FILE, or
	// `serve --policy`); it must exist when set. Unset, the policy lives
	// in <StateDir>/policy.json, created by the first PUT /v1/policy.
	PolicyFile string `json:"policy_file,omitempty"`
	// BackupS3 is S3-compatible backup storage, off unless configured
	// (storage.go).
	BackupS3 BackupS3 `json:"backup_s3"`
	// SnapshotStoreMax caps the bytes of the local snapshot and backup
	// store ($PADDOCK_SNAPSHOT_STORE_MAX); 0 = no cap.
	SnapshotStoreMax int64 `json:"snapshot_store_max,omitempty"`
	// ImageImportMaxPerKey caps the bytes on disk of the images one caller
	// (an API key, or the unix socket) has imported or pulled
	// ($PADDOCK_IMAGE_IMPORT_MAX_PER_KEY, default 32 GiB).
	ImageImportMaxPerKey int64 `json:"image_import_max_per_key"`
	// E2BDefaultNetwork is the network of a sandbox created through the
	// E2B API whose request says nothing about internet access
	// ($PADDOCK_E2B_DEFAULT_NETWORK): "none" (default) or "all" (e2b.go).
	E2BDefaultNetwork string `json:"e2b_default_network"`
	// RequestBodyMemory bounds the request body bytes all API requests
	// together may hold in memory ($PADDOCK_REQUEST_BODY_MEMORY; limits.go).
	// A request that cannot get its share within seconds is refused 503.
	RequestBodyMemory int64 `json:"request_body_memory"`
	// DiskOvercommit is how many times the state dir's file system size
	// the disks granted to sandboxes may add up to
	// ($PADDOCK_DISK_OVERCOMMIT; limits.go). Disks are sparse files, so
	// above 1 a sandbox can meet ENOSPC before its own disk is full.
	DiskOvercommit float64 `json:"disk_overcommit"`
	// CreatesPerCaller is how many creates one caller (an API key, or
	// the unix socket) may have starting at once; more wait their turn,
	// so one caller's burst leaves room for everyone else's creates
	// ($PADDOCK_CREATES_PER_CALLER; limits.go). 0 (the default) is
	// EffectiveCreatesPerCaller's choice for the backend.
	CreatesPerCaller int `json:"creates_per_caller"`
	// Backend is where sandboxes run ($PADDOCK_BACKEND, `serve
	// --backend`): "local" (this host's container runtimes) or
	// "kubernetes" (Kubernetes, kubernetes.go).
	Backend    string     `json:"backend"`
	Kubernetes Kubernetes `json:"kubernetes"`
	// Runsc is the gVisor runtime binary ($PADDOCK_RUNSC; runsc.go): an
	// absolute path, or a name looked up in PATH ("runsc" is Debian's).
	// The default is the pinned build scripts/install-deps.sh makes; while
	// that is not installed, the daemon falls back to runsc in PATH and
	// `paddock info` says so.
	Runsc string `json:"runsc"`
	// RunscPlatform is gVisor's platform ($PADDOCK_RUNSC_PLATFORM):
	// systrap, ptrace, or "" for systrap where the runsc has it (the
	// pinned build does, Debian's does not) and ptrace otherwise.
	RunscPlatform string `json:"runsc_platform,omitempty"`
	// UserNamespaces is "auto" (the default: each runc and crun sandbox
	// in a user namespace of its own where the host allows it; `paddock
	// info` says) or "off" ($PADDOCK_USER_NAMESPACES).
	UserNamespaces string `json:"user_namespaces,omitempty"`
	// Network is sandboxes' egress networking on the local backend
	// (network.go).
	Network Network `json:"network"`
}

// Default returns the embedded defaults.
func Default() Config {
	return Config{
		StateDir:       DefaultStateDir,
		Socket:         DefaultSocket,
		DefaultImage:   "base",
		DefaultRuntime: api.RuntimeRunc,
		Defaults: api.Resources{
			CPU:      1,
			MemoryMB: 1024,
			DiskMB:   4096,
			Pids:     1024,
		},
		Max: api.Resources{
			CPU:      float64(goruntime.NumCPU()),
			MemoryMB: hostMemoryMB(),
			DiskMB:   200 * 1024,
			Pids:     32768,
		},
		SleepAfter:             10 * time.Minute,
		ReadyTimeout:           30 * time.Second,
		ExecTimeout:            24 * time.Hour,
		PrepareDefaultImage:    true,
		LogLevel:               "info",
		LedgerRetention:        30 * 24 * time.Hour,
		BackupTTL:              7 * 24 * time.Hour,
		SnapshotExpiryInterval: time.Minute,
		PreviewListen:          DefaultPreviewListen,
		PreviewDomain:          "localhost",
		E2BDefaultNetwork:      E2BNetworkNone,
		ImageImportMaxPerKey:   DefaultImageImportMaxPerKey,
		RequestBodyMemory:      128 << 20,
		DiskOvercommit:         1,
		Backend:                BackendLocal,
		Kubernetes:             defaultKubernetes(),
		Runsc:                  DefaultRunsc(),
		Network:                defaultNetwork(),
	}
}

// ApplyEnv overrides fields from PADDOCK_* environment variables.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	if v := getenv("PADDOCK_STATE_DIR"); v != "" {
		c.StateDir = v
	}
	if v := getenv("PADDOCK_SOCKET"); v != "" {
		c.Socket = v
	}
	if v := getenv("PADDOCK_IMAGES_DIR"); v != "" {
		c.Images = v
	}
	if v := getenv("PADDOCK_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := getenv("PADDOCK_PREVIEW_LISTEN"); v != "" {
		c.PreviewListen = v
	}
	if v := getenv("PADDOCK_PREVIEW_DOMAIN"); v != "" {
		c.PreviewDomain = v
	}
	if v := getenv("PADDOCK_LOG_LEVEL"); v != "" {
		c.LogLevel = v
	}
	if v := getenv("PADDOCK_DEFAULT_RUNTIME"); v != "" {
		c.DefaultRuntime = v // checked by Validate
	}
	if v := getenv("PADDOCK_POLICY_FILE"); v != "" {
		c.PolicyFile = v
	}
	if v := getenv("PADDOCK_LEDGER_RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_LEDGER_RETENTION: %w", err)
		}
		c.LedgerRetention = d
	}
	if v := getenv("PADDOCK_SNAPSHOT_EXPIRY_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_SNAPSHOT_EXPIRY_INTERVAL: %w", err)
		}
		c.SnapshotExpiryInterval = d
	}
	if v := getenv("PADDOCK_PREPARE_DEFAULT_IMAGE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_PREPARE_DEFAULT_IMAGE: %w", err)
		}
		c.PrepareDefaultImage = b
	}
	c.applyE2BEnv(getenv)
	if err := c.applyKubernetesEnv(getenv); err != nil {
		return err
	}
	c.applyRunscEnv(getenv)
	if err := c.applyLimitsEnv(getenv); err != nil {
		return err
	}
	if err := c.applyNetworkEnv(getenv); err != nil {
		return err
	}
	return c.applyStorageEnv(getenv)
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("state dir %q must be an absolute path", c.StateDir))
	}
	if !filepath.IsAbs(c.Socket) {
		errs = append(errs, fmt.Errorf("socket %q must be an absolute path", c.Socket))
	}
	if c.PolicyFile != "" && !filepath.IsAbs(c.PolicyFile) {
		errs = append(errs, fmt.Errorf("policy file %q must be an absolute path", c.PolicyFile))
	}
	if c.Images != "" && !filepath.IsAbs(c.Images) {
		errs = append(errs, fmt.Errorf("images dir %q must be an absolute path", c.Images))
	}
	if len(c.Socket) > 100 {
		errs = append(errs, fmt.Errorf("socket path %q is longer than a unix socket allows (100)", c.Socket))
	}
	if c.DefaultRuntime != api.RuntimeRunc && c.DefaultRuntime != api.RuntimeGVisor && c.DefaultRuntime != api.RuntimeCrun {
		errs = append(errs, fmt.Errorf("default runtime %q: want runc, gvisor or crun", c.DefaultRuntime))
	}
	if c.Defaults.CPU <= 0 || c.Defaults.MemoryMB <= 0 || c.Defaults.DiskMB <= 0 || c.Defaults.Pids <= 0 {
		errs = append(errs, errors.New("default resources must all be positive"))
	}
	if c.Defaults.CPU > c.Max.CPU || c.Defaults.MemoryMB > c.Max.MemoryMB ||
		c.Defaults.DiskMB > c.Max.DiskMB || c.Defaults.Pids > c.Max.Pids {
		errs = append(errs, errors.New("default resources exceed the maximum"))
	}
	if c.SleepAfter <= 0 {
		errs = append(errs, errors.New("sleep_after must be positive"))
	}
	if c.ReadyTimeout <= 0 || c.ExecTimeout <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	if c.LedgerRetention <= 0 || c.BackupTTL <= 0 {
		errs = append(errs, errors.New("ledger_retention and backup_ttl must be positive"))
	}
	if c.SnapshotExpiryInterval < time.Second || c.SnapshotExpiryInterval > 24*time.Hour {
		errs = append(errs, fmt.Errorf("snapshot_expiry_interval %s: want 1s to 24h", c.SnapshotExpiryInterval))
	}
	errs = append(errs, c.validatePreview()...)
	errs = append(errs, c.validateE2B()...)
	errs = append(errs, c.validateStorage()...)
	errs = append(errs, c.validateLimits()...)
	errs = append(errs, c.validateKubernetes()...)
	errs = append(errs, c.validateRunsc()...)
	errs = append(errs, c.validateNetwork()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel))
	}
	return errors.Join(errs...)
}

// Paths derived from StateDir.
func (c *Config) DBPath() string { return filepath.Join(c.StateDir, "paddock.db") }
func (c *Config) ImagesDir() string {
	if c.Images != "" {
		return c.Images
	}
	return filepath.Join(c.StateDir, "images")
}
func (c *Config) RuntimeDir(name string) string {
	return filepath.Join(c.StateDir, "runtime", name)
}
func (c *Config) BinDir() string { return filepath.Join(c.StateDir, "bin") }

// hostMemoryMB reads MemTotal; it falls back to 4 GiB when /proc is unreadable.
func hostMemoryMB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 4096
	}
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil || kb <= 0 {
		return 4096
	}
	return kb / 1024
}
