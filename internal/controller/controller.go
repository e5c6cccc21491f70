// Package controller owns every sandbox's lifecycle: it validates and admits
// requests, drives the runtime backend, keeps the store's records true, stops
// idle sandboxes, and reconciles records with reality when the daemon starts.
// Each sandbox has one owner lock; lifecycle steps for one id never overlap.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller/events"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/controller/processes"
	"github.com/paddock-dev/paddock/internal/controller/sessions"
	"github.com/paddock-dev/paddock/internal/controller/stats"
	"github.com/paddock-dev/paddock/internal/controller/terminals"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
)

// Images is what the controller needs of the image store.
type Images interface {
	Resolve(ctx context.Context, ref string) (*image.Image, error)
	Ensure(ctx context.Context, name string, progress image.Progress) (*image.Image, error)
}

// Options wires a Controller.
type Options struct {
	Store  store.Store
	Images Images
	// Backends maps api runtime names ("runc", "gvisor") to backends.
	Backends map[string]runtime.Backend
	// AgentBinary is the sealed paddock binary mounted into sandboxes.
	AgentBinary string
	// PushImage, if set, makes sure a registry holds an image before a
	// backend without this host's layers (Kubernetes) names it in a pod:
	// a sandbox's image, a template's stacked image, a warm pool's. Its
	// error fails the start. nil: the nodes find the images themselves.
	PushImage func(ctx context.Context, img *image.Image) error
	Config    config.Config
	Logger    *slog.Logger
	// IdleInterval is how often idle and lifetime limits are checked (default 2s).
	IdleInterval time.Duration
	// Snapshots is the snapshot layer store; nil disables snapshots.
	Snapshots *snapshot.Store
	// Network plumbs egress sandboxes; nil: only mode none (network.go).
	Network Network
	// Secrets keeps secrets for credential injection; nil: none (secrets.go).
	Secrets Secrets
	// Ledger writes the daemon's ledger entries; share it with the parts
	// made before the controller that record too (the egress proxy's
	// refusals). nil: one over Store.
	Ledger *ledger.Recorder
	// Retention deletes destroyed sandboxes' ledgers past the configured
	// retention; the controller purges through it before it reads a
	// destroyed sandbox's ledger, and whoever made it runs it. nil: one
	// over Store, never run.
	Retention *ledger.Retention
	// Clock tells the time for snapshot lifetimes (taken, expiry,
	// renewal) and for the demand pools grow by; nil: time.Now. Tests
	// move it by days.
	Clock func() time.Time
}

// Controller is safe for concurrent use.
type Controller struct {
	opts     Options
	log      *slog.Logger
	recorder *ledger.Recorder // ledger.go
	retained *ledger.Retention
	cfg      config.Config

	mu      sync.Mutex
	entries map[string]*entry

	snaps    snapState          // snapshot bookkeeping (snapshots.go)
	pools    *pools.State       // warm pools' bookkeeping (internal/controller/warmpools tends them)
	slots    createSlots        // creates starting at once, per caller (createslots.go)
	adm      admissionState     // policy, quotas and runtime probes (admission.go, info.go)
	reaps    reclaimer          // files of destroyed sandboxes removed later (reclaim.go)
	events   events.Hub         // sandbox changes and usage for event streams (events.go)
	stats    stats.Ring         // the last hour's figures (stats.go)
	memOK    memimage.Verified  // memory image files hashed unchanged (hibernate.go, memsnapshot.go)
	procs    *processes.Service // background processes, beneath the core (processes.go)
	sessions *sessions.Service  // shell sessions, beneath the core (processes.go)
	terms    *terminals.Service // terminals of every sandbox, beneath the core (processes.go)

	secretsMu sync.Mutex // secret deletion vs injection rules naming it (secrets.go)

	stopIdle chan struct{}
	idleDone chan struct{}
	// lifetimeWake wakes lifetimeLoop (lifetime.go) when a lifetime
	// changes; lifetimeDone is closed when the loop has ended.
	lifetimeWake chan struct{}
	lifetimeDone chan struct{}

	// closing is closed by Close: goroutines that follow a sandbox's
	// processes and terminals stop without recording what a daemon
	// shutting down cut short.
	closing   chan struct{}
	closeOnce sync.Once
}

