package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// maxImageBundle bounds the image's CA bundle we copy (Debian's is ~200 KiB).
const maxImageBundle = 4 << 20

// composeTrustBundle writes the image's CA certificates plus the egress
// CA into ns.TrustBundle and returns its path ("" when the sandbox has no
// egress CA). The image's file is read from its layers, topmost first,
// without following symlinks: a layer's link must not pull a host file
// into the sandbox.
func composeTrustBundle(layers []string, ns NetSetup) (string, error) {
	if len(ns.CACert) == 0 || ns.TrustBundle == "" {
		return "", nil
	}
	img, err := imageTrustBundle(layers)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.Write(img)
	if len(img) > 0 && !bytes.HasSuffix(img, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString("# Paddock egress CA: the proxy presents it only for hosts with credential injection rules\n")
	b.Write(ns.CACert)
	tmp := ns.TrustBundle + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, ns.TrustBundle); err != nil {
		return "", err
	}
	return ns.TrustBundle, nil
}

func imageTrustBundle(layers []string) ([]byte, error) {
	rel := strings.TrimPrefix(runtime.TrustBundlePath, "/")
	wh := filepath.Join(filepath.Dir(rel), ".wh."+filepath.Base(rel))
	for i := len(layers) - 1; i >= 0; i-- {
		if f, err := openInLayer(layers[i], wh); err == nil {
			f.Close()
			return nil, nil // deleted by this layer
		}
		f, err := openInLayer(layers[i], rel)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			// A link anywhere on the path (ELOOP) is not followed on the
			// host; the sandbox then trusts the egress CA alone through
			// the bundle.
			return nil, nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return nil, nil
		}
		b, err := io.ReadAll(io.LimitReader(f, maxImageBundle+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxImageBundle {
			return nil, fmt.Errorf("the image's %s is larger than %d bytes", runtime.TrustBundlePath, maxImageBundle)
		}
		return b, nil
	}
	return nil, nil
}

// openInLayer opens rel under dir refusing symlinks on the whole path.
func openInLayer(dir, rel string) (*os.File, error) {
	root, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fd, err := unix.Openat2(int(root.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, rel)), nil
}
