package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOwnHome: a root-owned home (a fresh volume) goes to the default
// user; one the user owns already, or a symlink planted in its place, is
// left alone.
func TestOwnHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	root := t.TempDir()
	etc := filepath.Join(root, "etc")
	home := filepath.Join(root, "home", "user")
	for _, d := range []string{etc, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	passwd := fmt.Sprintf("root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::%s:/bin/sh\n", home)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\nuser:x:1000:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := New(Options{EtcDir: etc, DefaultUser: "user"})
	if err := a.ownHome(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(home)
	if err != nil {
		t.Fatal(err)
	}
	if st := statOwner(fi); st != [2]uint32{1000, 1000} || fi.Mode().Perm() != 0o755 {
		t.Fatalf("home after ownHome: owner %v mode %v", st, fi.Mode())
	}

	// A symlink in place of the home is refused, its target untouched.
	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(home); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, home); err != nil {
		t.Fatal(err)
	}
	if err := a.ownHome(); err == nil {
		t.Fatal("ownHome followed a symlink")
	}
	fi, _ = os.Stat(target)
	if st := statOwner(fi); st != [2]uint32{0, 0} {
		t.Fatalf("symlink target's owner changed to %v", st)
	}
}

func statOwner(fi os.FileInfo) [2]uint32 {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}
