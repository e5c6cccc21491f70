package image

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

func needBusybox(t *testing.T) {
	t.Helper()
	needRoot(t, "the busybox image has files owned by uid 1000")
	s := &Store{busybox: DefaultBusyboxPath}
	if _, err := s.checkBusybox(); err != nil {
		t.Skipf("needs busybox-static at %s: %v", DefaultBusyboxPath, err)
	}
}

func newTestStore(t *testing.T, dir string) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := New(Options{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// runIn runs a command chrooted into rootfs, as a sandbox would see it.
func runIn(t *testing.T, rootfs string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v in image: %v\n%s", argv, err, out)
	}
	return string(out)
}

func TestBusyboxBuildResolveList(t *testing.T) {
	needBusybox(t)
	ctx := context.Background()
	s := newTestStore(t, "")

	if _, err := s.Resolve(ctx, NameBusybox); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Resolve before build = %v; want ErrNotFound", err)
	}
	var lines []string
	start := time.Now()
	img, err := s.Build(ctx, NameBusybox, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Logf("busybox built in %s: %s, %d bytes", time.Since(start), img.Digest, img.SizeBytes)
	if len(lines) == 0 {
		t.Error("no progress lines")
	}
	if img.Name != NameBusybox || !validDigest(img.Digest) || img.SizeBytes <= 0 || img.CreatedAt.IsZero() || len(img.Layers) != 1 {
		t.Fatalf("image = %+v", img)
	}
	rootfs := img.Layers[0]
	if want := filepath.Join(s.Dir(), "layers", "sha256", strings.TrimPrefix(img.Digest, "sha256:"), "rootfs"); rootfs != want {
		t.Fatalf("layer = %s; want %s", rootfs, want)
	}

	t.Run("layout", func(t *testing.T) {
		checks := []struct {
			path     string
			mode     os.FileMode
			uid, gid uint32
		}{
			{"/", os.ModeDir | 0o755, 0, 0},
			{"bin/busybox", 0o755, 0, 0},
			{"home/user", os.ModeDir | 0o755, 1000, 1000},
			{"root", os.ModeDir | 0o700, 0, 0},
			{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0, 0},
			{"proc", os.ModeDir | 0o555, 0, 0},
			{"sys", os.ModeDir | 0o555, 0, 0},
			{"dev", os.ModeDir | 0o755, 0, 0},
			{"run", os.ModeDir | 0o755, 0, 0},
			{"etc/passwd", 0o644, 0, 0},
		}
		for _, c := range checks {
			info, err := os.Lstat(filepath.Join(rootfs, c.path))
			if err != nil {
				t.Errorf("%s: %v", c.path, err)
				continue
			}
			st := info.Sys().(*syscall.Stat_t)
			if info.Mode() != c.mode || st.Uid != c.uid || st.Gid != c.gid {
				t.Errorf("%s: mode %v owner %d:%d; want %v %d:%d", c.path, info.Mode(), st.Uid, st.Gid, c.mode, c.uid, c.gid)
			}
		}
		if target, err := os.Readlink(filepath.Join(rootfs, "bin", "sh")); err != nil || target != "/bin/busybox" {
			t.Errorf("bin/sh -> %q, %v", target, err)
		}
		for _, f := range []struct{ path, want string }{
			{"etc/passwd", "user:x:1000:1000:user:/home/user:/bin/sh\n"},
			{"etc/passwd", "root:x:0:0:"},
			{"etc/passwd", "nobody:x:65534:65534:"},
			{"etc/group", "nogroup:x:65534:"},
			{"etc/hosts", "127.0.0.1\tlocalhost"},
			{"etc/os-release", "ID=busybox"},
		} {
			data, err := os.ReadFile(filepath.Join(rootfs, f.path))
			if err != nil || !strings.Contains(string(data), f.want) {
				t.Errorf("%s lacks %q (%v):\n%s", f.path, f.want, err, data)
			}
		}
	})

	t.Run("runs", func(t *testing.T) {
		out := runIn(t, rootfs, "/bin/sh", "-c", "id -u user; ls /bin/ls; echo ok")
		if out != "1000\n/bin/ls\nok\n" {
			t.Fatalf("output %q", out)
		}
	})

	t.Run("resolve", func(t *testing.T) {
		byName, err := s.Resolve(ctx, NameBusybox)
		if err != nil {
			t.Fatal(err)
		}
		byDigest, err := s.Resolve(ctx, img.Digest)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*Image{byName, byDigest} {
			if got.Name != img.Name || got.Digest != img.Digest || got.Layers[0] != rootfs || got.SizeBytes != img.SizeBytes || !got.CreatedAt.Equal(img.CreatedAt) {
				t.Errorf("resolved %+v; want %+v", got, img)
			}
		}
		tests := []struct {
			ref  string
			want error
		}{
			{NameBase, errdefs.ErrNotFound},
			{"sha256:" + strings.Repeat("0", 64), errdefs.ErrNotFound},
			{"alpine", errdefs.ErrInvalidArgument},
			{"sha256:abc", errdefs.ErrInvalidArgument},
			{"../../etc", errdefs.ErrInvalidArgument},
		}
		for _, tt := range tests {
			if _, err := s.Resolve(ctx, tt.ref); !errors.Is(err, tt.want) {
				t.Errorf("Resolve(%q) = %v; want %v", tt.ref, err, tt.want)
			}
		}
		if _, err := s.Resolve(ctx, NameBase); err == nil || !strings.Contains(err.Error(), "build it") {
			t.Errorf("not-built message %q does not say to build it", err)
		}
	})

	t.Run("rebuild is stable", func(t *testing.T) {
		again, err := s.Build(ctx, NameBusybox, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Digest != img.Digest {
			t.Fatalf("rebuild digest %s; first %s", again.Digest, img.Digest)
		}
		other := newTestStore(t, "")
		elsewhere, err := other.Build(ctx, NameBusybox, nil)
		if err != nil {
			t.Fatal(err)
		}
		if elsewhere.Digest != img.Digest {
			t.Fatalf("digest in another store %s; first %s", elsewhere.Digest, img.Digest)
		}
	})

	t.Run("list", func(t *testing.T) {
		list, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Name != NameBusybox || list[0].Digest != img.Digest {
			t.Fatalf("List = %+v", list)
		}
	})

	t.Run("reopen", func(t *testing.T) {
		reopened := newTestStore(t, s.Dir())
		got, err := reopened.Ensure(ctx, NameBusybox, func(l string) { t.Errorf("Ensure built again: %s", l) })
		if err != nil || got.Digest != img.Digest {
			t.Fatalf("Ensure after reopen = %+v, %v", got, err)
		}
	})
	assertTmpEmpty(t, s)
}

func assertTmpEmpty(t *testing.T, s *Store) {
	t.Helper()
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("tmp/ holds %d entries after builds, first %s", len(entries), entries[0].Name())
	}
}

func TestEnsureConcurrentBuildsOnce(t *testing.T) {
	needBusybox(t)
	s := newTestStore(t, "")
	var builds atomic.Int32
	release := make(chan struct{})
	real := s.builders[NameBusybox]
	s.builders[NameBusybox] = func(ctx context.Context, rootfs string, p Progress) error {
		builds.Add(1)
		<-release
		return real(ctx, rootfs, p)
	}

	const n = 8
	var wg sync.WaitGroup
	digests := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img, err := s.Ensure(context.Background(), NameBusybox, func(string) {})
			errs[i] = err
			if img != nil {
				digests[i] = img.Digest
			}
		}()
	}
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		f := s.flights[NameBusybox]
		return f != nil && len(f.waiters) == n
	})
	// One impatient caller gives up; the build must go on for the others.
	impatient, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Ensure(impatient, NameBusybox, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("impatient Ensure = %v; want deadline exceeded", err)
	}
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || digests[i] == "" || digests[i] != digests[0] {
			t.Fatalf("caller %d: %q, %v (first %q)", i, digests[i], errs[i], digests[0])
		}
	}
	if got := builds.Load(); got != 1 {
		t.Fatalf("%d builds for %d concurrent Ensure calls; want 1", got, n)
	}
	if _, err := s.Ensure(context.Background(), NameBusybox, nil); err != nil || builds.Load() != 1 {
		t.Fatalf("Ensure of a built image: %v, builds %d", err, builds.Load())
	}
	assertTmpEmpty(t, s)
}

