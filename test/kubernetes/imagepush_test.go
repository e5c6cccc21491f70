package kubernetes_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// pushRegistry is an OCI registry on the host, on its loopback (which the
// node's containerd reaches too: it runs in the host's network) or on the
// node's address (which pods reach as well), that wants one user's
// password and notes who read which manifest.
type pushRegistry struct {
	host, user, pass string
	secret, creds    string // startPushingPaddock's pull Secret and credentials file
	mu               sync.Mutex
	pulls            []string // "<user agent> <path>" of manifest reads and resolutions
	refused          int
}

func startPushRegistry(t *testing.T, listen string, tlsConf *tls.Config) *pushRegistry {
	t.Helper()
	r := &pushRegistry{user: "paddock"}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	r.pass = hex.EncodeToString(b)
	// Blobs on disk: a base image held in memory would hold the test's
	// memory too.
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="paddock-test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// A pull resolves the tag (HEAD) and reads the manifest (GET)
		// unless the node holds its content already (imported by hand
		// under another name, in another test).
		if (req.Method == http.MethodGet || req.Method == http.MethodHead) && strings.Contains(req.URL.Path, "/manifests/") {
			r.mu.Lock()
			r.pulls = append(r.pulls, req.UserAgent()+" "+req.Method+" "+req.URL.Path)
			r.mu.Unlock()
		}
		inner.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.host = ln.Addr().String()
	return r
}

// dockerConfig is the credentials as Docker's config.json spells them.
func (r *pushRegistry) dockerConfig() []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(r.user + ":" + r.pass))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.host: map[string]string{"auth": auth}}})
	return b
}

