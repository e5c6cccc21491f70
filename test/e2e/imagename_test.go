package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestImageNamesPerImporter: the name an image is imported under is the
// importer's word, so two tenants importing different images under one
// name each get their own when they create by that name, whichever came
// last; a name only tenants imported is not found for the socket, and
// once the operator imports it, every other key finds the operator's.
func TestImageNamesPerImporter(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("needs busybox-static for a test image")
	}
	lower, err := imagetest.BusyboxLayer(bb)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{listen: true, imagesDir: t.TempDir()})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "img-a", api.KeyScopeOwn)
	b := newTenant(t, d, "img-b", api.KeyScopeOwn)
	c := newTenant(t, d, "img-c", api.KeyScopeOwn)
	const name = "app.test/shared:1"
	archive := func(who string) []byte {
		t.Helper()
		img, err := imagetest.Image(v1.Config{Env: []string{"PATH=/bin"}}, lower, imagetest.Tar(imagetest.File("who", who)))
		if err != nil {
			t.Fatal(err)
		}
		data, err := imagetest.DockerArchive(name, img)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	who := func(cl *paddock.Client) (string, error) {
		t.Helper()
		sb, err := cl.Create(ctx, api.CreateSandboxRequest{Image: name, Runtime: api.RuntimeRunc})
		if err != nil {
			return "", err
		}
		defer func() { _ = cl.Delete(ctx, sb.ID) }()
		var out strings.Builder
		if res, err := cl.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"cat", "/who"}, Stdout: &out}); err != nil || res.ExitCode != 0 {
			t.Fatalf("read /who: %+v %v", res, err)
		}
		return out.String(), nil
	}
	for _, tn := range []struct {
		cl  *paddock.Client
		who string
	}{{a.sdk, "a"}, {b.sdk, "b"}} { // b's is the newer
		if _, err := tn.cl.ImportImage(ctx, bytes.NewReader(archive(tn.who)), ""); err != nil {
			t.Fatalf("import %s: %v", tn.who, err)
		}
	}
	for _, tn := range []struct {
		cl   *paddock.Client
		want string
	}{{a.sdk, "a"}, {b.sdk, "b"}} {
		if got, err := who(tn.cl); err != nil || got != tn.want {
			t.Errorf("%s's sandbox from %s runs %q's image (%v)", tn.want, name, got, err)
		}
	}
	if _, err := who(c.sdk); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("a third key creates from a name only two tenants imported: %v; want not found", err)
	}
	if _, err := who(d.client); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("the socket creates from a name only tenants imported: %v; want not found", err)
	}

	if _, err := d.client.ImportImage(ctx, bytes.NewReader(archive("op")), ""); err != nil {
		t.Fatalf("the socket's import: %v", err)
	}
	if got, err := who(c.sdk); err != nil || got != "op" {
		t.Errorf("a third key after the operator's import runs %q (%v); want the operator's", got, err)
	}
	if got, err := who(a.sdk); err != nil || got != "a" {
		t.Errorf("a after the operator's import runs %q (%v); want its own", got, err)
	}
}
