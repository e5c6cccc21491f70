package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// testRegistry is an OCI registry on loopback that wants user:secret,
// counting the requests that write (uploads and manifests) and all.
type testRegistry struct {
	host          string
	writes, total atomic.Int64
	mu            sync.Mutex
	blobs         []string // digests of the blobs uploaded, in order
}

func (r *testRegistry) uploaded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.blobs)
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.total.Add(1)
		if u, p, ok := req.BasicAuth(); !ok || u != "user" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
			r.writes.Add(1)
			if d := req.URL.Query().Get("digest"); d != "" {
				r.mu.Lock()
				r.blobs = append(r.blobs, d)
				r.mu.Unlock()
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// pushFixture is a directory holding a stand-in agent binary (returned)
// and an empty layer directory "l".
func pushFixture(t *testing.T) (dir, agentBin string) {
	t.Helper()
	dir = t.TempDir()
	agentBin = filepath.Join(dir, "agent")
	if err := os.WriteFile(agentBin, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "l"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, agentBin
}

func writeCreds(t *testing.T, host, user, pass string) authn.Keychain {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	// "auth" is base64 of user:pass, as `docker login` writes it.
	auth := map[string]string{"user:secret": "dXNlcjpzZWNyZXQ=", "user:wrong": "dXNlcjp3cm9uZw=="}[user+":"+pass]
	if err := os.WriteFile(path, []byte(`{"auths":{"http://`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := RegistryConfigKeychain(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestPusherPushesOnce pushes an image and a second one stacked on it:
// the registry holds both, the agent in a layer of its own and the
// entrypoint running it; the shared layer and the agent are sent once;
// pushing again sends nothing, and a new Pusher (a restarted daemon) only
// asks whether the image is there.
func TestPusherPushesOnce(t *testing.T) {
	ctx := context.Background()
	reg := newTestRegistry(t)
	dir := t.TempDir()
	base, top := filepath.Join(dir, "base"), filepath.Join(dir, "top")
	for _, d := range []string{base, top} {
		if err := os.MkdirAll(filepath.Join(d, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "etc", "base"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "etc", "top"), []byte(strings.Repeat("top\n", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	agentBin := filepath.Join(dir, "agent")
	if err := os.WriteFile(agentBin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	kc := writeCreds(t, reg.host, "user", "secret")
	newPusher := func() *Pusher {
		p, err := NewPusher(PusherOptions{Prefix: reg.host + "/paddock", AgentBinary: agentBin, TempDir: dir, Auth: kc})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newPusher()
	img1 := &Image{Name: "base", Digest: "sha256:" + strings.Repeat("1", 64), Layers: []string{base}}
	img2 := &Image{Name: "template-t", Digest: "sha256:" + strings.Repeat("2", 64), Layers: []string{base, top}}
	if err := p.Push(ctx, img1); err != nil {
		t.Fatal(err)
	}
	first := reg.uploaded()
	if len(first) != 3 {
		t.Fatalf("the first image uploaded %q; want its layer, the agent's and its config", first)
	}
	if err := p.Push(ctx, img2); err != nil {
		t.Fatal(err)
	}
	// The second image adds its own layer and config; the base layer and
	// the agent's are in the registry already.
	if second := reg.uploaded()[len(first):]; len(second) != 2 || slices.Contains(first, second[0]) || slices.Contains(first, second[1]) {
		t.Errorf("the stacked image uploaded %q after %q; want its own layer and config only", second, first)
	}

	ref, err := name.NewTag(p.Ref(img2))
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, remote.WithAuthFromKeychain(kc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if ep := strings.Join(cfg.Config.Entrypoint, " "); ep != AgentPathInImage+" agent --listen :49983" {
		t.Errorf("entrypoint %q", ep)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 3 {
		t.Fatalf("layers %d, %v; want base, top and the agent", len(layers), err)
	}
	want := [][]string{{"./", "etc/", "etc/base"}, {"./", "etc/", "etc/top"}, {".paddock/", ".paddock/bin/", ".paddock/bin/paddock"}}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
		}
		rc.Close()
		if strings.Join(names, " ") != strings.Join(want[i], " ") {
			t.Errorf("layer %d holds %q, want %q", i, names, want[i])
		}
	}

	before := reg.total.Load()
	if err := p.Push(ctx, img2); err != nil {
		t.Fatal(err)
	}
	if n := reg.total.Load() - before; n != 0 {
		t.Errorf("a second push of the same image made %d requests", n)
	}
	before, beforeWrites := reg.total.Load(), reg.writes.Load()
	if err := newPusher().Push(ctx, img2); err != nil {
		t.Fatal(err)
	}
	if n := reg.writes.Load() - beforeWrites; n != 0 {
		t.Errorf("a new pusher wrote %d times for an image the registry has", n)
	}
	t.Logf("a new pusher's check of a pushed image: %d requests", reg.total.Load()-before)

	// Layers whose digests are known are written again from their
	// directories when a registry lacks them: the same bytes, which the
	// registry checks against the digest.
	reg2 := newTestRegistry(t)
	p2, err := NewPusher(PusherOptions{Prefix: reg2.host, AgentBinary: agentBin, TempDir: dir, Auth: writeCreds(t, reg2.host, "user", "secret")})
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(p2.known, p.known)
	if err := p2.Push(ctx, img2); err != nil {
		t.Fatal(err)
	}
	if up := reg2.uploaded(); len(up) != 4 {
		t.Errorf("a registry without the image got %q; want three layers and the config", up)
	}
	for _, l := range layers {
		d, _ := l.Digest()
		if !slices.Contains(reg2.uploaded(), d.String()) {
			t.Errorf("layer %s written again differs", d)
		}
	}
}

// TestPusherRefusedCredentials: wrong credentials fail the push and say
// so, and nothing is marked pushed.
func TestPusherRefusedCredentials(t *testing.T) {
	reg := newTestRegistry(t)
	dir, agentBin := pushFixture(t)
	img := &Image{Name: "base", Digest: "sha256:" + strings.Repeat("3", 64), Layers: []string{filepath.Join(dir, "l")}}
	for _, kc := range []authn.Keychain{writeCreds(t, reg.host, "user", "wrong"), nil} {
		p, err := NewPusher(PusherOptions{Prefix: reg.host, AgentBinary: agentBin, TempDir: dir, Auth: kc})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Push(context.Background(), img)
		if !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "refused the credentials") {
			t.Errorf("push with bad credentials: %v", err)
		}
		if p.pushed[p.Ref(img)] {
			t.Error("a refused push was marked done")
		}
	}
}

// TestRegistryConfigKeychainBounds: a file that is not a credentials
// file, or too large, is refused with its name.
func TestRegistryConfigKeychainBounds(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"notjson": []byte("auths: yes"),
		"huge":    []byte(`{"auths":{"x":{"auth":"` + strings.Repeat("A", maxRegistryConfig) + `"}}}`),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := RegistryConfigKeychain(path); err == nil || !strings.Contains(err.Error(), "registry credentials") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := RegistryConfigKeychain(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestPusherCallerGivesUp: a create that gives up while the registry is
// slow gets its own error at once; the push goes on, and the next caller
// of the same image waits for it rather than pushing again.
func TestPusherCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	var manifests atomic.Int64
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") {
			<-release
			manifests.Add(1)
		}
		inner.ServeHTTP(w, req)
	}))
	defer srv.Close()
	dir, agentBin := pushFixture(t)
	p, err := NewPusher(PusherOptions{Prefix: strings.TrimPrefix(srv.URL, "http://"), AgentBinary: agentBin, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	img := &Image{Name: "slow", Digest: "sha256:" + strings.Repeat("4", 64), Layers: []string{filepath.Join(dir, "l")}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Push(ctx, img); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller that gave up: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the caller waited %s for a push it gave up on", d)
	}
	done := make(chan error, 1)
	go func() { done <- p.Push(context.Background(), img) }()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := manifests.Load(); n != 1 {
		t.Errorf("%d manifests written; want the one push", n)
	}
}

// TestPusherLayerCache: a pusher started again with the layer cache file
// knows the layers' digests without reading them; a cache whose digest
// for a layer is wrong (its files changed since) fails the registry's
// check once, and the push writes every layer anew and succeeds; a
// cache file that is not one is ignored.
func TestPusherLayerCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	layer := filepath.Join(dir, "layer")
	if err := os.MkdirAll(filepath.Join(layer, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "etc", "f"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agentBin := filepath.Join(dir, "agent")
	if err := os.WriteFile(agentBin, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "layers.json")
	img := &Image{Name: "cached", Digest: "sha256:" + strings.Repeat("5", 64), Layers: []string{layer}}
	newPusher := func(reg *testRegistry) *Pusher {
		p, err := NewPusher(PusherOptions{Prefix: reg.host, AgentBinary: agentBin, TempDir: dir, Auth: writeCreds(t, reg.host, "user", "secret"), LayerCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := newPusher(newTestRegistry(t)).Push(ctx, img); err != nil {
		t.Fatal(err)
	}
	p := newPusher(newTestRegistry(t))
	if len(p.known) != 2 {
		t.Fatalf("a pusher started again knows %d layers, want the image's and the agent's", len(p.known))
	}
	if err := p.Push(ctx, img); err != nil {
		t.Fatal(err)
	}

	// The layer changes under the cache's nose.
	if err := os.WriteFile(filepath.Join(layer, "etc", "f"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img2 := &Image{Name: "cached", Digest: "sha256:" + strings.Repeat("6", 64), Layers: []string{layer}}
	var logged strings.Builder
	stale := newPusher(newTestRegistry(t))
	stale.log = slog.New(slog.NewTextHandler(&logged, nil))
	if err := stale.Push(ctx, img2); err != nil {
		t.Fatalf("a push with a stale cache: %v", err)
	}
	if !strings.Contains(logged.String(), "writing them anew") {
		t.Errorf("the stale layer was not written anew:\n%s", logged.String())
	}

	if err := os.WriteFile(cache, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	p = newPusher(newTestRegistry(t))
	if len(p.known) != 0 {
		t.Errorf("a broken cache gave %d layers", len(p.known))
	}
	if err := p.Push(ctx, img2); err != nil {
		t.Fatal(err)
	}
}

// TestPusherUnpush: an image pushed and then unpushed is gone from the
// registry and is pushed again when asked; unpushing one the registry
// never had is no error; a registry that refuses deletions says so.
func TestPusherUnpush(t *testing.T) {
	ctx := context.Background()
	refuse := atomic.Bool{}
	var mu sync.Mutex
	var deletes []string
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodDelete {
			if refuse.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusMethodNotAllowed)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}`)
				return
			}
			mu.Lock()
			deletes = append(deletes, req.URL.Path)
			mu.Unlock()
		}
		inner.ServeHTTP(w, req)
	}))
	defer srv.Close()
	dir, agentBin := pushFixture(t)
	p, err := NewPusher(PusherOptions{Prefix: strings.TrimPrefix(srv.URL, "http://"), AgentBinary: agentBin, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	img := &Image{Name: "gone", Digest: "sha256:" + strings.Repeat("5", 64), Layers: []string{filepath.Join(dir, "l")}}
	tag, err := name.NewTag(p.Ref(img))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Unpush(ctx, img); err != nil {
		t.Fatalf("unpush of an image never pushed: %v", err)
	}
	if err := p.Push(ctx, img); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); err != nil {
		t.Fatalf("after the push: %v", err)
	}
	if err := p.Unpush(ctx, img); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); !notFound(err) {
		t.Fatalf("after the unpush, the registry still has it: %v", err)
	}
	// By digest first (the distribution API's way, which takes the tag
	// with it); this registry keeps the tag apart, so it goes next.
	mu.Lock()
	if len(deletes) == 0 || !strings.Contains(deletes[0], "/manifests/sha256:") {
		t.Errorf("deletes: %q, want the manifest's digest first", deletes)
	}
	mu.Unlock()
	// Pushed again, not taken for pushed already.
	if err := p.Push(ctx, img); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); err != nil {
		t.Fatalf("pushed again: %v", err)
	}
	refuse.Store(true)
	if err := p.Unpush(ctx, img); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "does not delete") {
		t.Fatalf("a registry that refuses deletions: %v", err)
	}
}
