package runtimetest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BusyboxRootfs builds a minimal root filesystem from the host's static
// busybox under a temp dir and returns its path. It has the applet
// symlinks, root and user (uid 1000) in /etc/passwd, and a home for user.
// It skips the test if no static busybox is installed.
func BusyboxRootfs(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox (busybox-static) to build a test image")
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "root", "home/user", "tmp", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "var/tmp"} {
		if err := os.Chmod(filepath.Join(root, d), 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "root"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "home/user"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(bb, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		t.Fatalf("busybox --list-full: %v", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if strings.Contains(applet, "..") || filepath.IsAbs(applet) {
			continue
		}
		p := filepath.Join(root, applet)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/bin/busybox", p); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n",
		"etc/group":    "root:x:0:\ntty:x:5:\nuser:x:1000:\n",
		"etc/hostname": "localhost\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// built is the agent binary shared by every test of a package: building
// it once keeps the suite fast.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// AgentBinary builds the paddock binary (whose `agent` subcommand is every
// sandbox's PID 1) statically, once per test binary, and returns its path.
// A package that calls it removes the build with CleanupAgentBinary from
// its TestMain.
func AgentBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go toolchain to build the agent")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "paddock-agent")
		if built.err != nil {
			return
		}
		out := filepath.Join(built.dir, "paddock")
		// The agent sandboxes really run: the small one paddock embeds.
		cmd := exec.Command(goBin, "build", "-o", out, "github.com/paddock-dev/paddock/cmd/paddock-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build agent: %v\n%s", err, b)
			return
		}
		// The daemon hands sandboxes a sealed, read-only binary.
		built.err = os.Chmod(out, 0o555)
		built.path = out
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// CleanupAgentBinary removes what AgentBinary built; call it from TestMain
// after m.Run.
func CleanupAgentBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
