package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/captest"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
)

// TestOpaqueWithoutSysAdmin: a daemon that may not set trusted.*
// attributes (in a pod) keeps an opaque directory's marker as
// user.overlay.opaque, and the layer reads as the same one a daemon with
// the capability stores: the same digest, and the OCI export writes the
// opaque whiteout.
func TestOpaqueWithoutSysAdmin(t *testing.T) {
	needLayerRoot(t)
	data := imagetest.Tar(
		imagetest.Dir("opaque"),
		imagetest.File("opaque/.wh..wh..opq", ""),
		imagetest.File("opaque/kept", "x"),
	)
	privileged, _, err := extractInto(t, data)
	if err != nil {
		t.Fatal(err)
	}
	var unprivileged string
	if cerr := captest.WithoutSysAdmin(t.TempDir(), func() { unprivileged, _, err = extractInto(t, data) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("extraction without CAP_SYS_ADMIN: %v", err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(unprivileged, "opaque"), userOpaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("user.overlay.opaque: %v %q", err, buf[:n])
	}
	if _, err := unix.Lgetxattr(filepath.Join(unprivileged, "opaque"), opaqueXattr, buf); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("trusted.overlay.opaque set without the capability: %v", err)
	}
	a, err := digestTree(context.Background(), privileged)
	if err != nil {
		t.Fatal(err)
	}
	b, err := digestTree(context.Background(), unprivileged)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatalf("the same layer digests as %s with trusted.overlay.opaque and %s with user.overlay.opaque", a.Digest, b.Digest)
	}
	var out bytes.Buffer
	if err := writeLayer(context.Background(), unprivileged, &out); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "opaque/.wh..wh..opq" {
			found = true
		}
		for k := range hdr.PAXRecords {
			if k == "SCHILY.xattr."+userOpaqueXattr || k == "SCHILY.xattr."+opaqueXattr {
				t.Errorf("%s carries %s in the OCI layer", hdr.Name, k)
			}
		}
	}
	if !found {
		t.Fatal("the OCI layer has no opaque whiteout for the directory marked user.overlay.opaque")
	}
}
