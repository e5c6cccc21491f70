// Package daemon wires Paddock's parts from one Config, serves the API, and
// shuts down in order. Shutting down leaves sandboxes running: the next
// start re-adopts them.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/agentbin"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/console"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/backups"
	"github.com/paddock-dev/paddock/internal/controller/codecontexts"
	"github.com/paddock-dev/paddock/internal/controller/forks"
	imagesvc "github.com/paddock-dev/paddock/internal/controller/images"
	"github.com/paddock-dev/paddock/internal/controller/ledgers"
	"github.com/paddock-dev/paddock/internal/controller/previews"
	secretsvc "github.com/paddock-dev/paddock/internal/controller/secrets"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/controller/warmpools"
	"github.com/paddock-dev/paddock/internal/controller/watches"
	wssvc "github.com/paddock-dev/paddock/internal/controller/workspaces"
	"github.com/paddock-dev/paddock/internal/e2b"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/network"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/oci"
	"github.com/paddock-dev/paddock/internal/secretstore"
	"github.com/paddock-dev/paddock/internal/server"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
	"github.com/paddock-dev/paddock/internal/workspace"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
)

// Version is set at build time with -ldflags "-X ...daemon.Version=...".
var Version = "dev"

// shutdownGrace is how long open requests (exec streams) get to finish
// when the daemon stops; the processes they run keep running in their
// sandboxes.
const shutdownGrace = 5 * time.Second

// imageStopGrace is how long an image build gets to stop cleanly (unmount
// its chroot) when the daemon stops.
const imageStopGrace = 10 * time.Second

