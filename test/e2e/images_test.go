package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// testImage is busybox plus an upper layer that deletes a file of the
// lower one (whiteout), hides a directory's lower contents (opaque) and
// carries a setuid file.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox-static for a test image")
	}
	lower, err := imagetest.BusyboxLayer(bb)
	if err != nil {
		t.Fatal(err)
	}
	mid := imagetest.Tar(imagetest.Dir("data"), imagetest.File("data/old", "old"), imagetest.File("etc/gone", "x"))
	upper := imagetest.Tar(
		imagetest.File("etc/.wh.gone", ""),
		imagetest.File("data/.wh..wh..opq", ""),
		imagetest.File("data/new", "new"),
		imagetest.Entry{Name: "bin/suid", Body: "#!/bin/sh\n", Mode: 0o4755},
	)
	img, err := imagetest.Image(v1.Config{Env: []string{"PATH=/bin", "APP_MODE=imported"}, WorkingDir: "/data", User: "1234:1234"}, lower, mid, upper)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImagesImportRunRemove(t *testing.T) {
	d := startDaemon(t, daemonOpts{imagesDir: t.TempDir()})
	img := testImage(t)
	dir := t.TempDir()
	docker, oci := filepath.Join(dir, "app.tar"), filepath.Join(dir, "oci.tar")
	if err := imagetest.WriteDockerArchive(docker, "example.test/app:1", img); err != nil {
		t.Fatal(err)
	}
	if err := imagetest.WriteOCIArchive(oci, img); err != nil {
		t.Fatal(err)
	}
	cfgDigest, _ := img.ConfigName()
	manDigest, _ := img.Digest()

	out := d.must("images", "import", docker)
	if !strings.Contains(out, cfgDigest.String()) || !strings.Contains(out, "3 layers") {
		t.Fatalf("import docker archive: %s", out)
	}
	out = d.must("images", "import", "--source", "app-oci", oci)
	if !strings.Contains(out, manDigest.String()) {
		t.Fatalf("import OCI layout: %s", out)
	}
	if out := d.must("images", "ls"); !strings.Contains(out, "app-oci") || !strings.Contains(out, "example.test/app:1") {
		t.Fatalf("images ls: %s", out)
	}

	// The image's env reaches the sandbox; the whiteout and the opaque
	// directory hide the lower layers' files; setuid was stripped.
	// The image's User and WorkingDir are the defaults for commands.
	out = runIn(d, manDigest.String(), `echo mode=$APP_MODE; ls /data; test -e /etc/gone && echo gone-visible; ls -l /bin/suid; echo "cwd=$(pwd) ids=$(id -u):$(id -g) agentvars=$(env | grep -c PADDOCK_AGENT_)"`)
	if !strings.Contains(out, "mode=imported") || !strings.Contains(out, "new") || strings.Contains(out, "old") || strings.Contains(out, "gone-visible") || !strings.Contains(out, "-rwxr-xr-x") {
		t.Fatalf("sandbox from imported image:\n%s", out)
	}
	if !strings.Contains(out, "cwd=/data ids=1234:1234 agentvars=0") {
		t.Fatalf("the image's User and WorkingDir are not the command defaults:\n%s", out)
	}

	// In use: refused. After the sandbox is gone: removed, layers freed,
	// except those the docker-archive import (same layers) still holds.
	id := createOn(d, cfgDigest.String())
	_, errOut, code := d.run("images", "rm", cfgDigest.String())
	if code == 0 || !strings.Contains(errOut, "in use by sandbox") {
		t.Fatalf("rm of an image in use: exit %d: %s", code, errOut)
	}
	d.must("rm", id)
	if out := d.must("images", "rm", "--gc", cfgDigest.String()); !strings.Contains(out, "removed 0 layers") {
		t.Fatalf("rm with a second image sharing the layers: %s", out)
	}
	if out := d.must("images", "rm", "app-oci"); !strings.Contains(out, manDigest.String()) {
		t.Fatalf("rm by source: %s", out)
	}
	if out := d.must("images", "gc"); !strings.Contains(out, "removed 3 layers") {
		t.Fatalf("gc: %s", out)
	}
	if _, errOut, code := d.run("create", "--image", manDigest.String()); code == 0 || !strings.Contains(errOut, "not in the store") {
		t.Fatalf("create from a removed image: exit %d %s", code, errOut)
	}
}

