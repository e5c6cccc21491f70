package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/captest"
)

// TestOpaqueWithoutSysAdmin: where the daemon may not set trusted.*
// attributes (a pod without CAP_SYS_ADMIN), an extracted layer's opaque
// directory carries user.overlay.opaque, and the layer's canonical tar
// (its digest) is the one a daemon with the capability writes: the marker
// reads back as trusted.overlay.opaque on a directory; on a file the same
// attribute is a user's attribute like any other.
func TestOpaqueWithoutSysAdmin(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755, Format: tar.FormatPAX},
		{Typeflag: tar.TypeDir, Name: "home/user/", Mode: 0o755, Format: tar.FormatPAX, PAXRecords: map[string]string{xattrPrefix + opaqueXattr: "y"}},
		{Typeflag: tar.TypeReg, Name: "home/user/f", Mode: 0o644, Format: tar.FormatPAX, PAXRecords: map[string]string{xattrPrefix + userOpaqueXattr: "y"}},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	privileged := t.TempDir()
	if err := Extract(context.Background(), bytes.NewReader(in.Bytes()), privileged, Limits{}); err != nil {
		t.Fatal(err)
	}
	unprivileged := t.TempDir()
	var xerr error
	if err := captest.WithoutSysAdmin(t.TempDir(), func() {
		xerr = Extract(context.Background(), bytes.NewReader(in.Bytes()), unprivileged, Limits{})
	}); err != nil {
		t.Fatal(err)
	}
	if xerr != nil {
		t.Fatalf("extraction without CAP_SYS_ADMIN: %v", xerr)
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(unprivileged, "home/user"), userOpaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("user.overlay.opaque: %v %q", err, buf[:n])
	}
	var a, b bytes.Buffer
	if err := WriteTree(context.Background(), privileged, &a, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteTree(context.Background(), unprivileged, &b, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same layer's canonical tar differs between trusted.overlay.opaque and user.overlay.opaque")
	}
	tr := tar.NewReader(&b)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		switch h.Name {
		case "home/user/":
			if h.PAXRecords[xattrPrefix+opaqueXattr] != "y" || h.PAXRecords[xattrPrefix+userOpaqueXattr] != "" {
				t.Errorf("home/user/ records: %v", h.PAXRecords)
			}
		case "home/user/f":
			if h.PAXRecords[xattrPrefix+userOpaqueXattr] != "y" || h.PAXRecords[xattrPrefix+opaqueXattr] != "" {
				t.Errorf("a file's user.overlay.opaque is its own attribute: %v", h.PAXRecords)
			}
		}
	}
}