// When every caller gives up, the build is cancelled and leaves nothing.
func TestEnsureAbandonedBuildIsCancelled(t *testing.T) {
	s := newTestStore(t, "")
	cancelled := make(chan struct{})
	s.builders[NameBase] = func(ctx context.Context, rootfs string, p Progress) error {
		if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
			return err
		}
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Ensure(ctx, NameBase, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ensure = %v; want deadline exceeded", err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the build was not cancelled when its only caller left")
	}
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(s.tmpDir())
		return len(entries) == 0
	})
	if _, err := s.Resolve(context.Background(), NameBase); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Resolve after a cancelled build = %v; want ErrNotFound", err)
	}
}

func TestBuildFailureReported(t *testing.T) {
	s := newTestStore(t, "")
	s.builders[NameBase] = func(ctx context.Context, rootfs string, p Progress) error {
		return errors.New("mirror said no")
	}
	_, err := s.Ensure(context.Background(), NameBase, nil)
	if err == nil || !strings.Contains(err.Error(), "mirror said no") {
		t.Fatalf("Ensure = %v; want the builder's error", err)
	}
	assertTmpEmpty(t, s)
	if _, err := s.Build(context.Background(), "sha256:"+strings.Repeat("a", 64), nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Build of a digest = %v; want ErrInvalidArgument", err)
	}
	if _, err := s.Ensure(context.Background(), "nope", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Ensure of an unknown name = %v; want ErrInvalidArgument", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDamagedRefs(t *testing.T) {
	needBusybox(t)
	ctx := context.Background()
	s := newTestStore(t, "")
	img, err := s.Ensure(ctx, NameBusybox, nil)
	if err != nil {
		t.Fatal(err)
	}
	refPath := filepath.Join(s.Dir(), "refs", NameBusybox+".json")
	good, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		damage func(t *testing.T)
	}{
		{"garbage", func(t *testing.T) { must(t, os.WriteFile(refPath, []byte("{not json"), 0o644)) }},
		{"empty", func(t *testing.T) { must(t, os.WriteFile(refPath, nil, 0o644)) }},
		{"huge", func(t *testing.T) {
			must(t, os.WriteFile(refPath, []byte(`{"name":"busybox","x":"`+strings.Repeat("a", 10000)+`"}`), 0o644))
		}},
		{"bad digest", func(t *testing.T) {
			must(t, os.WriteFile(refPath, []byte(`{"name":"busybox","digest":"sha256:../../etc"}`), 0o644))
		}},
		{"wrong name", func(t *testing.T) {
			must(t, os.WriteFile(refPath, []byte(strings.Replace(string(good), `"busybox"`, `"base"`, 1)), 0o644))
		}},
		{"missing", func(t *testing.T) { must(t, os.Remove(refPath)) }},
		{"layer gone", func(t *testing.T) {
			must(t, os.WriteFile(refPath, []byte(strings.Replace(string(good), img.Digest, "sha256:"+strings.Repeat("0", 64), 1)), 0o644))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.damage(t)
			if _, err := s.Resolve(ctx, NameBusybox); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("Resolve = %v; want ErrNotFound", err)
			}
			list, err := s.List(ctx)
			if err != nil || len(list) != 0 {
				t.Fatalf("List = %+v, %v; want empty", list, err)
			}
			// Ensure repairs the record by building again.
			got, err := s.Ensure(ctx, NameBusybox, nil)
			if err != nil || got.Digest != img.Digest {
				t.Fatalf("Ensure = %+v, %v", got, err)
			}
			if _, err := s.Resolve(ctx, NameBusybox); err != nil {
				t.Fatalf("Resolve after repair: %v", err)
			}
		})
	}
}