// Run serves until ctx ends. ready, if not nil, is called once the API
// listens.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, ready func()) error {
	useFallbackRoots() // tlsroots.go
	// The daemon's own work (reconcile, retention, pools, metrics) acts as
	// the local caller; requests get theirs from their listener.
	ctx = controller.System(ctx)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("paddock serve must run as root: it creates containers, mounts and cgroups (try: sudo make run)")
	}
	// 0711 down to each runtime's directory: a sandbox in a user namespace
	// passes through them to its own directory (internal/runtime/oci's
	// userns.go); nothing in them can be listed.
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "runtime")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	unlock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()

	// Listen first: during the seconds the rest of the start takes, the
	// API answers 503 with a Retry-After instead of refusing connections
	// (starting.go).
	unixLn, err := listenUnix(cfg.Socket)
	if err != nil {
		return err
	}
	apiGate, tcpGate, previewGate := &gate{}, &gate{}, &gate{}
	servers := []*http.Server{{Handler: apiGate, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{unixLn}
	if cfg.Listen != "" {
		tcpLn, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			unixLn.Close()
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		servers = append(servers, &http.Server{Handler: tcpGate, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, tcpLn)
		log.Info("listening on TCP; API keys are required", "addr", tcpLn.Addr().String())
	}
	previewLn := listenPreview(&cfg, log.With("part", "preview"))
	if previewLn != nil {
		servers = append(servers, &http.Server{Handler: previewGate, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, previewLn)
	}
	errc := make(chan error, len(servers))
	for i := range servers {
		go func() { errc <- servers[i].Serve(listeners[i]) }()
	}
	defer func() {
		// Every return from here on, an early failure too, stops the
		// servers; a clean shutdown has already done so.
		for _, s := range servers {
			s.Close()
		}
		_ = os.Remove(cfg.Socket)
	}()

	st, err := sqlite.Open(ctx, cfg.DBPath(), log.With("part", "store"))
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	workspaces, err := workspace.Open(ctx, filepath.Join(cfg.StateDir, "workspaces.db"))
	if err != nil {
		return fmt.Errorf("open workspaces: %w", err)
	}
	defer workspaces.Close()
	// The js executor's child is this binary (cmd/paddock starts
	// wjs.ChildMain for this argument), by /proc/self/exe so an upgrade
	// of the file on disk cannot change what runs.
	workspaces.JSCommand = []string{"/proc/self/exe", wjs.ChildArg}
	workspaces.Logger = log.With("part", "workspaces")

	images, err := image.New(image.Options{Dir: cfg.ImagesDir(), Logger: log.With("part", "images")})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	agentBin, err := agentbin.Seal(cfg.BinDir())
	if err != nil {
		return fmt.Errorf("seal the agent binary: %w", err)
	}
	var backends map[string]runtime.Backend
	var probes []api.RuntimeInfo
	var pushImage func(context.Context, *image.Image) error
	var registry imagesvc.Registry // where images were pushed, or nil
	if cfg.Backend == config.BackendKubernetes {
		if kubeRuntimes == nil {
			return fmt.Errorf("this binary has no Kubernetes backend: `paddock serve` runs the one that has (internal/kubebin)")
		}
		names := make([]string, len(knownRuntimes))
		for i, rt := range knownRuntimes {
			names[i] = rt.api
		}
		agentID, err := image.AgentID(agentBin)
		if err != nil {
			return err
		}
		if backends, probes, err = kubeRuntimes(ctx, cfg, log, names, agentID); err != nil { // runtimes.go
			return err
		}
		pusher, err := imagePusher(cfg, images, agentBin, agentID, log) // runtimes.go
		if err != nil {
			return err
		}
		if pusher != nil {
			pushImage, registry = pusher.Push, pusher
		}
	} else {
		backends, probes = probeRuntimes(ctx, cfg, agentBin, log) // runtimes.go
	}
	defer closeBackends(backends) // runtimes.go
	if len(backends) == 0 {
		return errors.New("no container runtime works here: install runc (apt-get install runc) or runsc")
	}
	if _, ok := backends[cfg.DefaultRuntime]; !ok {
		return fmt.Errorf("the default runtime %q is not available here", cfg.DefaultRuntime)
	}

	snaps, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(cfg.StateDir, "snapshots"), Logger: log.With("part", "snapshots")})
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	// One ledger writer for the controller and for the parts made before
	// it that record (the egress proxy's refusals).
	recorder := ledger.NewRecorder(st, log.With("part", "ledger"))
	retention := ledger.NewRetention(st, cfg.LedgerRetention, log.With("part", "ledger"))
	secrets := secretstore.New(secretstore.Options{StateDir: cfg.StateDir, Store: st, Sandboxes: st})
	var nets *network.Manager
	if cfg.Backend == config.BackendLocal {
		// On a cluster, pods have the cluster's network; host network
		// namespaces and firewall rules mean nothing there.
		nets, err = network.Open(ctx, network.Options{
			StateDir: cfg.StateDir, Config: cfg.Network, Logger: log.With("part", "network"),
			Secrets: secrets, Record: recorder.Record,
		})
		if err != nil {
			return err
		}
	}
	var netOpt controller.Network
	var secOpt controller.Secrets
	if nets != nil {
		defer nets.Close()
		netOpt, secOpt = nets, secrets
	}
	if cfg.Backend == config.BackendKubernetes && cfg.Kubernetes.EgressProxy != "" {
		cnet, err := network.OpenCluster(network.ClusterOptions{
			StateDir: cfg.StateDir, Config: cfg.Network, Logger: log.With("part", "network"),
			Secrets: secrets, Record: recorder.Record, Listen: cfg.Kubernetes.EgressProxy,
			Apply: egressApplier(backends), // runtimes.go
			Relay: wire.EgressRelayAddr,    // each pod's agent relays to the proxy
		})
		if err != nil {
			return err
		}
		defer cnet.Close()
		netOpt, secOpt = cnet, secrets
	}
	ctrl, err := controller.New(controller.Options{
		Store: st, Images: images, Backends: backends, AgentBinary: agentBin, PushImage: pushImage,
		Config: cfg, Logger: log.With("part", "controller"), Snapshots: snaps,
		Network: netOpt, Secrets: secOpt, Ledger: recorder, Retention: retention,
	})
	if err != nil {
		return err
	}
	ctrl.SetRuntimeProbes(probes, oci.CgroupLayout(), Version)
	if err := loadPolicy(ctrl, cfg); err != nil { // runtimes.go
		return err
	}
	if err := ctrl.Open(ctx); err != nil {
		return err
	}
	defer ctrl.Close()
	go retention.Run(ctx)          // destroyed sandboxes' ledgers past their retention
	go ctrl.RunSnapshotExpiry(ctx) // expired snapshots and unused layers
	poolService := warmpools.New(warmpools.Options{Core: ctrl, Store: st, Logger: log.With("part", "pools")})
	go ctrl.RemoveOrphanBuilders(ctx) // build sandboxes an earlier run left mid-build
	go poolService.Run(ctx)           // warm pools: refill, stale replacement, cooldown
	go ctrl.RunStats(ctx)             // the last hour's figures, for the console

	bodies := httpbody.NewBudget(cfg.RequestBodyMemory) // one budget for every listener
	// Each API key's bodies hold at most half of it together, so one
	// tenant cannot take it all from the others; the unix socket's
	// operator is bounded by the whole budget only.
	bodies.SetShares(bodyShareKey, 0)
	wsService := wssvc.New(ctrl, workspaces, log.With("part", "workspaces"))
	bkService := backups.New(backups.Options{Core: ctrl, Store: st, TTL: cfg.BackupTTL, S3: cfg.BackupS3, Logger: log.With("part", "backups")})
	go bkService.RunRetention(ctx) // expired backups, orphaned archives
	imgService := imagesvc.New(imagesvc.Options{Core: ctrl, Store: st, Images: images, AgentBinary: agentBin, MaxPerKey: cfg.ImageImportMaxPerKey, Registry: registry, Logger: log.With("part", "images")})
	cxService := codecontexts.New(ctrl, cfg.ExecTimeout)
	secService := secretsvc.New(ctrl, secOpt, log.With("part", "secrets"))
	pvService := previews.New(previews.Options{Core: ctrl, Store: st, Listen: cfg.PreviewListen, Domain: cfg.PreviewDomain, Logger: log.With("part", "previews")})
	tplService := templates.New(templates.Options{Core: ctrl, Store: st, Logger: log.With("part", "templates")})
	forkService := forks.New(ctrl, log.With("part", "forks"))
	srv := server.New(server.Options{Controller: ctrl, Templates: tplService, Pools: poolService, Forks: forkService, Workspaces: wsService, Backups: bkService, Previews: pvService, Secrets: secService, ImageAdmin: imgService, Contexts: cxService, Watches: watches.New(ctrl), Ledgers: ledgers.New(ledgers.Options{Core: ctrl, Store: st}), Store: st, Images: images, Logger: log.With("part", "api"), Version: Version, MCP: true, Bodies: bodies})
	go srv.RunRetention(ctx) // expired Idempotency-Key results
	con := console.New()     // the web console, at / on both listeners
	apiGate.open(socketRouter(srv.Handler(false), con))
	if cfg.Listen != "" {
		// E2B's API and data plane share the TCP listener with /v1 and
		// /mcp, side by side (router.go).
		e2bHandler := e2b.New(e2b.Options{Controller: ctrl, Forks: forkService, Secrets: secService, Contexts: cxService, Templates: tplService, PullImage: pullFor(images, imgService), Context: ctx, Builds: st, Keys: st, HashKey: server.HashKey, DefaultNetwork: cfg.E2BDefaultNetwork, Logger: log.With("part", "e2b"), Bodies: bodies})
		go e2bHandler.RunMetrics(ctx) // getMetrics' history
		tcpGate.open(tcpRouter(srv.Handler(true), e2bHandler, con))
	}
	previewGate.open(srv.PreviewHandler(cfg.PreviewDomain))
	log.Info("paddock is serving", "socket", cfg.Socket, "state_dir", cfg.StateDir, "runtimes", ctrl.Runtimes(), "version", Version)
	if cfg.PrepareDefaultImage {
		go prepareImage(ctx, images, cfg.DefaultImage, log)
	}
	if ready != nil {
		ready()
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("shutting down; sandboxes keep running")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			s.Close()
		}
	}
	// An image build in progress stops with the daemon: mmdebstrap gets
	// SIGTERM and unmounts its chroot. Past the grace, the process exits
	// and the kernel ends the builder (parent-death signal, its own PID
	// namespace); the next start clears what it left.
	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), imageStopGrace)
	if err := images.Close(ictx); err != nil {
		log.Warn("image builds did not stop in time", "err", err)
	}
	icancel()
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// prepareImage builds the default image in the background so the first
// create does not wait for it; a failure is only logged (the first create
// tries again and reports it).
func prepareImage(ctx context.Context, images *image.Store, name string, log *slog.Logger) {
	if _, err := images.Resolve(ctx, name); err == nil {
		return
	}
	log.Info("building the default image in the background", "image", name)
	start := time.Now()
	_, err := images.Ensure(ctx, name, func(line string) { log.Debug("image build", "image", name, "line", line) })
	if err != nil {
		log.Error("default image build failed", "image", name, "err", err)
		return
	}
	log.Info("default image ready", "image", name, "took", time.Since(start).Round(time.Millisecond))
}

