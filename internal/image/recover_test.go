package image

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logBuffer keeps what a store logs, and shows it in the test's log.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func capturingLogger(t *testing.T) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{t: t}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// mountFor mounts fstype (or binds src) at target and undoes it at the end
// of the test whatever the store did.
func mountFor(t *testing.T, src, target, fstype string, flags uintptr, data string) {
	t.Helper()
	must(t, os.MkdirAll(target, 0o755))
	if err := unix.Mount(src, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s: %v", fstype+src, target, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
}

// A daemon killed in the middle of a Debian build leaves the builder's
// chroot mounts behind and its processes still writing into the build
// directory. The next store must end those processes, detach the mounts
// without reaching through them or through links, clear the directory,
// say what it removed, and open.
func TestNewClearsInterruptedBuild(t *testing.T) {
	needBusybox(t)
	dir := t.TempDir()
	s := newTestStore(t, dir)
	build := filepath.Join(s.tmpDir(), "build-0123456789abcdef")
	rootfs := filepath.Join(build, "rootfs")
	for _, d := range []string{"bin", "etc/ssl/certs", "dev"} {
		must(t, os.MkdirAll(filepath.Join(rootfs, d), 0o755))
	}

	// What the builder mounts into its chroot, as mmdebstrap does.
	host := t.TempDir()
	keep := filepath.Join(host, "keep")
	must(t, os.WriteFile(keep, []byte("precious"), 0o644))
	mountFor(t, "proc", filepath.Join(rootfs, "proc"), "proc", 0, "")
	mountFor(t, host, filepath.Join(rootfs, "sys"), "", unix.MS_BIND, "")
	mountFor(t, "devpts", filepath.Join(rootfs, "dev/pts"), "devpts", 0, "newinstance,ptmxmode=0666")
	mountFor(t, "tmpfs", filepath.Join(rootfs, "dev/shm"), "tmpfs", 0, "size=1m")
	mountFor(t, "tmpfs", filepath.Join(rootfs, "mnt"), "tmpfs", 0, "size=1m")
	mountFor(t, host, filepath.Join(rootfs, "mnt/inner"), "", unix.MS_BIND, "")
	// Links that lead out of the build: never followed.
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("precious"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(rootfs, "etc/escape")))
	must(t, os.Symlink(outside, filepath.Join(s.tmpDir(), "build-link")))

	// An orphaned builder: chrooted in the build, unpacking files and
	// creating certificates as dpkg and update-ca-certificates do, and
	// going on whatever fails.
	bb := filepath.Join(rootfs, "bin/busybox")
	data, err := os.ReadFile(DefaultBusyboxPath)
	must(t, err)
	must(t, os.WriteFile(bb, data, 0o755))
	writer := exec.Command("/bin/busybox", "sh", "-c", `i=0; while true; do i=$((i+1))
		/bin/busybox mkdir -p /usr/share/doc/p$i 2>/dev/null
		echo x > /usr/share/doc/p$i/copyright 2>/dev/null
		echo x > /etc/ssl/certs/cert$i 2>/dev/null
	done`)
	writer.Dir = "/"
	writer.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Setpgid: true}
	must(t, writer.Start())
	exited := make(chan error, 1)
	go func() { exited <- writer.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-writer.Process.Pid, syscall.SIGKILL)
		<-exited
		exited <- nil
	})
	waitFor(t, func() bool {
		ents, _ := os.ReadDir(filepath.Join(rootfs, "etc/ssl/certs"))
		return len(ents) > 100
	})

	log, logs := capturingLogger(t)
	if _, err := New(Options{Dir: dir, Logger: log}); err != nil {
		t.Fatalf("New after an interrupted build: %v", err)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Logf("orphaned builder ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the orphaned builder still runs after the store opened")
	}
	assertTmpEmpty(t, s)
	if m, _ := mountsUnder(dir); len(m) != 0 {
		t.Fatalf("mounts remain under the store: %v", m)
	}
	for _, f := range []string{keep, filepath.Join(outside, "keep")} {
		if got, err := os.ReadFile(f); err != nil || string(got) != "precious" {
			t.Fatalf("%s, behind a mount or a link, now %q, %v", f, got, err)
		}
	}
	out := logs.String()
	for _, want := range []string{"removed an interrupted build", "proc", "dev/pts", "dev/shm", "mnt/inner", "killed="} {
		if !strings.Contains(out, want) {
			t.Errorf("the store's log does not say %q", want)
		}
	}
	if strings.Contains(out, "killed=[]") {
		t.Error("the store's log does not name the builder it killed")
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h: no unlink, even by root.
const fsImmutableFL = 0x10

// A build directory that cannot be removed is logged and left for the next
// start; it never keeps the store (and so the daemon) from opening.
func TestNewOpensDespiteUnremovableLeftover(t *testing.T) {
	needRoot(t, "setting a file immutable")
	dir := t.TempDir()
	s := newTestStore(t, dir)
	stuck := filepath.Join(s.tmpDir(), "build-stuck", "rootfs")
	must(t, os.MkdirAll(stuck, 0o755))
	file := filepath.Join(stuck, "immutable")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	setImmutable := func(on bool) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			return err
		}
		if on {
			flags |= fsImmutableFL
		} else {
			flags &^= fsImmutableFL
		}
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
	}
	if err := setImmutable(true); err != nil {
		t.Skipf("the filesystem of the test's temp dir has no immutable flag: %v", err)
	}
	t.Cleanup(func() { _ = setImmutable(false) })
	other := filepath.Join(s.tmpDir(), "build-other")
	must(t, os.MkdirAll(other, 0o755))

	log, logs := capturingLogger(t)
	if _, err := New(Options{Dir: dir, Logger: log}); err != nil {
		t.Fatalf("New with a leftover it cannot remove: %v", err)
	}
	if !strings.Contains(logs.String(), "could not clear an interrupted build") {
		t.Error("the store does not log the leftover it kept")
	}
	if dirExists(other) {
		t.Error("a removable leftover beside the stuck one was kept")
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		dir, p string
		want   bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/", false},
	} {
		if got := within(tt.dir, tt.p); got != tt.want {
			t.Errorf("within(%q, %q) = %v", tt.dir, tt.p, got)
		}
	}
}
