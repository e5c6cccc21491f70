// Package controllertest builds a real controller for tests of the packages
// above it (the controller's own, the HTTP server's): a SQLite store in a
// temp dir, fixed images, and processbackend as its only runtime, so
// sandboxes run the real agent as plain child processes, without root.
// Those sandboxes isolate nothing; see processbackend. The test binary's
// TestMain must call processbackend.RunAgentIfChild.
package controllertest

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/warmpools"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// Image is the one image Images holds, and the default image.
const Image = "busybox"

// Images resolves fixed images by name or digest; processbackend mounts
// no layers, so they have none.
type Images map[string]*image.Image

// Resolve implements controller.Images.
func (m Images) Resolve(_ context.Context, ref string) (*image.Image, error) {
	for _, img := range m {
		if img.Name == ref || img.Digest == ref {
			return img, nil
		}
	}
	return nil, errdefs.NotFound("image %q", ref)
}

// Ensure implements controller.Images: nothing is ever built.
func (m Images) Ensure(ctx context.Context, name string, _ image.Progress) (*image.Image, error) {
	return m.Resolve(ctx, name)
}

// List implements the server's Images.
func (m Images) List(context.Context) ([]*image.Image, error) {
	out := make([]*image.Image, 0, len(m))
	for _, img := range m {
		out = append(out, img)
	}
	return out, nil
}

// Build implements the server's Images: the fixed images are all there is.
func (m Images) Build(ctx context.Context, name string, _ image.Progress) (*image.Image, error) {
	return m.Resolve(ctx, name)
}

// Options adjust the controller; zero values are fine.
type Options struct {
	// Backend configures the processbackend (Dir is set by ForTest).
	Backend processbackend.Options
	// Config changes the default config (its StateDir is a temp dir).
	Config func(*config.Config)
	// Wrap, if set, gives the controller a backend around the
	// processbackend (one that adds an optional interface, say).
	Wrap func(*processbackend.Backend) runtime.Backend
	// Clock, if set, is the controller's clock (controller.Options.Clock).
	Clock func() time.Time
}

// Env is what New built.
type Env struct {
	Controller *controller.Controller
	// Pools keeps the controller's warm pools; its loop runs only where a
	// test starts it (Pools.Run).
	Pools   *warmpools.Service
	Backend *processbackend.Backend
	Store   store.Store
	Images  Images
}

// PutTemplate records a template name of Image, with no build steps, as
// build buildID.
func (e *Env) PutTemplate(ctx context.Context, t testing.TB, name, buildID string) {
	t.Helper()
	img := e.Images[Image]
	if err := e.Store.PutTemplate(ctx, &store.Template{Name: name, Image: img.Name, ImageDigest: img.Digest, BuildID: buildID}); err != nil {
		t.Fatal(err)
	}
}

// Ledger returns the entries of the ledger of the sandbox ref names, as
// ctx's caller sees it, oldest first.
func (e *Env) Ledger(ctx context.Context, t testing.TB, ref string) []store.LedgerEntry {
	t.Helper()
	id, _, err := e.Controller.RecordedSandbox(ctx, ref)
	if err != nil {
		t.Fatalf("ledger of %s: %v", ref, err)
	}
	entries, err := e.Store.Ledger(ctx, id, 0, 10000)
	if err != nil {
		t.Fatalf("ledger of %s: %v", ref, err)
	}
	return entries
}

// New returns a started controller whose only runtime, runc, is a
// processbackend; t's cleanup closes it and destroys every sandbox.
func New(t *testing.T, opts Options) *Env {
	t.Helper()
	if opts.Backend.StopGrace == 0 {
		opts.Backend.StopGrace = 5 * time.Second
	}
	b := processbackend.ForTest(t, opts.Backend)
	dir := t.TempDir()
	st, err := sqlite.Open(controller.System(context.Background()), filepath.Join(dir, "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	cfg.StateDir = dir
	cfg.DefaultImage = Image
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	imgs := Images{Image: {Name: Image, Digest: "sha256:" + strings.Repeat("b", 64)}}
	var rb runtime.Backend = b
	if opts.Wrap != nil {
		rb = opts.Wrap(b)
	}
	c, err := controller.New(controller.Options{
		Store:    st,
		Images:   imgs,
		Backends: map[string]runtime.Backend{api.RuntimeRunc: rb},
		Config:   cfg,
		Logger:   Logger(t),
		Clock:    opts.Clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Open(controller.System(context.Background())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // runs before the backend's cleanup stops the agents
	pools := warmpools.New(warmpools.Options{Core: c, Store: st, Logger: Logger(t)})
	return &Env{Controller: c, Pools: pools, Backend: b, Store: st, Images: imgs}
}

// Logger logs to t, so a failure shows the story.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
