package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Item names, in the order a full run measures them.
const (
	ItemDo        = "do"
	ItemExec      = "exec"
	ItemFirstExec = "first-exec"
	ItemBurst     = "burst"
	ItemIdle      = "idle"
)

// AllItems is every measurement, in run order.
var AllItems = append([]string{ItemDo, ItemExec, ItemFirstExec, ItemBurst, ItemIdle}, FeatureItems...)

// Options configures one benchmark run against a running daemon.
type Options struct {
	// Paddock is the paddock executable (for `paddock do`).
	Paddock string
	// Socket is the daemon's API socket.
	Socket string
	// URL is the daemon's TCP listener, if it has one: items that need a
	// second caller make an API key and use it there ("" skips them).
	URL string
	// StateDir is the daemon's state directory: runc exec reaches the
	// daemon's containers through its runtime state below it.
	StateDir string
	// ImagesDirs are where image layers may be, tried in order.
	ImagesDirs []string
	// WorkDir holds the baselines' bundles and runc state; it must exist.
	WorkDir string
	// DaemonPid, when known, lets the report give the daemon's own memory.
	DaemonPid int
	// OwnDaemon says the daemon is private to this run, so every sandbox
	// in it may be removed at the end.
	OwnDaemon bool

	Iterations  int // default 30
	Warmup      int // default 3
	Concurrency int // default 50
	IdleSamples int // default 3
	// SnapshotGiB adds a 1 GiB snapshot to the snapshot item.
	SnapshotGiB bool
	// Items selects measurements; default AllItems.
	Items  []string
	Logger *slog.Logger
}

// Suite runs the measurements.
type Suite struct {
	o      Options
	log    *slog.Logger
	c      *paddock.Client
	runc   Runc // baselines' own runc state
	prunc  Runc // the daemon's runc state, for runc exec into sandboxes
	prunsc Runc // the daemon's runsc state, for finding its processes
	podman Podman
	label  string
	seq    atomic.Int64
	images map[string]string // image name -> layer dir
}

// runLabel marks every sandbox this harness creates, so leftovers can be
// found and removed even on a shared daemon.
const runLabel = "paddock-bench"