// pullSecret makes, in namespace ns, a Secret of the registry's
// credentials that pods pull with, and returns its name.
func (r *pushRegistry) pullSecret(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(r.host)
	name := "paddock-pull-" + port
	_, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: r.dockerConfig()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// manifestStatus is the registry's answer to a HEAD of ref's manifest
// (ref under r.host, by tag).
func (r *pushRegistry) manifestStatus(t *testing.T, ref string) int {
	t.Helper()
	repo, tag, ok := strings.Cut(strings.TrimPrefix(ref, r.host+"/"), ":")
	if !ok || !strings.HasPrefix(ref, r.host+"/") {
		t.Fatalf("%q is not a tagged reference under %s", ref, r.host)
	}
	req, err := http.NewRequest(http.MethodHead, "http://"+r.host+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(r.user, r.pass)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// nodePulls is the manifest reads and resolutions the node's containerd
// made.
func (r *pushRegistry) nodePulls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.pulls {
		if strings.HasPrefix(p, "containerd") {
			out = append(out, p)
		}
	}
	return out
}

// TestImagePushOnKubernetes: with --kube-image-push the daemon pushes the
// images pods run to a registry (one that wants a password), and the node
// pulls them from it with the pull secret the pods name, so nothing is
// exported or imported by hand: a sandbox of the busybox image, a
// template built with a step (its image is the base's layers and the
// step's), and a create from it, all run; the shared layers go up once;
// a second create does not push again, nor does a restarted daemon.
// Wrong credentials fail the create, saying so. rm leaves nothing.
func TestImagePushOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reg, d := startPushingPaddock(ctx, t, c)
	prefix, secret, creds := reg.host+"/paddock", reg.secret, reg.creds

	create := func(args ...string) string {
		t.Helper()
		var sb struct{ ID, State string }
		if err := json.Unmarshal([]byte(d.must(append([]string{"--json", "create"}, args...)...)), &sb); err != nil {
			t.Fatal(err)
		}
		if sb.State != "running" {
			t.Fatalf("create %q: %+v", args, sb)
		}
		return sb.ID
	}
	if info := d.must("info"); !strings.Contains(info, "images pushed to "+prefix) {
		t.Errorf("paddock info does not say where images go:\n%s", info)
	}
	start := time.Now()
	id := create("--image", "busybox")
	t.Logf("figure: first create of busybox, pushed and pulled on the way: %s", time.Since(start).Round(time.Millisecond))
	if got := d.must("exec", id, "--", "sh", "-c", "echo hello"); got != "hello\n" {
		t.Fatalf("exec: %q", got)
	}
	pod, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := pod.Spec.Containers[0].Image; !strings.HasPrefix(img, prefix+"/busybox:") {
		t.Errorf("pod image %q, want it under %s", img, prefix)
	}
	if ps := pod.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != secret {
		t.Errorf("pod pull secrets %+v", ps)
	}
	if pulls := reg.nodePulls(); len(pulls) == 0 {
		t.Error("the node asked the registry for no manifest")
	}

	start = time.Now()
	id2 := create("--image", "busybox")
	t.Logf("figure: second create of busybox: %s", time.Since(start).Round(time.Millisecond))
	if n := strings.Count(d.log.String(), "msg=\"pushing image\""); n != 1 {
		t.Errorf("busybox was pushed %d times", n)
	}

	d.buildTemplate("pushed", "name = \"pushed\"\nimage = \"busybox\"\n\n[[step]]\nrun = \"mkdir -p /opt/t && echo built > /opt/t/out\"\n")
	start = time.Now()
	id3 := create("--template", "pushed")
	t.Logf("figure: first create from the built template, its image pushed: %s", time.Since(start).Round(time.Millisecond))
	if got := d.must("exec", id3, "--", "cat", "/opt/t/out"); got != "built\n" {
		t.Fatalf("the template's file: %q", got)
	}
	if n := strings.Count(d.log.String(), "msg=\"pushing image\""); n != 2 {
		t.Errorf("%d pushes after the template's create, want 2 (busybox, the template)", n)
	}

	// With images pushed, a build starts on what it can reuse: a rebuild
	// whose second step changed runs only that step, in a pod of the
	// first step's layer, and a template builds on a template with build
	// steps.
	two := func(second string) string {
		return "name = \"twostep\"\nimage = \"busybox\"\n\n[[step]]\nrun = \"mkdir -p /opt && echo one > /opt/one\"\n\n[[step]]\nrun = \"" + second + "\"\n"
	}
	d.buildTemplate("twostep", two("echo two > /opt/two"))
	d.buildTemplate("twostep", two("echo three > /opt/two"))
	if !regexp.MustCompile(`template built[^\n]*template=twostep[^\n]*cached_steps=1 steps=2`).MatchString(d.log.String()) {
		t.Errorf("the rebuild did not start on its cached first step:\n%s", grepLines(d.log.String(), "template built"))
	}
	d.buildTemplate("ontop", "name = \"ontop\"\ntemplate = \"twostep\"\n\n[[step]]\nrun = \"cat /opt/one /opt/two > /opt/both\"\n")
	id5 := create("--template", "ontop")
	if got := d.must("exec", id5, "--", "cat", "/opt/both"); got != "one\nthree\n" {
		t.Errorf("a sandbox of a template built on a template: %q", got)
	}
	d.must("rm", id5)
	checkGone(ctx, t, c, id5)

	// A restarted daemon finds the images in the registry.
	d.stop()
	d.start()
	id4 := create("--template", "pushed")
	if got := d.must("exec", id4, "--", "cat", "/opt/t/out"); got != "built\n" {
		t.Fatalf("after a restart: %q", got)
	}
	if !strings.Contains(d.log.String(), "image already in the registry") {
		t.Error("the restarted daemon did not find the template's image in the registry")
	}
	for _, s := range []string{id, id2, id3, id4} {
		d.must("rm", s)
		checkGone(ctx, t, c, s)
	}

	// An image removed from the store is deleted from the registry: a
	// small one (a static binary alone) imported, run, and removed.
	archive := filepath.Join(t.TempDir(), "tiny.tar")
	if err := cluster.WriteBinaryImage(archive, "docker.io/paddock-test/tiny:1", buildHTTPSGet(t)); err != nil {
		t.Fatal(err)
	}
	var tiny struct{ Name string }
	if err := json.Unmarshal([]byte(d.must("--json", "images", "import", archive)), &tiny); err != nil || tiny.Name == "" {
		t.Fatalf("import: %v %+v", err, tiny)
	}
	id6 := create("--image", tiny.Name)
	pod, err = c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id6, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tinyRef := pod.Spec.Containers[0].Image
	if code := reg.manifestStatus(t, tinyRef); code != http.StatusOK {
		t.Fatalf("the registry answers %d for %s, the pod's image", code, tinyRef)
	}
	d.must("rm", id6)
	checkGone(ctx, t, c, id6)
	d.must("images", "rm", tiny.Name)
	if code := reg.manifestStatus(t, tinyRef); code != http.StatusNotFound {
		t.Errorf("after images rm, the registry answers %d for %s", code, tinyRef)
	}

	// Credentials the registry refuses fail the create and say why (the
	// restarted daemon asks the registry whether it has busybox).
	if err := os.WriteFile(creds, []byte(`{"auths":{"`+reg.host+`":{"username":"paddock","password":"wrong"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.start()
	out, errOut, code := d.run("create", "--image", "busybox")
	if code == 0 || !strings.Contains(out+errOut, "refused the credentials") {
		t.Errorf("create with refused credentials: exit %d\n%s%s", code, out, errOut)
	}
	var left struct {
		Sandboxes []struct {
			ID, State string
			Reason    string `json:"error_reason"`
		}
	}
	if err := json.Unmarshal([]byte(d.must("--json", "ls")), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Sandboxes) != 1 || left.Sandboxes[0].State != "error" || !strings.Contains(left.Sandboxes[0].Reason, "refused the credentials") {
		t.Errorf("after the refused push: %+v", left.Sandboxes)
	}
	for _, sb := range left.Sandboxes {
		d.must("rm", sb.ID)
		checkGone(ctx, t, c, sb.ID)
	}
}

// startPushingPaddock starts a registry (startPushRegistry), a pull
// Secret for it in the namespace (reg.secret), and a daemon with
// --kube-image-push under its prefix /paddock, whose credentials are the
// file reg.creds. args go to the daemon.
func startPushingPaddock(ctx context.Context, t *testing.T, c *cluster.Cluster, args ...string) (*pushRegistry, *paddockd) {
	t.Helper()
	reg := startPushRegistry(t, "127.0.0.1:0", nil)
	secret := reg.pullSecret(ctx, t, c, "default")
	creds := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(creds, reg.dockerConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PADDOCK_KUBE_IMAGE_PREFIX=" + reg.host + "/paddock", "PADDOCK_KUBE_REGISTRY_CONFIG=" + creds, "PADDOCK_KUBE_IMAGE_PULL_SECRET=" + secret}
	d := startPaddockEnv(t, c, env, append([]string{"--kube-image-push"}, args...)...)
	reg.secret, reg.creds = secret, creds
	return reg, d
}
