package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTemplateExportRoundTrip exports a template built with steps as one
// OCI image (its base image, the files and deletions its steps made, the
// agent), imports that archive back as an image, and runs a sandbox from
// it: what the build made is there, what it removed is not. A tag of the
// same build exports the same image; a template without steps exports
// its base image; an unknown template is a clear 404 that leaves no file.
func TestTemplateExportRoundTrip(t *testing.T) {
	d := startDaemon(t, daemonOpts{imagesDir: t.TempDir()})
	f := writeTemplate(t, `
name = "exp"
image = "busybox"

[[step]]
run = "mkdir -p /opt/tool && echo made > /opt/tool/out && rm /bin/vi && mkdir -p /home/user && echo notes > /home/user/notes"
`, nil)
	d.must("template", "build", "-f", f)
	d.must("template", "tag", "exp", "v2")
	dir := t.TempDir()
	archive := filepath.Join(dir, "exp.tar")
	out := d.must("template", "export", "exp", "-o", archive)
	ref := regexp.MustCompile(`as (paddock\.local/template-exp:[0-9a-f]{32}-[0-9a-f]{12}) to`).FindStringSubmatch(out)
	if ref == nil {
		t.Fatalf("template export: %q", out)
	}
	if out := d.must("template", "export", "exp:v2", "-o", filepath.Join(dir, "v2.tar")); !strings.Contains(out, ref[1]) {
		t.Errorf("a tag of the same build exported as another image: %q, want %s", out, ref[1])
	}
	if out := d.must("template", "export", "exp", "--prefix", "registry.example:5000/team", "-o", "-"); !strings.HasPrefix(out, "blobs/") && len(out) < 1024 {
		t.Errorf("export to stdout: %d bytes", len(out))
	}

	out = d.must("images", "import", "--source", "exp-image", archive)
	if !strings.Contains(out, "imported") {
		t.Fatalf("import of the exported template: %s", out)
	}
	got := runIn(d, "exp-image", `cat /opt/tool/out /home/user/notes; test -e /bin/vi && echo vi-still-there; busybox echo base-ok`)
	if got != "made\nnotes\nbase-ok\n" {
		t.Errorf("a sandbox from the exported template image:\n%s", got)
	}

	plain := writeTemplate(t, "name = \"expplain\"\nimage = \"busybox\"\n", nil)
	d.must("template", "build", "-f", plain)
	if out := d.must("template", "export", "expplain", "-o", filepath.Join(dir, "plain.tar")); !strings.Contains(out, "paddock.local/busybox:") {
		t.Errorf("a template without steps exported as %q, want its base image busybox", out)
	}

	missing := filepath.Join(dir, "missing.tar")
	_, errOut, code := d.run("template", "export", "nope", "-o", missing)
	if code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("export of an unknown template: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed export left its file: %v", err)
	}

	// The Go SDK's call names the same image.
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := d.client.ExportTemplate(ctx, "exp:v2", "", &buf)
	if err != nil || name != ref[1] || buf.Len() == 0 {
		t.Errorf("ExportTemplate: %q, %d bytes, %v", name, buf.Len(), err)
	}
}