// entry is the owner of one sandbox: mu serialises its lifecycle steps.
type entry struct {
	mu       sync.Mutex
	agent    *client.Client
	activity atomic.Int64 // unix nanos of the last API use
	active   atomic.Int32 // execs in flight: a sandbox in use is never idle

	// The watcher of the container's current run (death.go): watchGen
	// and unwatch are under mu.
	watchGen uint64
	unwatch  context.CancelFunc
	death    atomic.Pointer[deathNote]

	// hibernated is the agent client closed by the last hibernation, and
	// successors maps each such client to the one that reached the same
	// processes after the restore, so followers of a process move on
	// (internal/controller/processes, hibernate.go). Under mu.
	hibernated *client.Client
	successors map[*client.Client]*client.Client
}

// current follows ag through the restores since it was closed: the client
// that reaches ag's processes now, or nil if they ended. Call under mu.
func (e *entry) current(ag *client.Client) *client.Client {
	for i := 0; ag != nil && ag != e.agent && i <= len(e.successors); i++ {
		ag = e.successors[ag]
	}
	if ag != e.agent {
		return nil
	}
	return ag
}

// New builds a controller; call Start before use.
func New(opts Options) (*Controller, error) {
	if opts.Store == nil || opts.Images == nil || len(opts.Backends) == 0 {
		return nil, errors.New("controller: store, images and at least one backend are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.IdleInterval <= 0 {
		opts.IdleInterval = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Ledger == nil {
		opts.Ledger = ledger.NewRecorder(opts.Store, opts.Logger)
	}
	if opts.Retention == nil {
		opts.Retention = ledger.NewRetention(opts.Store, opts.Config.LedgerRetention, opts.Logger)
	}
	c := &Controller{
		opts:     opts,
		log:      opts.Logger,
		recorder: opts.Ledger,
		retained: opts.Retention,
		cfg:      opts.Config,
		entries:  make(map[string]*entry),
		pools:    pools.New(),
		closing:  make(chan struct{}),
		// Buffered: a wake sent while the loop is busy is not lost.
		lifetimeWake: make(chan struct{}, 1),
	}
	c.events.SetUsageSource(c.usageSource())              // events.go
	c.procs = processes.New(c)                            // processes.go
	c.sessions = sessions.New(c, opts.Config.ExecTimeout) // processes.go
	c.terms = terminals.New(c, opts.Logger)               // processes.go
	return c, nil
}

// Runtimes lists the runtime names this controller can use, sorted.
func (c *Controller) Runtimes() []string {
	var names []string
	for n := range c.opts.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultImage is the image a create without one gets.
func (c *Controller) DefaultImage() string { return c.cfg.DefaultImage }

// Open reconciles records with the runtimes, then begins the idle and
// lifetime loops; Close ends them. (StartSandbox starts a sandbox.)
func (c *Controller) Open(ctx context.Context) error {
	if err := c.reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	c.stopIdle = make(chan struct{})
	c.idleDone = make(chan struct{})
	c.lifetimeDone = make(chan struct{})
	go c.idleLoop()
	go c.lifetimeLoop()
	return nil
}

// Close stops the idle loop and drops agent connections. Sandboxes keep
// running: a daemon restart re-adopts them.
func (c *Controller) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
	if c.stopIdle != nil {
		close(c.stopIdle)
		<-c.idleDone
		<-c.lifetimeDone
	}
	if !c.waitReclaims(teardownTimeout) {
		c.log.Warn("files of destroyed sandboxes are still being removed; the next start finishes it")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.agent != nil {
			e.agent.Close()
		}
	}
}

// untilClose is a context that ends when the controller closes, for work
// that outlives the request that started it.
func (c *Controller) untilClose() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(System(context.Background()))
	stop := make(chan struct{})
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-stop:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(stop) }); cancel() }
}

// closed says whether Close has been called.
func (c *Controller) closed() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

func (c *Controller) entry(id string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		e = &entry{}
		e.activity.Store(time.Now().UnixNano())
		c.entries[id] = e
	}
	return e
}

func (c *Controller) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[id]; ok && e.agent != nil {
		e.agent.Close()
	}
	delete(c.entries, id)
}