// listenUnix listens on the API socket, refusing to take over the socket of
// a daemon that still answers.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another paddock daemon is serving on %s", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The socket's permissions are its authentication: root and the
	// socket's group only.
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// lockStateDir holds an exclusive lock on the state directory for the
// daemon's lifetime: two daemons on one state would fight over sandboxes.
func lockStateDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state directory %s is in use by another paddock daemon", dir)
	}
	return func() { f.Close() }, nil
}

// bodyShareKey names the caller whose share of the request body budget a
// request counts against: its API key, or "" for the operator.
func bodyShareKey(ctx context.Context) string {
	if c := controller.Caller(ctx); c != api.CallerLocal {
		return c
	}
	return ""
}

// pullFor pulls an image for ctx's caller into images, as the API's pull
// does (the caller's owner and quota), for E2B's template builds.
func pullFor(images *image.Store, svc *imagesvc.Service) func(context.Context, string, *image.RegistryAuth, func(string)) (string, error) {
	return func(ctx context.Context, ref string, auth *image.RegistryAuth, progress func(string)) (string, error) {
		opts := svc.ImportOptions(ctx)
		opts.Progress, opts.Auth = progress, auth
		img, err := images.Pull(ctx, ref, opts)
		if err != nil {
			return "", err
		}
		return img.Digest, nil
	}
}