func TestNewClearsDebris(t *testing.T) {
	dir := t.TempDir()
	s := newTestStore(t, dir)
	debris := filepath.Join(s.tmpDir(), "build-dead", "rootfs")
	must(t, os.MkdirAll(filepath.Join(debris, "proc"), 0o755))
	must(t, os.WriteFile(filepath.Join(debris, "half"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(s.tmpDir(), "ref-123.json"), []byte("{"), 0o644))

	// A mount left by a killed builder must be detached, not deleted
	// through: here a bind of a directory holding a file that must survive.
	var keep string
	if os.Geteuid() == 0 {
		hostDir := t.TempDir()
		keep = filepath.Join(hostDir, "keep")
		must(t, os.WriteFile(keep, []byte("precious"), 0o644))
		target := filepath.Join(debris, "proc")
		if err := unix.Mount(hostDir, target, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	} else {
		t.Log("not root: checking debris removal without a leftover mount")
	}

	if _, err := New(Options{Dir: dir, Logger: testLogger(t)}); err != nil {
		t.Fatalf("New: %v", err)
	}
	assertTmpEmpty(t, s)
	if keep != "" {
		if data, err := os.ReadFile(keep); err != nil || string(data) != "precious" {
			t.Fatalf("file behind a leftover mount: %q, %v", data, err)
		}
		if m, _ := mountsUnder(dir); len(m) != 0 {
			t.Fatalf("mounts remain: %v", m)
		}
	}
	for _, d := range []string{"layers/sha256", "refs", "tmp"} {
		if !dirExists(filepath.Join(dir, d)) {
			t.Errorf("%s missing", d)
		}
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"defaults", Options{Dir: t.TempDir()}, true},
		{"no dir", Options{}, false},
		{"bad mirror", Options{Dir: t.TempDir(), Mirror: "ftp://x"}, false},
		{"bad suite", Options{Dir: t.TempDir(), Suite: "../x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if tt.ok != (err == nil) {
				t.Fatalf("New = %v; want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			if s != nil && (s.mirror != DefaultMirror || s.suite != DefaultSuite || s.busybox == "") {
				t.Fatalf("defaults not applied: %+v", s)
			}
		})
	}
}

func TestBusyboxMissing(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), BusyboxPath: filepath.Join(t.TempDir(), "none")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ensure(context.Background(), NameBusybox, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Ensure = %v; want ErrFailedPrecondition", err)
	}
	notStatic := filepath.Join(t.TempDir(), "sh")
	must(t, os.WriteFile(notStatic, []byte("#!/bin/sh\n"), 0o755))
	s.busybox = notStatic
	if _, err := s.Ensure(context.Background(), NameBusybox, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Ensure with a script = %v; want ErrFailedPrecondition", err)
	}
}