// NewSuite checks the options and fills defaults.
func NewSuite(o Options) (*Suite, error) {
	if o.Socket == "" || o.StateDir == "" || o.WorkDir == "" {
		return nil, errors.New("bench: socket, state dir and work dir are required")
	}
	if o.Iterations <= 0 {
		o.Iterations = 30
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 50
	}
	if o.IdleSamples <= 0 {
		o.IdleSamples = 3
	}
	if len(o.Items) == 0 {
		o.Items = AllItems
	}
	for _, it := range o.Items {
		if !slices.Contains(AllItems, it) {
			return nil, fmt.Errorf("bench: unknown item %q (want one of %v)", it, AllItems)
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Suite{
		o:      o,
		log:    log,
		c:      &paddock.Client{Socket: o.Socket},
		runc:   Runc{Root: filepath.Join(o.WorkDir, "runc")},
		prunc:  Runc{Root: filepath.Join(o.StateDir, "runtime", "runc", "state")},
		prunsc: Runc{Binary: config.RunscFromEnv(os.Getenv), Root: filepath.Join(o.StateDir, "runtime", "runsc", "state")},
		label:  fmt.Sprintf("%d-%d", os.Getpid(), time.Now().Unix()),
		images: map[string]string{},
	}, nil
}

// Run measures every selected item and returns the report (without
// machine information, which the caller adds).
func (s *Suite) Run(ctx context.Context) (*Report, error) {
	start := time.Now()
	r := &Report{Iterations: s.o.Iterations, Warmup: s.o.Warmup}
	// Other work on the machine moves absolute figures (less so ratios);
	// the load average says how busy it was.
	loadStart := loadAvg()
	defer s.cleanup(context.WithoutCancel(ctx))

	for _, name := range []string{"busybox", "base"} {
		dir, err := s.layer(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		s.images[name] = dir
	}
	if h, err := s.c.Health(ctx); err == nil {
		r.Notes = append(r.Notes, fmt.Sprintf("Daemon runtimes: %v.", h.Runtimes))
	}
	for _, it := range s.o.Items {
		if ctx.Err() != nil {
			break
		}
		s.log.Info("measuring", "item", it)
		switch it {
		case ItemDo:
			r.Comparisons = append(r.Comparisons,
				s.measureDo(ctx, "do-busybox", "busybox", []string{"true"}, []string{"/bin/true"}),
				s.measureDo(ctx, "do-base", "base", []string{"python3", "-c", "pass"}, []string{"/usr/bin/python3", "-c", "pass"}))
		case ItemExec:
			r.Comparisons = append(r.Comparisons, s.measureExec(ctx))
		case ItemFirstExec:
			r.Comparisons = append(r.Comparisons,
				s.measureFirstExec(ctx, "first-exec-busybox", "busybox"),
				s.measureFirstExec(ctx, "first-exec-base", "base"))
		case ItemBurst:
			r.Bursts = append(r.Bursts, s.measureBurst(ctx), s.measureRuncBurst(ctx))
		case ItemPoolBurst:
			bs, fs := s.measurePoolBurst(ctx)
			r.Bursts, r.Figures = append(r.Bursts, bs...), append(r.Figures, fs...)
		case ItemIdle:
			r.Idle = append(r.Idle, s.measureIdle(ctx, api.RuntimeRunc), s.measureIdle(ctx, api.RuntimeGVisor))
			if s.o.DaemonPid > 0 {
				if pm, err := ReadProcMem(s.o.DaemonPid); err == nil {
					r.DaemonRSSKiB = pm.RSSKiB
				}
			}
		case ItemSession:
			r.Comparisons = append(r.Comparisons, s.measureSession(ctx))
		case ItemProcPort:
			r.Comparisons = append(r.Comparisons, s.measureProcPort(ctx))
		case ItemPreview:
			cs, fs := s.measurePreview(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemContext:
			r.Comparisons = append(r.Comparisons, s.measureContext(ctx))
		case ItemPool:
			cs, fs := s.measurePool(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemSnapshot:
			cs, fs := s.measureSnapshots(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemNetwork:
			r.Comparisons = append(r.Comparisons, s.measureNetwork(ctx), s.measureNetworkGVisor(ctx))
		case ItemProxy:
			cs, fs := s.measureProxy(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemGVisor:
			r.Comparisons = append(r.Comparisons, s.measureGVisor(ctx)...)
		case ItemMemory:
			cs, fs := s.measureMemory(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemConsole:
			cs, fs := s.measureConsole(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemUserns:
			r.Comparisons = append(r.Comparisons, s.measureUserns(ctx))
		case ItemWorkspace:
			cs, fs := s.measureWorkspace(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		case ItemImages:
			cs, fs := s.measureImages(ctx)
			r.Comparisons, r.Figures = append(r.Comparisons, cs...), append(r.Figures, fs...)
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("Load average (1, 5, 15 min) at the start: %s; at the end: %s.", loadStart, loadAvg()))
	r.Targets = Targets(r)
	r.DurationS = time.Since(start).Round(time.Second).Seconds()
	return r, ctx.Err()
}

// layer makes sure the daemon has image name and finds its layer on disk.
func (s *Suite) layer(ctx context.Context, name string) (string, error) {
	bctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	img, err := EnsureImage(bctx, s.c, name)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, d := range s.o.ImagesDirs {
		dir, err := LayerDir(d, img.Digest)
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// id returns a fresh container id for a baseline container.
func (s *Suite) id(kind string) string {
	return fmt.Sprintf("bench-%s-%d-%d", kind, os.Getpid(), s.seq.Add(1))
}

// bundle writes a baseline bundle for image with args.
func (s *Suite) bundle(ctx context.Context, image string, args ...string) (*Bundle, error) {
	dir := filepath.Join(s.o.WorkDir, "bundles", fmt.Sprintf("%s-%d", image, s.seq.Add(1)))
	return WriteBundle(ctx, BundleOptions{Dir: dir, Rootfs: s.images[image], Args: args})
}

// create makes a labelled sandbox.
func (s *Suite) create(ctx context.Context, image, rt string) (*api.Sandbox, error) {
	return s.c.Create(ctx, api.CreateSandboxRequest{
		Image: image, Runtime: rt, KeepAlive: true,
		Labels: map[string]string{runLabel: s.label},
	})
}

// destroy removes a sandbox with its own deadline, whatever ctx says.
func (s *Suite) destroy(ctx context.Context, id string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := s.c.Delete(dctx, id)
	if errors.Is(err, paddock.ErrNotFound) {
		return nil
	}
	return err
}

// execTrue runs `true` in a sandbox and insists that it succeeded.
func (s *Suite) execTrue(ctx context.Context, id string) error {
	res, err := s.c.Exec(ctx, id, paddock.ExecOptions{Cmd: []string{"true"}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("true exited %d", res.ExitCode)
	}
	return nil
}

// cleanup removes what the run left: sandboxes (all of them when the
// daemon is ours, else those with this run's label) and baseline
// containers in the harness's own runc state.
func (s *Suite) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var labels map[string]string
	if !s.o.OwnDaemon {
		labels = map[string]string{runLabel: s.label}
	}
	if list, err := s.c.List(ctx, labels); err == nil {
		for _, sb := range list {
			if sb.State == api.StateDestroyed {
				continue
			}
			s.log.Info("removing leftover sandbox", "sandbox", sb.ID)
			if err := s.destroy(ctx, sb.ID); err != nil {
				s.log.Error("remove leftover sandbox", "sandbox", sb.ID, "err", err)
			}
		}
	}
	ents, _ := os.ReadDir(s.runc.Root)
	for _, e := range ents {
		if e.IsDir() {
			if err := s.runc.Delete(ctx, e.Name()); err != nil {
				s.log.Error("remove leftover baseline container", "container", e.Name(), "err", err)
			}
		}
	}
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := readBounded("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
