package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// paddockBinary is $PADDOCK_BIN, else a static binary built from this
// checkout once per test run (a stale or cgo-linked bin/paddock would
// measure the wrong thing, or fail inside a sandbox's empty root).
func paddockBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("PADDOCK_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			tb.Fatal(err)
		}
		return abs
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "paddock-bench-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "paddock")
		cmd := exec.Command("../scripts/build.sh", builtBin) // as `make build` does
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return builtBin
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// startDaemon starts a private daemon for one test or benchmark and stops
// it (after removing its sandboxes) when that ends.
func startDaemon(tb testing.TB) *Daemon {
	tb.Helper()
	needRoot(tb)
	needTool(tb, "runc")
	bin := paddockBinary(tb)
	images := os.Getenv("PADDOCK_IMAGES_DIR")
	if images == "" {
		images = filepath.Join(tb.TempDir(), "images")
	}
	state, err := os.MkdirTemp("", "pbt-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := RemoveAllUnmounted(state); err != nil {
			tb.Error(err)
		}
	})
	logf, err := os.Create(filepath.Join(state, "daemon.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { logf.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := StartDaemon(ctx, DaemonOptions{Binary: bin, StateDir: filepath.Join(state, "s"), ImagesDir: images, Log: logf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if list, err := d.Client.List(ctx, nil); err == nil {
			for _, sb := range list {
				if err := d.Client.Delete(ctx, sb.ID); err != nil {
					tb.Errorf("delete sandbox %s: %v", sb.ID, err)
				}
			}
		}
		if err := d.Stop(ctx); err != nil {
			tb.Errorf("stop daemon: %v", err)
		}
	})
	return d
}

// runningSandbox creates a busybox sandbox on runc and removes it at the end.
func runningSandbox(tb testing.TB, c *paddock.Client) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := EnsureImage(ctx, c, "busybox"); err != nil {
		tb.Fatal(err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeRunc, KeepAlive: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Delete(ctx, sb.ID); err != nil {
			tb.Errorf("delete sandbox: %v", err)
		}
	})
	return sb.ID
}

// TestSuiteAgainstDaemon runs the harness once, with one iteration of each
// measurement, against a real daemon: every variant must produce its
// sample and nothing may be left behind. It checks counts, never times.
func TestSuiteAgainstDaemon(t *testing.T) {
	d := startDaemon(t)
	s, err := NewSuite(Options{
		Paddock: paddockBinary(t), Socket: d.Socket, StateDir: d.StateDir, ImagesDirs: d.ImagesDirs,
		WorkDir: t.TempDir(), DaemonPid: d.Pid(), OwnDaemon: true,
		Iterations: 1, Warmup: 0, Concurrency: 3, IdleSamples: 1,
		Items: []string{ItemDo, ItemExec, ItemBurst, ItemIdle, ItemSession, ItemPool},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// do (busybox, base), exec, session, pool (first exec, claim).
	if len(r.Comparisons) != 6 {
		t.Fatalf("got %d comparisons, want 6", len(r.Comparisons))
	}
	if len(r.Figures) != 1 || r.Figures[0].Error != "" || r.Figures[0].Value <= 0 {
		t.Errorf("pool refill figure: %+v", r.Figures)
	}
	for _, c := range r.Comparisons {
		for _, se := range c.Series {
			if se.Name == "podman run" && se.Summary.N == 0 {
				t.Logf("%s: podman produced nothing here: %s", c.ID, firstNonEmpty(se.Disabled, se.FirstError))
				continue
			}
			if se.Summary.N != 1 || se.Summary.Errors != 0 {
				t.Errorf("%s / %s: n=%d errors=%d (%s)", c.ID, se.Name, se.Summary.N, se.Summary.Errors,
					firstNonEmpty(se.Disabled, se.FirstError))
			}
		}
	}
	for _, b := range r.Bursts {
		if b.Summary.N != 3 || b.Summary.Errors != 0 {
			t.Errorf("%s: n=%d errors=%d (%s)", b.ID, b.Summary.N, b.Summary.Errors, b.FirstError)
		}
	}
	for _, x := range r.Idle {
		if x.Runtime == api.RuntimeGVisor && x.Error != "" {
			t.Logf("gvisor idle not measured here: %s", x.Error)
			continue
		}
		if x.Error != "" || x.RSSKiB <= 0 || len(x.Procs) == 0 {
			t.Errorf("idle %s: %+v", x.Runtime, x)
		}
	}
	list, err := d.Client.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		if sb.State != api.StateDestroyed {
			t.Errorf("sandbox %s (%s) left behind", sb.ID, sb.State)
		}
	}
}

// BenchmarkExecRoundTrip mirrors the harness's exec figure: `true` in a
// running sandbox through the SDK, and through runc exec into the same
// container.
func BenchmarkExecRoundTrip(b *testing.B) {
	d := startDaemon(b)
	id := runningSandbox(b, d.Client)
	ctx := context.Background()
	b.Run("paddock-sdk", func(b *testing.B) {
		for b.Loop() {
			res, err := d.Client.Exec(ctx, id, paddock.ExecOptions{Cmd: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
		}
	})
	b.Run("runc-exec", func(b *testing.B) {
		r := Runc{Root: filepath.Join(d.StateDir, "runtime", "runc", "state")}
		for b.Loop() {
			if err := r.Exec(ctx, id, "true"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOneShot mirrors the harness's first figure for busybox:
// `paddock do -- true` against a foreground `runc run` on the same layer.
func BenchmarkOneShot(b *testing.B) {
	d := startDaemon(b)
	ctx := context.Background()
	img, err := EnsureImage(ctx, d.Client, "busybox")
	if err != nil {
		b.Fatal(err)
	}
	var layer string
	for _, dir := range d.ImagesDirs {
		if l, err := LayerDir(dir, img.Digest); err == nil {
			layer = l
			break
		}
	}
	if layer == "" {
		b.Fatalf("layer of %s not found", img.Digest)
	}
	bin := paddockBinary(b)
	b.Run("paddock-do", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(bin, "do", "--image", "busybox", "--", "true")
			cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.Socket)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("paddock do: %v: %s", err, out)
			}
		}
	})
	b.Run("runc-run", func(b *testing.B) {
		work := b.TempDir()
		bundle, err := WriteBundle(ctx, BundleOptions{Dir: filepath.Join(work, "b"), Rootfs: layer, Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		r := Runc{Root: filepath.Join(work, "runc")}
		i := 0
		for b.Loop() {
			i++
			if err := r.Run(ctx, bundle, fmt.Sprintf("benchrun-%d-%d", os.Getpid(), i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestMain(m *testing.M) {
	ServeFUSEIfAsked() // the FUSE loopback's server, when started by TestFUSELoopback
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
