package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSeedHome: a fresh volume (only lost+found) gets the image's home:
// directories, files and symlinks with their owners, modes and times, a
// symlink copied rather than followed, a fifo left out; a volume with
// files of its own is left alone; a seed cut short is done again.
func TestSeedHome(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1000, 1001 // the image's user, as root copies it
	}
	from := t.TempDir()
	old := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(from, "app", "deep"), 0o750))
	must(os.WriteFile(filepath.Join(from, "app", "deep", "notes"), []byte("notes\n"), 0o640))
	must(os.WriteFile(filepath.Join(from, ".profile"), []byte("export X=1\n"), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(from, "passwd-link")))
	must(unix.Mkfifo(filepath.Join(from, "pipe"), 0o600))
	for _, p := range []string{"app", "app/deep", "app/deep/notes", ".profile", "passwd-link"} {
		must(os.Lchown(filepath.Join(from, p), uid, gid))
	}
	must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(from, "passwd-link"), []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW))
	for _, p := range []string{"app/deep/notes", "app/deep", "app"} {
		must(os.Chtimes(filepath.Join(from, p), old, old))
	}

	to := t.TempDir()
	must(os.Mkdir(filepath.Join(to, "lost+found"), 0o700))
	seeded, skipped, err := SeedHome(from, to)
	if err != nil || !seeded || skipped != 1 {
		t.Fatalf("SeedHome = %v, %d, %v; want seeded, the fifo left out", seeded, skipped, err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "app", "deep", "notes")); err != nil || string(b) != "notes\n" {
		t.Errorf("copied file: %q, %v", b, err)
	}
	for p, mode := range map[string]os.FileMode{"app": os.ModeDir | 0o750, "app/deep": os.ModeDir | 0o750, "app/deep/notes": 0o640, ".profile": 0o600} {
		st, err := os.Lstat(filepath.Join(to, p))
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode() != mode || int(sys.Uid) != uid || int(sys.Gid) != gid {
			t.Errorf("%s: mode %v owner %d:%d; want %v %d:%d", p, st.Mode(), sys.Uid, sys.Gid, mode, uid, gid)
		}
		if p != ".profile" && !st.ModTime().Equal(old) {
			t.Errorf("%s: modified %v, want %v", p, st.ModTime(), old)
		}
	}
	if target, err := os.Readlink(filepath.Join(to, "passwd-link")); err != nil || target != "/etc/passwd" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	var st unix.Stat_t
	must(unix.Lstat(filepath.Join(to, "passwd-link"), &st))
	if int(st.Uid) != uid || st.Mtim.Sec != old.Unix() {
		t.Errorf("symlink: owner %d, modified %d; want %d, %d", st.Uid, st.Mtim.Sec, uid, old.Unix())
	}
	names := func() []string {
		es, err := os.ReadDir(to)
		must(err)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{".profile", "app", "lost+found", "passwd-link"}) {
		t.Errorf("seeded volume holds %v", got)
	}

	// The sandbox's own files now: a later pod copies nothing over them.
	must(os.Remove(filepath.Join(to, ".profile")))
	must(os.WriteFile(filepath.Join(to, "app", "deep", "notes"), []byte("changed\n"), 0o640))
	if seeded, _, err := SeedHome(from, to); err != nil || seeded {
		t.Fatalf("second SeedHome = %v, %v; want nothing copied", seeded, err)
	}
	if b, _ := os.ReadFile(filepath.Join(to, "app", "deep", "notes")); string(b) != "changed\n" {
		t.Errorf("the second seed wrote over the sandbox's file: %q", b)
	}

	// A seed cut short is cleared and done again.
	short := t.TempDir()
	must(os.MkdirAll(filepath.Join(short, seedWork, "half"), 0o700))
	if seeded, _, err := SeedHome(from, short); err != nil || !seeded {
		t.Fatalf("SeedHome after a seed cut short = %v, %v", seeded, err)
	}
	if _, err := os.Lstat(filepath.Join(short, seedWork)); !os.IsNotExist(err) {
		t.Errorf("the work directory is left: %v", err)
	}

	// An image whose home is a symlink seeds from where it leads.
	linked := filepath.Join(t.TempDir(), "home-link")
	must(os.Symlink(from, linked))
	viaLink := t.TempDir()
	if seeded, _, err := SeedHome(linked, viaLink); err != nil || !seeded {
		t.Fatalf("SeedHome through a symlinked home = %v, %v", seeded, err)
	}
	if b, err := os.ReadFile(filepath.Join(viaLink, "app", "deep", "notes")); err != nil || string(b) != "notes\n" {
		t.Errorf("seeded through a symlinked home: %q, %v", b, err)
	}

	// An image without the home seeds nothing; paths must be absolute.
	if seeded, _, err := SeedHome(filepath.Join(from, "absent"), t.TempDir()); err != nil || seeded {
		t.Errorf("SeedHome of an absent home = %v, %v", seeded, err)
	}
	if _, _, err := SeedHome("rel", to); err == nil {
		t.Error("a relative path was taken")
	}
	var log bytes.Buffer
	if err := SeedHomeCommand(from+":"+t.TempDir(), &log); err != nil || !strings.Contains(log.String(), "copied") {
		t.Errorf("SeedHomeCommand: %v, %q", err, log.String())
	}
	for _, bad := range []string{"", "/a", "a:/b", "/a:b"} {
		if err := SeedHomeCommand(bad, &log); err == nil {
			t.Errorf("--seed-home %q was taken", bad)
		}
	}
}