func TestImagesImportRefusesHostileArchives(t *testing.T) {
	d := startDaemon(t, daemonOpts{imagesDir: t.TempDir()})
	tests := []struct {
		name  string
		layer []byte
		want  string
	}{
		{"dotdot", imagetest.Tar(imagetest.File("../../../tmp/escape", "x")), "climbs out"},
		{"absolute", imagetest.Tar(imagetest.File("/tmp/escape", "x")), "absolute name"},
		{"escaping symlink", imagetest.Tar(imagetest.Symlink("evil", "/"), imagetest.File("evil/tmp/escape", "x")), "goes through a symlink"},
		{"device node", imagetest.Tar(imagetest.Entry{Name: "dev/kmem", Type: '3', Devmajor: 1, Devminor: 2, Mode: 0o666}), "device node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := imagetest.Image(v1.Config{}, tc.layer)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "evil.tar")
			if err := imagetest.WriteDockerArchive(p, "evil.test/x:1", img); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := d.run("images", "import", p)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want a refusal mentioning %q", code, errOut, tc.want)
			}
			if out := d.must("images", "ls"); strings.Contains(out, "evil.test") {
				t.Fatalf("hostile image recorded: %s", out)
			}
		})
	}
	// A truncated archive.
	img := testImage(t)
	p := filepath.Join(t.TempDir(), "app.tar")
	if err := imagetest.WriteDockerArchive(p, "cut.test/x:1", img); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if _, errOut, code := d.runStdin(data[:len(data)/2], "images", "import", "-"); code == 0 {
		t.Fatalf("truncated archive accepted: %s", errOut)
	}
	if _, err := os.Stat("/tmp/escape"); err == nil {
		t.Fatal("an import wrote outside its layer")
	}
}

func TestImagesPull(t *testing.T) {
	d := startDaemon(t, daemonOpts{imagesDir: t.TempDir()})
	img := testImage(t)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var damage string // blob digest to corrupt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if damage == "" || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+damage) {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		body := bytes.Clone(rec.Body.Bytes())
		body[len(body)/3] ^= 0x55
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/team/tool:1.4"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	bad, _ := layers[0].Digest()
	damage = bad.String()
	_, errOut, code := d.run("images", "pull", ref)
	if code == 0 || !strings.Contains(errOut, "failed verification") {
		t.Fatalf("pull of a damaged layer: exit %d: %s", code, errOut)
	}
	damage = ""

	want, _ := img.Digest()
	ctx := context.Background()
	got, err := d.client.PullImage(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.String() || got.Source != ref || got.Config == nil || got.Config.WorkingDir != "/data" {
		t.Fatalf("pulled %+v, want digest %s", got, want)
	}
	out := runIn(d, got.Digest, "echo $APP_MODE")
	if !strings.Contains(out, "imported") {
		t.Fatalf("sandbox from pulled image: %s", out)
	}
	if _, err := d.client.RemoveImage(ctx, ref, true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.RemoveImage(ctx, ref, false); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
}

// runIn runs a shell script in a fresh sandbox on image and removes it.
func runIn(d *daemon, image, script string) string {
	d.t.Helper()
	id := createOn(d, image)
	defer d.must("rm", id)
	return d.must("exec", id, "--", "sh", "-c", script)
}

func createOn(d *daemon, image string) string {
	d.t.Helper()
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(d.must("create", "--image", image, "--json")), &sb); err != nil {
		d.t.Fatal(err)
	}
	return sb.ID
}
