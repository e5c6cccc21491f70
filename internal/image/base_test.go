package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// cacheEnv names a directory that keeps the built base image between test
// runs and packages, so the slow build happens once per machine.
const cacheEnv = "PADDOCK_TEST_IMAGE_CACHE"

func needMmdebstrap(t *testing.T) {
	t.Helper()
	needRoot(t, "mmdebstrap --mode=root")
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("needs mmdebstrap: not installed")
	}
}

func TestBaseImage(t *testing.T) {
	rootfs := ensureDebianImage(t, NameBase)
	t.Run("tools", func(t *testing.T) {
		// What E2B's base template offers, as the default user: python is
		// python3, pip runs, sudo needs no password.
		out := runIn(t, rootfs, "/bin/bash", "-c", `set -e
python --version
pip --version >/dev/null
gcc --version >/dev/null
make --version >/dev/null
gh --version >/dev/null
wget --version >/dev/null
runuser -u user -- sudo -n id -un
stat -c '%a %U' /etc/sudoers.d/user`)
		if !strings.HasPrefix(out, "Python 3.") || !strings.HasSuffix(out, "\nroot\n440 root\n") {
			t.Fatalf("output %q", out)
		}
	})
}

// The code-interpreter image is base with numpy, pandas and matplotlib, and
// a font cache the user need not build at the first plot.
func TestCodeInterpreterImage(t *testing.T) {
	rootfs := ensureDebianImage(t, NameCodeInterpreter)
	t.Run("packages", func(t *testing.T) {
		out := runIn(t, rootfs, "/usr/sbin/runuser", "-u", "user", "--", "env", "HOME=/home/user", "MPLBACKEND=Agg", "python3", "-c",
			"import numpy, pandas, matplotlib.pyplot as plt, io, os\n"+
				"plt.plot([1, 2], [3, 4]); b = io.BytesIO(); plt.savefig(b, format='png')\n"+
				"print(b.getvalue()[:4] == b'\\x89PNG', len(os.listdir(os.path.expanduser('~/.cache/matplotlib'))) > 0)")
		if out != "True True\n" {
			t.Fatalf("output %q", out)
		}
	})
	for _, f := range []string{"scipy", "pythran"} {
		if _, err := os.Stat(filepath.Join(rootfs, "usr", "lib", "python3", "dist-packages", f)); err == nil {
			t.Errorf("%s was installed: an alternative dependency took the heavy branch", f)
		}
	}
}

// ensureDebianImage builds (or finds in PADDOCK_TEST_IMAGE_CACHE) one of
// the Debian images, checks what every one of them has, and returns its
// root.
func ensureDebianImage(t *testing.T, name string) string {
	t.Helper()
	needMmdebstrap(t)
	dir := os.Getenv(cacheEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	s := newTestStore(t, dir)
	// Minutes on an idle machine; far longer on a busy one, where giving
	// up would only waste what was downloaded and unpacked.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	start := time.Now()
	lines := 0
	img, err := s.Ensure(ctx, name, func(l string) {
		lines++
		t.Log(l)
	})
	if err != nil {
		t.Fatalf("Ensure(%s): %v", name, err)
	}
	t.Logf("%s ready in %s (%d progress lines): %s, %d bytes", name, time.Since(start).Round(time.Second), lines, img.Digest, img.SizeBytes)
	if !validDigest(img.Digest) || img.Name != name || len(img.Layers) != 1 {
		t.Fatalf("image = %+v", img)
	}
	rootfs := img.Layers[0]

	t.Run("files", func(t *testing.T) {
		if info, err := os.Stat(filepath.Join(rootfs, "usr", "bin", "python3")); err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("/usr/bin/python3: %v", err)
		}
		passwd, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
		if err != nil || !strings.Contains(string(passwd), "\nuser:x:1000:1000:user:/home/user:/bin/bash\n") {
			t.Errorf("/etc/passwd has no user 1000 (%v):\n%s", err, passwd)
		}
		if info, err := os.Stat(filepath.Join(rootfs, "home", "user")); err != nil || info.Sys().(*syscall.Stat_t).Uid != 1000 {
			t.Errorf("/home/user not owned by 1000: %v", err)
		}
		lists, _ := filepath.Glob(filepath.Join(rootfs, "var", "lib", "apt", "lists", "*_Packages*"))
		debs, _ := filepath.Glob(filepath.Join(rootfs, "var", "cache", "apt", "archives", "*.deb"))
		if len(lists)+len(debs) != 0 {
			t.Errorf("apt lists or caches left: %v %v", lists, debs)
		}
		if data, err := os.ReadFile(filepath.Join(rootfs, "etc", "resolv.conf")); err != nil || len(data) != 0 {
			t.Errorf("/etc/resolv.conf carries the build host's resolver: %q, %v", data, err)
		}
		if info, err := os.Stat(filepath.Join(rootfs, "usr", "bin", "sudo")); err != nil || info.Mode()&os.ModeSetuid == 0 {
			t.Errorf("/usr/bin/sudo is not setuid: %v", err)
		}
	})

	t.Run("runs", func(t *testing.T) {
		out := runIn(t, rootfs, "/bin/bash", "-c", `python3 -c 'print(6*7)' && id -un 1000 && git --version >/dev/null && curl --version >/dev/null && ip -V >/dev/null 2>&1 && echo ok`)
		if out != "42\nuser\nok\n" {
			t.Fatalf("output %q", out)
		}
	})

	t.Run("digest matches layer", func(t *testing.T) {
		sum, err := digestTree(ctx, rootfs)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Digest != img.Digest || sum.Size != img.SizeBytes {
			t.Fatalf("layer now %s (%d bytes); recorded %s (%d bytes)", sum.Digest, sum.Size, img.Digest, img.SizeBytes)
		}
	})
	return rootfs
}

func TestBaseBuildFailureCarriesOutput(t *testing.T) {
	needMmdebstrap(t)
	s, err := New(Options{Dir: t.TempDir(), Logger: testLogger(t), Mirror: "file://" + filepath.Join(t.TempDir(), "no-mirror")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var lines []string
	_, err = s.Build(ctx, NameBase, func(l string) { lines = append(lines, l) })
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Build = %v; want ErrUnavailable", err)
	}
	if len(lines) < 2 || !strings.Contains(err.Error(), lines[len(lines)-1]) {
		t.Fatalf("error does not end with mmdebstrap's output:\n%v\nlast lines: %q", err, lines)
	}
	assertTmpEmpty(t, s)
}

// Stopping a build half-way leaves no mounts and no files behind.
func TestBaseBuildCancelled(t *testing.T) {
	needMmdebstrap(t)
	s := newTestStore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	_, err := s.Build(ctx, NameBase, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Build = %v; want deadline exceeded", err)
	}
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(s.tmpDir())
		m, _ := mountsUnder(s.Dir())
		return len(entries) == 0 && len(m) == 0
	})
}
