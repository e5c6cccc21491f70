package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/image"
)

func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: runs containers with runc")
	}
}

func needTool(tb testing.TB, name string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		tb.Skipf("needs %s in PATH", name)
	}
}

// busyboxLayer builds a busybox image in a private store and returns its
// layer directory.
func busyboxLayer(tb testing.TB) string {
	tb.Helper()
	store, err := image.New(image.Options{Dir: filepath.Join(tb.TempDir(), "images")})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := store.Ensure(ctx, image.NameBusybox, nil)
	if err != nil {
		tb.Skipf("cannot build the busybox image here: %v", err)
	}
	if len(img.Layers) != 1 {
		tb.Fatalf("busybox image has %d layers, want 1", len(img.Layers))
	}
	got, err := LayerDir(store.Dir(), img.Digest)
	if err != nil {
		tb.Fatalf("LayerDir does not find the store's own layer: %v", err)
	}
	if got != img.Layers[0] {
		tb.Fatalf("LayerDir = %q, the store says %q", got, img.Layers[0])
	}
	return got
}

// snapshotTree lists every path under dir with its mode and size, to show
// that a baseline left the shared layer alone.
func snapshotTree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func assertSameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("image layer changed at %s: %q -> %q", p, before[p], v)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("image layer lost %s", p)
		}
	}
}

func TestWriteBundle(t *testing.T) {
	needTool(t, "runc")
	rootfs := t.TempDir()
	b, err := WriteBundle(context.Background(), BundleOptions{Dir: filepath.Join(t.TempDir(), "b"), Rootfs: rootfs, Args: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(b.Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"path": "` + rootfs + `"`, `"readonly": true`, `"RLIMIT_NOFILE"`, `"/bin/true"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	if strings.Contains(string(raw), `"terminal": true`) {
		t.Error("config.json asks for a terminal")
	}
	tests := []struct {
		name string
		o    BundleOptions
	}{
		{"relative rootfs", BundleOptions{Dir: t.TempDir(), Rootfs: "rootfs", Args: []string{"x"}}},
		{"missing rootfs", BundleOptions{Dir: t.TempDir(), Rootfs: "/nonexistent/rootfs", Args: []string{"x"}}},
		{"no args", BundleOptions{Dir: t.TempDir(), Rootfs: rootfs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := WriteBundle(context.Background(), tt.o); err == nil {
				t.Fatal("WriteBundle accepted bad options")
			}
		})
	}
}

func TestRuncBaseline(t *testing.T) {
	needRoot(t)
	needTool(t, "runc")
	layer := busyboxLayer(t)
	before := snapshotTree(t, layer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := Runc{Root: filepath.Join(t.TempDir(), "runc")}
	work := t.TempDir()

	t.Run("run", func(t *testing.T) {
		b, err := WriteBundle(ctx, BundleOptions{Dir: filepath.Join(work, "true"), Rootfs: layer, Args: []string{"/bin/true"}})
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("benchtest-run-%d", os.Getpid())
		t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
		if err := r.Run(ctx, b, id); err != nil {
			t.Fatal(err)
		}
		bf, err := WriteBundle(ctx, BundleOptions{Dir: filepath.Join(work, "false"), Rootfs: layer, Args: []string{"/bin/false"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(ctx, bf, id+"-f"); err == nil {
			t.Fatal("runc run of /bin/false reported success")
		}
	})

	t.Run("detached, exec, memory", func(t *testing.T) {
		b, err := WriteBundle(ctx, BundleOptions{Dir: filepath.Join(work, "sleep"), Rootfs: layer, Args: []string{"sleep", "600"}})
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("benchtest-det-%d", os.Getpid())
		t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
		if err := r.RunDetached(ctx, b, id); err != nil {
			t.Fatal(err)
		}
		if err := r.Exec(ctx, id, "true"); err != nil {
			t.Fatal(err)
		}
		if err := r.Exec(ctx, id, "false"); err == nil {
			t.Fatal("runc exec of false reported success")
		}
		pid, err := r.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := CgroupProcs(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !contains(pids, pid) {
			t.Fatalf("cgroup of %d lists %v, not the container's init", pid, pids)
		}
		rss, _, procs := SumMem(pids)
		if rss <= 0 || len(procs) == 0 || procs[0].Comm != "sleep" {
			t.Fatalf("memory of the container: rss %d KiB, procs %+v", rss, procs)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := r.State(ctx, id); err == nil {
			t.Fatal("container still there after Delete")
		}
	})
	assertSameTree(t, before, snapshotTree(t, layer))
}

func TestPodmanBaseline(t *testing.T) {
	needRoot(t)
	needTool(t, "podman")
	layer := busyboxLayer(t)
	before := snapshotTree(t, layer)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var p Podman
	if err := p.Run(ctx, layer, "/bin/true"); err != nil {
		t.Skipf("podman cannot run containers here: %v", err)
	}
	if err := p.Run(ctx, layer, "/bin/false"); err == nil {
		t.Fatal("podman run of /bin/false reported success")
	}
	if err := p.Run(ctx, "relative", "/bin/true"); err == nil {
		t.Fatal("podman accepted a relative rootfs")
	}
	assertSameTree(t, before, snapshotTree(t, layer))
}

func TestRemoveAllUnmountedRefusesMounts(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	mp := filepath.Join(dir, "m")
	if err := os.MkdirAll(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mp).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mp).Run() })
	keep := filepath.Join(mp, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAllUnmounted(dir); err == nil {
		t.Fatal("removed a directory with a mount below it")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("file on the mount was touched: %v", err)
	}
}
