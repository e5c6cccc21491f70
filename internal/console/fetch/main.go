// Command fetch puts the console's npm packages (console.ThirdParty) into
// internal/console/assets/third_party: each tarball comes from the npm
// registry, or from the download cache, and is used only when its sha512
// matches the pinned integrity. scripts/build.sh runs it before building.
//
//	go run ./internal/console/fetch [-out DIR] [-cache DIR]
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/console"
)

// Bounds: the packages are a few MiB; anything far larger is not them.
const (
	maxTarball = 32 << 20
	maxFile    = 16 << 20
)

func main() {
	out := flag.String("out", "internal/console/assets/third_party", "where the files go")
	cache := flag.String("cache", defaultCache(), "where downloaded tarballs are kept")
	flag.Parse()
	if err := run(*out, *cache); err != nil {
		fmt.Fprintln(os.Stderr, "console assets:", err)
		os.Exit(1)
	}
}

func defaultCache() string {
	if d := os.Getenv("PADDOCK_DOWNLOAD_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "paddock", "npm")
	}
	return ""
}

// stamp names the pinned set, so a directory filled for it is not
// fetched again.
func stamp() string {
	h := sha256.New()
	for _, p := range console.ThirdParty {
		fmt.Fprintln(h, p.Name, p.Version, p.Integrity)
		for _, f := range p.Files {
			fmt.Fprintln(h, f.From, f.To)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func run(out, cache string) error {
	// Builds run side by side (test packages each build the binary): one
	// fetches, the others wait and find it done.
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Clean(out)), ".third_party.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	stampFile := filepath.Join(out, ".stamp")
	want := stamp()
	if b, err := os.ReadFile(stampFile); err == nil && strings.TrimSpace(string(b)) == want {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), ".third_party-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, p := range console.ThirdParty {
		tgz, err := tarball(p, cache)
		if err != nil {
			return err
		}
		if err := extract(p, tgz, tmp); err != nil {
			return fmt.Errorf("%s@%s: %w", p.Name, p.Version, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(want+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func verify(p console.NPMPackage, b []byte) error {
	sum := sha512.Sum512(b)
	got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	if got != p.Integrity {
		return fmt.Errorf("%s@%s: the tarball's integrity is %s, not the pinned %s", p.Name, p.Version, got, p.Integrity)
	}
	return nil
}

// tarball returns p's verified tarball, from the cache or the registry.
func tarball(p console.NPMPackage, cache string) ([]byte, error) {
	var cached string
	if cache != "" {
		cached = filepath.Join(cache, strings.NewReplacer("/", "_", "@", "").Replace(p.Name)+"-"+p.Version+".tgz")
		if b, err := os.ReadFile(cached); err == nil && verify(p, b) == nil {
			return b, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Tarball, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s@%s from the npm registry: %w", p.Name, p.Version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: %s", p.Tarball, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxTarball+1))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", p.Tarball, err)
	}
	if len(b) > maxTarball {
		return nil, fmt.Errorf("download %s: over %d bytes", p.Tarball, maxTarball)
	}
	if err := verify(p, b); err != nil {
		return nil, err
	}
	if cached != "" && os.MkdirAll(cache, 0o755) == nil {
		if err := os.WriteFile(cached+".tmp", b, 0o644); err == nil {
			_ = os.Rename(cached+".tmp", cached)
		}
	}
	return b, nil
}

// extract writes p's chosen files from tgz into dir.
func extract(p console.NPMPackage, tgz []byte, dir string) error {
	want := map[string]string{}
	for _, f := range p.Files {
		want[f.From] = f.To
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for len(want) > 0 {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		to, ok := want[h.Name]
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxFile+1))
		if err != nil {
			return err
		}
		if len(b) > maxFile {
			return fmt.Errorf("%s: over %d bytes", h.Name, maxFile)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			return err
		}
		delete(want, h.Name)
	}
	for from := range want {
		return fmt.Errorf("the tarball has no %s", from)
	}
	return nil
}
