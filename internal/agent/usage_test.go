package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// TestUsageDiskIsTheHomeVolume: an agent told it has a home volume
// reports that volume as the sandbox's disk (here an 8 MiB tmpfs), not
// the root filesystem; without one, the root filesystem.
func TestUsageDiskIsTheHomeVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := t.TempDir()
	etc, home := filepath.Join(root, "etc"), filepath.Join(root, "home")
	for _, d := range []string{etc, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", home, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=8m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(home, unix.MNT_DETACH) })
	passwd := fmt.Sprintf("root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::%s:/bin/sh\n", home)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\nuser:x:1000:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	usage := func(a *Agent) wire.Usage {
		t.Helper()
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, wire.UsagePath, nil))
		var u wire.Usage
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &u) != nil {
			t.Fatalf("usage: %d %s", w.Code, w.Body.String())
		}
		return u
	}
	plain := New(Options{EtcDir: etc, DefaultUser: "user"})
	if u := usage(plain); u.DiskTotalBytes == 8<<20 || u.DiskTotalBytes == 0 || u.MemoryBytes == 0 {
		t.Fatalf("without a home volume: %+v; want the root filesystem", u)
	}
	t.Setenv(wire.EnvOwnHome, "1")
	withHome := New(Options{EtcDir: etc, DefaultUser: "user"})
	withHome.ownHomeFromEnv()
	if u := usage(withHome); u.DiskTotalBytes != 8<<20 || u.DiskUsedBytes > u.DiskTotalBytes {
		t.Fatalf("with a home volume: %+v; want the 8 MiB volume", u)
	}
}