// resolve finds a live sandbox record by id or name that ctx's caller may
// see; one it may not is not found, exactly like one that does not exist.
// An id wins over a name; a name is resolved by pickNamed.
func (c *Controller) resolve(ctx context.Context, ref string) (*store.Sandbox, error) {
	if !validRef(ref) {
		return nil, errdefs.Invalid("%q is not a valid sandbox id or name", ref)
	}
	if idRE.MatchString(ref) {
		rec, err := c.opts.Store.GetSandbox(ctx, ref)
		if err == nil && rec.State != api.StateDestroyed && visible(ctx, rec.KeyID) {
			return rec, nil
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
	}
	held, err := c.opts.Store.SandboxesByName(ctx, ref)
	if err != nil {
		return nil, err
	}
	return pickNamed(ctx, "sandbox", ref, held, func(s *store.Sandbox) string { return s.KeyID })
}

func (c *Controller) backend(name string) (runtime.Backend, error) {
	b, ok := c.opts.Backends[name]
	if !ok {
		return nil, fmt.Errorf("runtime %q is not available on this host (available: %v): %w", name, c.Runtimes(), errdefs.ErrFailedPrecondition)
	}
	return b, nil
}

// runtimeDesc names a runtime in an error saying what it cannot do, with
// the backend when it is not this host's: "runtime runc on the kubernetes
// backend".
func (c *Controller) runtimeDesc(name string) string {
	if c.cfg.Backend == config.BackendKubernetes {
		return "runtime " + name + " on the kubernetes backend"
	}
	return "runtime " + name
}

// setState moves rec to state `to`, persisting it with a reason in the
// state history. Reconciliation passes force to record what it found.
func (c *Controller) setState(ctx context.Context, rec *store.Sandbox, to, reason string, force bool) error {
	if !force {
		if err := checkTransition(rec.ID, rec.State, to); err != nil {
			return err
		}
	}
	from := rec.State
	rec.State = to
	if to == api.StateError {
		rec.ErrorReason = reason
	} else if to != api.StateDestroying && to != api.StateDestroyed {
		rec.ErrorReason = ""
	}
	ctx = context.WithoutCancel(ctx)
	// The history and the ledger first: a caller who reads the new state
	// finds its reason there too (a death's reason was read from the
	// state before its history row was written, under load).
	if err := c.opts.Store.AppendStateChange(ctx, store.StateChange{
		SandboxID: rec.ID, From: from, To: to, Reason: reason, At: time.Now().UTC(),
	}); err != nil {
		c.log.Warn("record state change", "sandbox", rec.ID, "err", err)
	}
	c.recordTransition(ctx, rec, from, to, reason)
	if err := c.opts.Store.UpdateSandbox(ctx, rec); err != nil {
		return fmt.Errorf("save sandbox %s: %w", rec.ID, err)
	}
	c.changed(rec, from, to, reason)
	c.log.Info("sandbox state", "sandbox", rec.ID, "from", from, "to", to, "reason", reason)
	return nil
}

// touch records API activity for the idle timer.
func (c *Controller) touch(id string) {
	c.entry(id).activity.Store(time.Now().UnixNano())
}

func (c *Controller) toAPI(rec *store.Sandbox) *api.Sandbox {
	s := &api.Sandbox{
		ID:             rec.ID,
		Name:           rec.Name,
		State:          rec.State,
		ErrorReason:    rec.ErrorReason,
		Image:          rec.Image,
		ImageDigest:    rec.ImageDigest,
		Runtime:        rec.Runtime,
		Resources:      rec.Resources,
		Env:            rec.Env,
		Labels:         rec.Labels,
		KeepAlive:      rec.KeepAlive,
		CreatedAt:      rec.CreatedAt,
		UpdatedAt:      rec.UpdatedAt,
		LastActivityAt: rec.LastActivityAt,
		FromSnapshot:   rec.SnapshotID,
		OnIdle:         rec.OnIdle,
		CreatedBy:      rec.KeyID,
		Network:        c.networkOf(rec.ID),
	}
	if rec.SleepAfter > 0 {
		s.SleepAfter = rec.SleepAfter.String()
	}
	if rec.Timeout > 0 {
		s.Timeout = rec.Timeout.String()
		exp := rec.CreatedAt.Add(rec.Timeout)
		s.ExpiresAt = &exp
	}
	c.mu.Lock()
	if e, ok := c.entries[rec.ID]; ok {
		if t := time.Unix(0, e.activity.Load()).UTC(); t.After(s.LastActivityAt) {
			s.LastActivityAt = t
		}
	}
	c.mu.Unlock()
	return s
}
