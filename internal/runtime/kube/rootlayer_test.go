package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// layerFile is one entry of a lower layer a test makes: a directory
// (body "/"), a file, a symlink (link) or a whiteout (whiteout).
type layerFile struct {
	name, body, link string
	mode             os.FileMode
	whiteout, opaque bool
}

// oldTime is the lower layers' files' time, the one tarOf gives entries
// that name none.
var oldTime = time.Unix(1700000000, 0)

func makeLayer(t *testing.T, files ...layerFile) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		var err error
		switch {
		case f.whiteout:
			err = unix.Mknod(p, unix.S_IFCHR, 0)
		case f.link != "":
			err = os.Symlink(f.link, p)
		case f.body == "/":
			if err = os.Mkdir(p, f.mode); err == nil {
				err = os.Chmod(p, f.mode)
			}
			if err == nil && f.opaque {
				err = unix.Setxattr(p, "trusted.overlay.opaque", []byte("y"), 0)
			}
		default:
			if err = os.WriteFile(p, []byte(f.body), f.mode); err == nil {
				err = os.Chmod(p, f.mode)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.link == "" && !f.whiteout {
			if err := os.Chtimes(p, oldTime, oldTime); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// mount marks an entry of the agent's one-filesystem tar as a mount point.
var mount = map[string]string{wire.MountPointRecord: "1"}

// unchanged marks an entry the agent sent without content: its inode has
// not changed since the pod started.
var unchanged = map[string]string{wire.UnchangedRecord: "1"}

// TestRootDiff: a build step's layer on a backend that builds away from
// this host is the pod's root as it differs from the layers it started
// on: new files, files whose content, mode or link changed (a file only
// touched is not), whiteouts for the highest paths removed, the
// directories above what changed as the pod has them; mount points,
// Paddock's own directory and what lower layers already hid are left
// alone, and the home volume comes whole under an opaque home/user.
func TestRootDiff(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	l1 := makeLayer(t,
		layerFile{name: "bin", body: "/", mode: 0o755},
		layerFile{name: "bin/vi", body: "vi", mode: 0o755},
		layerFile{name: "bin/sh", link: "busybox"},
		layerFile{name: "bin/ls", link: "busybox"},
		layerFile{name: "etc", body: "/", mode: 0o755},
		layerFile{name: "etc/keep", body: "k", mode: 0o644},
		layerFile{name: "etc/mod", body: "old", mode: 0o644},
		layerFile{name: "etc/touched", body: "same", mode: 0o644},
		layerFile{name: "etc/perm", body: "p", mode: 0o644},
		layerFile{name: "etc/old", body: "o", mode: 0o644},
		layerFile{name: "etc/image", body: "from the image", mode: 0o644},
		layerFile{name: "usr", body: "/", mode: 0o755},
		layerFile{name: "usr/share", body: "/", mode: 0o755},
		layerFile{name: "usr/share/doc", body: "/", mode: 0o755},
		layerFile{name: "usr/share/doc/a", body: "a", mode: 0o644},
		layerFile{name: "proc", body: "/", mode: 0o555},
		layerFile{name: "tmp", body: "/", mode: 0o1777},
		layerFile{name: "data", body: "/", mode: 0o755},
		layerFile{name: "data/x", body: "x", mode: 0o644},
		layerFile{name: "home", body: "/", mode: 0o755},
		layerFile{name: "home/user", body: "/", mode: 0o755},
		layerFile{name: "home/user/.profile", body: "p", mode: 0o644},
	)
	l2 := makeLayer(t,
		layerFile{name: "etc", body: "/", mode: 0o755},
		layerFile{name: "etc/old", whiteout: true},
		layerFile{name: "data", body: "/", mode: 0o755, opaque: true},
	)
	idx, err := indexLower(ctx, []string{l1, l2})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"etc/old", "data/x"} {
		if _, ok := idx[gone]; ok {
			t.Errorf("the merged lower tree has %s, which a layer above hid", gone)
		}
	}
	now := time.Now()
	root := tarOf(t,
		entry{name: ".paddock/", typ: tar.TypeDir, mode: 0o755},
		entry{name: ".paddock/bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: ".paddock/bin/paddock", typ: tar.TypeReg, mode: 0o555, body: "agent"},
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "bin/ls", typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		entry{name: "bin/sh", typ: tar.TypeSymlink, mode: 0o777, link: "bash"},
		entry{name: "data/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755, mtime: now},
		entry{name: "etc/added", typ: tar.TypeReg, mode: 0o644, body: "new file", mtime: now},
		entry{name: "etc/hosts", typ: tar.TypeReg, pax: mount},
		// Unchanged since the pod started: no content, left alone even
		// though the image's time differs (the lower tree's), and even
		// when the lower tree lacks it (the runtime made it).
		entry{name: "etc/image", typ: tar.TypeReg, mode: 0o644, mtime: now, pax: unchanged},
		entry{name: "etc/made-by-runtime", typ: tar.TypeReg, mode: 0o644, pax: unchanged},
		entry{name: "etc/keep", typ: tar.TypeReg, mode: 0o644, body: "k"},
		entry{name: "etc/mod", typ: tar.TypeReg, mode: 0o644, body: "new", mtime: now},
		entry{name: "etc/perm", typ: tar.TypeReg, mode: 0o600, body: "p"},
		entry{name: "etc/touched", typ: tar.TypeReg, mode: 0o644, body: "same", mtime: now},
		entry{name: "home/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "home/user/", typ: tar.TypeDir, pax: mount},
		entry{name: "opt/", typ: tar.TypeDir, mode: 0o755, mtime: now},
		entry{name: "opt/tool/", typ: tar.TypeDir, mode: 0o700, mtime: now},
		entry{name: "opt/tool/out", typ: tar.TypeReg, mode: 0o4755, body: "made", mtime: now},
		entry{name: "proc/", typ: tar.TypeDir, pax: mount},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777, mtime: now},
		entry{name: "tmp/new", typ: tar.TypeReg, mode: 0o644, body: "t", mtime: now},
		entry{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "usr/share/", typ: tar.TypeDir, mode: 0o755, mtime: now},
	)
	home := tarOf(t,
		entry{name: "notes", typ: tar.TypeReg, mode: 0o644, body: "notes"},
	)
	dst := filepath.Join(t.TempDir(), "layer")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	scratch, err := os.CreateTemp(t.TempDir(), "scratch")
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- snapshot.Extract(ctx, pr, dst, snapshot.Limits{}) }()
	made, err := writeRootDiff(ctx, bytes.NewReader(root), pw, idx, 1<<20, scratch, func(w io.Writer) error {
		_, err := w.Write(home)
		return err
	})
	pw.CloseWithError(err)
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 {
		t.Errorf("files the runtime made, left out: %d, want 1", made)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var got []string
	err = filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dst {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		kind := "f"
		switch {
		case fi.IsDir():
			kind = "d"
		case fi.Mode()&os.ModeSymlink != 0:
			kind = "l"
		case fi.Mode()&os.ModeCharDevice != 0:
			kind = "w"
		}
		got = append(got, kind+" "+rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"d bin", "l bin/sh", "w bin/vi",
		"d etc", "f etc/added", "f etc/mod", "f etc/perm",
		"d home", "d home/user", "f home/user/notes",
		"d opt", "d opt/tool", "f opt/tool/out",
		"d tmp", "f tmp/new",
		"d usr", "d usr/share", "w usr/share/doc",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for name, mode := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "opt/tool": os.ModeDir | 0o700, "etc/perm": 0o600, "opt/tool/out": os.ModeSetuid | 0o755} {
		if fi, err := os.Lstat(filepath.Join(dst, name)); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", name, fi.Mode(), mode, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, "etc/mod")); err != nil || string(b) != "new" {
		t.Errorf("etc/mod: %q %v", b, err)
	}
	var buf [1]byte
	if n, err := unix.Lgetxattr(filepath.Join(dst, "home/user"), "trusted.overlay.opaque", buf[:]); err != nil || n != 1 || buf[0] != 'y' {
		t.Errorf("home/user is not opaque: %v", err)
	}
}

// TestRootDiffRefuses: the agent's tar is the sandbox's: a name that
// climbs out, repeats or comes before its directory ends the layer.
func TestRootDiffRefuses(t *testing.T) {
	ctx := context.Background()
	for name, root := range map[string][]byte{
		"dotdot":   tarOf(t, entry{name: "../x", typ: tar.TypeReg, body: "x", mtime: time.Now()}),
		"absolute": tarOf(t, entry{name: "/etc/x", typ: tar.TypeReg, body: "x", mtime: time.Now()}),
		"twice":    tarOf(t, entry{name: "a", typ: tar.TypeReg, body: "x"}, entry{name: "a", typ: tar.TypeReg, body: "y"}),
		"orphan":   tarOf(t, entry{name: "nodir/x", typ: tar.TypeReg, body: "x"}),
	} {
		scratch, err := os.CreateTemp(t.TempDir(), "scratch")
		if err != nil {
			t.Fatal(err)
		}
		_, err = writeRootDiff(ctx, bytes.NewReader(root), io.Discard, map[string]lowerEntry{}, 1<<20, scratch, func(io.Writer) error { return nil })
		scratch.Close()
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A file over the layer's bound is refused before it is spooled.
	scratch, err := os.CreateTemp(t.TempDir(), "scratch")
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	big := tarOf(t, entry{name: "big", typ: tar.TypeReg, body: strings.Repeat("x", 100), mtime: time.Now()})
	_, err = writeRootDiff(ctx, bytes.NewReader(big), io.Discard, map[string]lowerEntry{}, 99, scratch, func(io.Writer) error { return nil })
	if fi, _ := scratch.Stat(); !errors.Is(err, errdefs.ErrResourceExhausted) || fi.Size() != 0 {
		t.Errorf("a file over the bound: %v, %d bytes spooled", err, fi.Size())
	}
}

// TestPodStarted: the time files count as the image's is when the
// sandbox's container started running, as its pod says; a pod that does
// not say gives the zero time (every file is read).
func TestPodStarted(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	started := metav1.NewTime(time.Date(2026, 12, 7, 2, 0, 1, 0, time.UTC))
	for _, pod := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: objectName("s1"), Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: objectName("s2"), Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
	} {
		if err := cl.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.podStarted(ctx, "s1"); err != nil || !got.Equal(started.Time) {
		t.Errorf("podStarted of a running pod: %v, %v", got, err)
	}
	if got, err := b.podStarted(ctx, "s2"); err != nil || !got.IsZero() {
		t.Errorf("podStarted of a pod not running: %v, %v", got, err)
	}
	if _, err := b.podStarted(ctx, "s3"); err == nil {
		t.Error("podStarted of a sandbox without a pod succeeded")
	}
}
