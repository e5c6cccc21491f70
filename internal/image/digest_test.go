package image

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// makeTree lays out a small tree the digest tests then vary.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "etc", "conf"), []byte("a=1\n"), 0o644))
	must(t, os.Symlink("/bin/tool", filepath.Join(dir, "bin", "alias")))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sum(t *testing.T, dir string) treeSum {
	t.Helper()
	s, err := digestTree(context.Background(), dir)
	if err != nil {
		t.Fatalf("digestTree: %v", err)
	}
	return s
}

func TestDigestTree(t *testing.T) {
	base := sum(t, makeTree(t))
	if !validDigest(base.Digest) {
		t.Fatalf("digest %q is malformed", base.Digest)
	}
	if base.Size != int64(len("#!/bin/sh\necho hi\n")+len("a=1\n")) {
		t.Fatalf("size = %d", base.Size)
	}
	tests := []struct {
		name     string
		change   func(t *testing.T, dir string)
		sameHash bool
		needRoot bool
	}{
		{name: "no change", change: func(*testing.T, string) {}, sameHash: true},
		{name: "mtime and atime ignored", sameHash: true, change: func(t *testing.T, dir string) {
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			must(t, os.Chtimes(filepath.Join(dir, "etc", "conf"), old, old))
			must(t, os.Chtimes(filepath.Join(dir, "bin"), old, old))
		}},
		{name: "content", change: func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "etc", "conf"), []byte("a=2\n"), 0o644))
		}},
		{name: "mode", change: func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "etc", "conf"), 0o600))
		}},
		{name: "sticky bit", change: func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "etc"), 0o755|os.ModeSticky))
		}},
		{name: "owner", needRoot: true, change: func(t *testing.T, dir string) {
			must(t, os.Lchown(filepath.Join(dir, "etc", "conf"), 1000, 1000))
		}},
		{name: "symlink target", change: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "bin", "alias")
			must(t, os.Remove(p))
			must(t, os.Symlink("/bin/other", p))
		}},
		{name: "new empty dir", change: func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
		}},
		{name: "hard link differs from copy", change: func(t *testing.T, dir string) {
			must(t, os.Link(filepath.Join(dir, "bin", "tool"), filepath.Join(dir, "bin", "tool2")))
		}},
		{name: "fifo", change: func(t *testing.T, dir string) {
			must(t, unix.Mkfifo(filepath.Join(dir, "etc", "pipe"), 0o644))
		}},
		{name: "xattr", change: func(t *testing.T, dir string) {
			err := unix.Lsetxattr(filepath.Join(dir, "etc", "conf"), "user.paddock.test", []byte("v"), 0)
			if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
				t.Skip("the temp dir's filesystem has no user xattrs")
			}
			must(t, err)
		}},
		{name: "rename", change: func(t *testing.T, dir string) {
			must(t, os.Rename(filepath.Join(dir, "etc", "conf"), filepath.Join(dir, "etc", "conf2")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needRoot && os.Geteuid() != 0 {
				t.Skip("needs root: changes file ownership")
			}
			dir := makeTree(t)
			tt.change(t, dir)
			got := sum(t, dir)
			if (got.Digest == base.Digest) != tt.sameHash {
				t.Fatalf("digest %s vs unchanged %s: want same=%v", got.Digest, base.Digest, tt.sameHash)
			}
		})
	}
}

// A symlink is recorded as a link: what it points at, inside or outside
// the tree, never enters the digest.
func TestDigestTreeDoesNotFollowSymlinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(outside, []byte("one"), 0o644))
	outDir := t.TempDir()
	dir := makeTree(t)
	must(t, os.Symlink(outside, filepath.Join(dir, "etc", "link")))
	must(t, os.Symlink(outDir, filepath.Join(dir, "etc", "dirlink")))
	before := sum(t, dir)
	must(t, os.WriteFile(outside, []byte("two, longer"), 0o644))
	must(t, os.WriteFile(filepath.Join(outDir, "new"), []byte("x"), 0o644))
	if after := sum(t, dir); after != before {
		t.Fatalf("digest changed with files outside the tree: %+v -> %+v", before, after)
	}
}

func TestDigestTreeErrors(t *testing.T) {
	dir := makeTree(t)
	if _, err := digestTree(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Fatal("digest of a missing dir succeeded")
	}
	if _, err := digestTree(context.Background(), filepath.Join(dir, "etc", "conf")); err == nil {
		t.Fatal("digest of a file succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := digestTree(ctx, dir); err == nil {
		t.Fatal("digest with a cancelled context succeeded")
	}
}
