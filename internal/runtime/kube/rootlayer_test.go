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

var oldTime = time.Unix(1600000000, 123456789)

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

// rootEntry is one entry of the agent's tar of the root.
type rootEntry struct {
	name, body, link string
	typ              byte
	mode             int64
	mtime            time.Time
	mount            bool
}

func rootTar(t *testing.T, entries ...rootEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: e.mtime, Format: tar.FormatPAX}
		if e.mtime.IsZero() {
			h.ModTime = oldTime
		}
		if e.mount {
			h.PAXRecords = map[string]string{wire.MountPointRecord: "1"}
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

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
	root := rootTar(t,
		rootEntry{name: ".paddock/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: ".paddock/bin/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: ".paddock/bin/paddock", typ: tar.TypeReg, mode: 0o555, body: "agent"},
		rootEntry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: "bin/ls", typ: tar.TypeSymlink, mode: 0o777, link: "busybox"},
		rootEntry{name: "bin/sh", typ: tar.TypeSymlink, mode: 0o777, link: "bash"},
		rootEntry{name: "data/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: "etc/", typ: tar.TypeDir, mode: 0o755, mtime: now},
		rootEntry{name: "etc/added", typ: tar.TypeReg, mode: 0o644, body: "new file", mtime: now},
		rootEntry{name: "etc/hosts", typ: tar.TypeReg, mount: true},
		rootEntry{name: "etc/keep", typ: tar.TypeReg, mode: 0o644, body: "k"},
		rootEntry{name: "etc/mod", typ: tar.TypeReg, mode: 0o644, body: "new", mtime: now},
		rootEntry{name: "etc/perm", typ: tar.TypeReg, mode: 0o600, body: "p"},
		rootEntry{name: "etc/touched", typ: tar.TypeReg, mode: 0o644, body: "same", mtime: now},
		rootEntry{name: "home/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: "home/user/", typ: tar.TypeDir, mount: true},
		rootEntry{name: "opt/", typ: tar.TypeDir, mode: 0o755, mtime: now},
		rootEntry{name: "opt/tool/", typ: tar.TypeDir, mode: 0o700, mtime: now},
		rootEntry{name: "opt/tool/out", typ: tar.TypeReg, mode: 0o4755, body: "made", mtime: now},
		rootEntry{name: "proc/", typ: tar.TypeDir, mount: true},
		rootEntry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777, mtime: now},
		rootEntry{name: "tmp/new", typ: tar.TypeReg, mode: 0o644, body: "t", mtime: now},
		rootEntry{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		rootEntry{name: "usr/share/", typ: tar.TypeDir, mode: 0o755, mtime: now},
	)
	home := rootTar(t,
		rootEntry{name: "notes", typ: tar.TypeReg, mode: 0o644, body: "notes"},
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
	err = writeRootDiff(ctx, bytes.NewReader(root), pw, idx, 1<<20, scratch, func(w io.Writer) error {
		_, err := w.Write(home)
		return err
	})
	pw.CloseWithError(err)
	if err != nil {
		t.Fatal(err)
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
		"dotdot":   rootTar(t, rootEntry{name: "../x", typ: tar.TypeReg, body: "x", mtime: time.Now()}),
		"absolute": rootTar(t, rootEntry{name: "/etc/x", typ: tar.TypeReg, body: "x", mtime: time.Now()}),
		"twice":    rootTar(t, rootEntry{name: "a", typ: tar.TypeReg, body: "x"}, rootEntry{name: "a", typ: tar.TypeReg, body: "y"}),
		"orphan":   rootTar(t, rootEntry{name: "nodir/x", typ: tar.TypeReg, body: "x"}),
	} {
		scratch, err := os.CreateTemp(t.TempDir(), "scratch")
		if err != nil {
			t.Fatal(err)
		}
		err = writeRootDiff(ctx, bytes.NewReader(root), io.Discard, map[string]lowerEntry{}, 1<<20, scratch, func(io.Writer) error { return nil })
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
	big := rootTar(t, rootEntry{name: "big", typ: tar.TypeReg, body: strings.Repeat("x", 100), mtime: time.Now()})
	err = writeRootDiff(ctx, bytes.NewReader(big), io.Discard, map[string]lowerEntry{}, 99, scratch, func(io.Writer) error { return nil })
	if fi, _ := scratch.Stat(); !errors.Is(err, errdefs.ErrResourceExhausted) || fi.Size() != 0 {
		t.Errorf("a file over the bound: %v, %d bytes spooled", err, fi.Size())
	}
}
