package netns

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// claimDirs is a claims dir (under a parent only the test's user can
// write, as /run/paddock is) and a stand-in for /run/netns.
func claimDirs(t *testing.T) (claims, netnsDir string) {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	netnsDir = filepath.Join(root, "netns")
	if err := os.Mkdir(netnsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "ranges"), netnsDir
}

func TestClaimRange(t *testing.T) {
	dir, nsd := claimDirs(t)
	r := netip.MustParsePrefix
	a, err := claimRange(dir, nsd, r("100.96.0.0/11"), "/var/lib/a", "x1111111")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("claims dir: %v %v, want mode 0700", fi.Mode(), err)
	}
	// Made in a parent that does not exist yet (/run/paddock after a
	// boot), the parent stays enterable: the daemon's socket is there.
	deeper := filepath.Join(filepath.Dir(dir), "run-paddock", "ranges")
	a2, err := claimRange(deeper, nsd, r("10.1.0.0/24"), "/var/lib/a2", "x1111112")
	if err != nil {
		t.Fatal(err)
	}
	a2.Release()
	if fi, err := os.Stat(filepath.Dir(deeper)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the claims dir's new parent: %v %v, want mode 0755", fi.Mode(), err)
	}
	for _, tt := range []struct{ name, rng string }{
		{"same range", "100.96.0.0/11"},
		{"inside it", "100.100.7.0/24"},
		{"around it", "100.64.0.0/10"},
	} {
		_, err := claimRange(dir, nsd, r(tt.rng), "/var/lib/b", "x2222222")
		if !errors.Is(err, ErrRangeTaken) || !strings.Contains(err.Error(), "/var/lib/a") {
			t.Errorf("%s: %v, want ErrRangeTaken naming /var/lib/a", tt.name, err)
		}
	}
	b, err := claimRange(dir, nsd, r("100.64.0.0/24"), "/var/lib/b", "x2222222")
	if err != nil {
		t.Fatalf("a range beside it: %v", err)
	}
	b.Release()

	// The same tag in another state dir: a copy, refused whatever the range.
	if _, err := claimRange(dir, nsd, r("10.9.0.0/24"), "/var/lib/copy", "x1111111"); !errors.Is(err, ErrRangeTaken) || !strings.Contains(err.Error(), "copied") {
		t.Errorf("a copied state dir: %v", err)
	}

	// Stopped: b's claim is unheld and b left nothing, so it goes.
	c, err := claimRange(dir, nsd, r("100.64.0.0/23"), "/var/lib/c", "x3333333")
	if err != nil {
		t.Fatalf("over a stopped daemon's range with nothing left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "100.64.0.0_24.lock")); !os.IsNotExist(err) {
		t.Errorf("the stale claim is still there: %v", err)
	}
	// c stops, leaving a sandbox's namespace behind: its range stays c's.
	c.Release()
	if err := os.WriteFile(filepath.Join(nsd, "paddock-x3333333-abc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRange(dir, nsd, r("100.64.1.0/24"), "/var/lib/d", "x4444444"); !errors.Is(err, ErrRangeTaken) || !strings.Contains(err.Error(), "/var/lib/c") || !strings.Contains(err.Error(), "1 sandbox networks") {
		t.Errorf("over a stopped daemon's range with a namespace left: %v", err)
	}
	// c itself starts again, on its range or a changed one.
	c2, err := claimRange(dir, nsd, r("100.64.0.0/23"), "/var/lib/c", "x3333333")
	if err != nil {
		t.Fatalf("the daemon that left them: %v", err)
	}
	c2.Release()
}

func TestClaimDirChecked(t *testing.T) {
	dir, nsd := claimDirs(t)
	if err := os.Chmod(filepath.Dir(dir), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRange(dir, nsd, DefaultRange, "/var/lib/a", "x1111111"); err == nil || !strings.Contains(err.Error(), "only it can write") {
		t.Errorf("a world-writable parent: %v", err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// A claim file swapped for a link is not followed.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, claimFile(DefaultRange))); err != nil {
		t.Fatal(err)
	}
	if _, err := claimRange(dir, nsd, DefaultRange, "/var/lib/a", "x1111111"); err == nil {
		t.Error("claimed through a symlink")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target was created: %v", err)
	}
}

func TestClaimFileNames(t *testing.T) {
	p := netip.MustParsePrefix("100.96.0.0/11")
	if got, ok := parseClaimFile(claimFile(p)); !ok || got != p {
		t.Errorf("round trip: %v %v", got, ok)
	}
	for _, bad := range []string{".lock", "x.lock", "100.96.0.0_11", "100.96.0.1_11.lock", "fd00::_64.lock", "100.96.0.0_11_1.lock"} {
		if _, ok := parseClaimFile(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLoadTag(t *testing.T) {
	fresh := t.TempDir()
	tag, legacy, err := loadTag(fresh, DefaultRange)
	if err != nil || legacy || !tagRE.MatchString(tag) {
		t.Fatalf("fresh state dir: %q %v %v", tag, legacy, err)
	}
	if again, _, _ := loadTag(fresh, DefaultRange); again != tag {
		t.Errorf("tag changed across starts: %q, then %q", tag, again)
	}
	if other, _, _ := loadTag(t.TempDir(), DefaultRange); other == tag {
		t.Errorf("two state dirs on one range drew one tag %q", tag)
	}
	if len("pd"+tag+"7ffff") > 15 {
		t.Errorf("interface names of tag %q pass IFNAMSIZ", tag)
	}

	// A state dir of an older daemon: records, no tag file. It keeps
	// the range's tag while records are left, then draws its own.
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "abc.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tag, legacy, err = loadTag(old, DefaultRange)
	if err != nil || !legacy || tag != "b845" {
		t.Fatalf("upgraded state dir: %q %v %v, want the legacy tag b845", tag, legacy, err)
	}
	if tag, legacy, _ = loadTag(old, DefaultRange); !legacy || tag != "b845" {
		t.Errorf("upgraded state dir, second start: %q %v", tag, legacy)
	}
	if err := os.Remove(filepath.Join(old, "abc.json")); err != nil {
		t.Fatal(err)
	}
	if tag, legacy, _ = loadTag(old, DefaultRange); legacy || !tagRE.MatchString(tag) {
		t.Errorf("upgraded state dir without records: %q %v, want a drawn tag", tag, legacy)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, tagFile), []byte("../x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadTag(bad, DefaultRange); err == nil {
		t.Error("a damaged tag file accepted")
	}
}
