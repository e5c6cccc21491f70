package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestDeploymentOnKubernetes runs the daemon as deploy/kubernetes ships
// it: its image made as the Dockerfile makes it (the static binary alone),
// the namespaces, RBAC, NetworkPolicy and paddock.yaml applied for real,
// with only what this cluster lacks changed (the daemon's image is
// imported into the node, not pulled; no kube-proxy, so the API server's
// address is given to the pod; the registry is one on the node's address,
// over TLS with a private authority's certificate, wanting a password).
// The daemon then runs in its pod as a user gets it: its state on the PVC,
// a read-only root filesystem, five of the runtime's default capabilities,
// the service account's own credentials, pushing the images pods run with
// the Secret paddock-registry. A first API key is made through the unix
// socket in the pod (as docs/kubernetes.md says), and the unmodified CLI,
// over TCP with that key, imports an image, creates a sandbox in
// paddock-sandboxes (the daemon pushes the image, the node pulls it with
// the pull Secret), runs a command in it, snapshots it into the daemon's
// store, restores the snapshot into a new sandbox, creates one from a warm
// pool (agent-sandbox's; the template's image pushed too) and removes them
// all.
func TestDeploymentOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		system    = "paddock-system"
		sandboxes = "paddock-sandboxes"
		ref       = "docker.io/paddock-test/paddock:deploy"
	)
	host := startPaddock(t, c) // exports the sandboxes' image
	bin := buildPaddock(t)
	archive := filepath.Join(host.dir, "paddock-image.tar")
	if err := cluster.WriteBinaryImage(archive, ref, bin); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
	os.Remove(archive)
	api, stopForward, err := c.ForwardAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopForward)

	// The registry is an operator's own: TLS with a certificate of a
	// private authority, which the daemon is given as paddock.yaml's
	// comment says (SSL_CERT_FILE from a Secret) and the node as
	// containerd's hosts.toml.
	regTLS, regCA, err := cluster.RegistryTLS(filepath.Join(host.dir, "registry-pki"), c.NodeIP())
	if err != nil {
		t.Fatal(err)
	}
	reg := startPushRegistry(t, netip.AddrPortFrom(c.NodeIP(), 0).String(), regTLS)
	prefix := reg.host + "/paddock-images"

	applyManifests(ctx, t, c, "namespaces.yaml", "rbac.yaml", "networkpolicy.yaml")
	// The registry credentials paddock.yaml mounts, made as the docs say,
	// and the pull Secret the sandboxes' pods name.
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "paddock-registry", Namespace: system}, Data: map[string][]byte{"config.json": reg.dockerConfig()}}
	if _, err := c.Client.CoreV1().Secrets(system).Create(ctx, creds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pullSecret := reg.pullSecret(ctx, t, c, sandboxes)
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "paddock-registry-ca", Namespace: system}, Data: map[string][]byte{"ca.crt": regCA}}
	if _, err := c.Client.CoreV1().Secrets(system).Create(ctx, caSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A test host standing for the internet, which the daemon's egress
	// proxy is let reach (a private range, refused by default).
	up := newUpstreamHost(t, c)
	objs, err := cluster.ReadObjects("../../deploy/kubernetes/paddock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deployForTestCluster(t, o, ref, map[string]string{
				"KUBERNETES_SERVICE_HOST":        api.Addr().String(),
				"KUBERNETES_SERVICE_PORT":        strconv.Itoa(int(api.Port())),
				"PADDOCK_KUBE_IMAGE_PREFIX":      prefix,
				"PADDOCK_KUBE_IMAGE_PULL_SECRET": pullSecret,
				"SSL_CERT_FILE":                  "/etc/paddock/registry-ca/ca.crt",
				"PADDOCK_EGRESS_PERMIT":          up.permit.String(),
				"PADDOCK_EGRESS_DNS_STATIC":      "up.test=" + up.addr.String(),
			})
			mountSecret(t, o, "registry-ca", caSecret.Name, "/etc/paddock/registry-ca")
		}
	}
	applyObjects(ctx, t, c, objs)

	pod := deployedPod(ctx, t, c, system)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := c.Client.CoreV1().Pods(system).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
			t.Logf("the deployed daemon's log:\n%s", logs)
		}
	})
	out, err := execIn(ctx, c, system, pod.Name, "/paddock", "--json", "keys", "create", "deploy-test", "--scope", "all")
	if err != nil {
		t.Fatalf("keys create in the daemon's pod: %v: %s", err, out)
	}
	var key struct{ Secret string }
	if err := json.Unmarshal([]byte(out), &key); err != nil || key.Secret == "" {
		t.Fatalf("keys create: %v %q", err, out)
	}
	run := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "PADDOCK_URL=http://"+net.JoinHostPort(pod.Status.PodIP, "8080"), "PADDOCK_API_KEY="+key.Secret)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	remote := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := run(args...)
		if err != nil {
			t.Fatalf("paddock %s (the deployed daemon): %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	if info := remote("info"); !strings.Contains(info, "kubernetes") {
		t.Fatalf("info of the deployed daemon does not name its backend:\n%s", info)
	}

	if info := remote("info"); !strings.Contains(info, "images pushed to "+prefix) {
		t.Errorf("info of the deployed daemon does not say where images go:\n%s", info)
	}

	// The daemon in its pod builds no base image: it gets busybox as a
	// user would bring an image. Its first create pushes it, and the node
	// pulls it from the registry.
	src := filepath.Join(host.dir, "busybox-src.tar")
	host.must("images", "export", "busybox", "-o", src)
	var img struct{ Name string }
	if err := json.Unmarshal([]byte(remote("--json", "images", "import", src)), &img); err != nil || img.Name == "" {
		t.Fatalf("images import: %v %+v", err, img)
	}

	// Until the node trusts the registry's authority, its pulls fail the
	// same way each time: the create fails after the kubelet's second
	// try, saying what to do, not at the start timeout. (The daemon's
	// push, with the authority it was given, went through.)
	start := time.Now()
	_, stderr, err := run("create", "--image", img.Name)
	if err == nil || !strings.Contains(stderr, "cannot pull its image") || !strings.Contains(stderr, "does not trust the registry's certificate") {
		t.Fatalf("a create whose image the node cannot pull: %v\n%s", err, stderr)
	}
	t.Logf("figure: a create whose image's registry the node does not trust failed after %s", time.Since(start).Round(time.Second))
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the create failed after %s", d)
	}
	if err := c.TrustRegistry(netip.MustParseAddrPort(reg.host), regCA); err != nil {
		t.Fatal(err)
	}

	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(remote("--json", "create", "--image", img.Name)), &sb); err != nil {
		t.Fatal(err)
	}
	if got := remote("exec", sb.ID, "--", "sh", "-c", "echo deployed > /home/user/f; cat /home/user/f"); got != "deployed\n" {
		t.Fatalf("exec in a sandbox of the deployed daemon: %q", got)
	}
	checkPulledFrom(ctx, t, c, reg, sandboxes, sb.ID, prefix, pullSecret)

	// Egress through the daemon's proxy in its pod, and again once the
	// daemon's pod was replaced and came back at another address: the
	// sandbox's agent relays to wherever the proxy is now.
	var eg struct{ ID string }
	if err := json.Unmarshal([]byte(remote("--json", "create", "--image", img.Name, "--allow-host", "up.test")), &eg); err != nil {
		t.Fatal(err)
	}
	egressGet := func(when string) {
		t.Helper()
		if got := remote("exec", eg.ID, "--", "timeout", "20", "wget", "-q", "-O", "-", "http://up.test/x"); got != "hello from up.test" {
			t.Fatalf("egress from a sandbox of the deployed daemon %s: %q", when, got)
		}
	}
	egressGet("")
	np, err := c.Client.NetworkingV1().NetworkPolicies(sandboxes).Get(ctx, "paddock-"+eg.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if to := np.Spec.Egress[0].To; len(to) != 1 || to[0].IPBlock != nil || to[0].PodSelector == nil ||
		to[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "paddock" || to[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != system {
		t.Errorf("the NetworkPolicy's way to the proxy: %+v", to)
	}
	before := pod.Status.PodIP
	if err := c.Client.CoreV1().Pods(system).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replaced := time.Now()
	for {
		pod = deployedPod(ctx, t, c, system)
		if pod.Status.PodIP != before {
			break
		}
		if time.Since(replaced) > 3*time.Minute {
			t.Fatalf("the daemon's pod came back at its old address %s", before)
		}
		time.Sleep(time.Second)
	}
	t.Logf("figure: the deployed daemon's pod replaced in %s (%s, then %s)", time.Since(replaced).Round(time.Second), before, pod.Status.PodIP)
	egressGet("after its pod was replaced")
	sbs, err := dynamicSandboxes(ctx, c, sandboxes)
	if err != nil || !strings.Contains(sbs, sb.ID) {
		t.Fatalf("the sandbox is not a Sandbox in %s: %v %s", sandboxes, err, sbs)
	}
	// A snapshot is kept in the daemon's store on its PVC, its home
	// directory an opaque layer: the daemon, without CAP_SYS_ADMIN,
	// keeps that marker as user.overlay.opaque.
	var snap struct{ ID string }
	if err := json.Unmarshal([]byte(remote("--json", "snapshot", "create", sb.ID)), &snap); err != nil {
		t.Fatal(err)
	}
	var rs struct{ ID string }
	if err := json.Unmarshal([]byte(remote("--json", "create", "--from-snapshot", snap.ID)), &rs); err != nil {
		t.Fatal(err)
	}
	if got := remote("exec", rs.ID, "--", "cat", "/home/user/f"); got != "deployed\n" {
		t.Fatalf("the restored sandbox's file: %q", got)
	}
	// A warm pool is agent-sandbox's, and a create from it claims a pod
	// whose agent the daemon, in its own pod, reaches by the pod's address.
	tf := filepath.Join(host.dir, "dpool.toml")
	if err := os.WriteFile(tf, fmt.Appendf(nil, "name = \"dpool\"\nimage = %q\n", img.Name), 0o644); err != nil {
		t.Fatal(err)
	}
	remote("template", "build", "-f", tf)
	remote("pool", "set", "dpool", "--min-ready", "1", "--cpu", "0.1", "--memory", "128M")
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer pcancel()
	var pools string
	if err := poll(pctx, func() error {
		pools = remote("--json", "pool", "ls")
		var list struct {
			Pools []struct {
				Name  string
				Ready int
			}
		}
		if err := json.Unmarshal([]byte(pools), &list); err != nil {
			return err
		}
		for _, p := range list.Pools {
			if p.Name == "dpool" && p.Ready >= 1 {
				return nil
			}
		}
		return errors.New("not ready")
	}); err != nil {
		t.Fatalf("the pool of the deployed daemon never had a sandbox ready: %v\n%s", err, pools)
	}
	var ps struct{ ID string }
	if err := json.Unmarshal([]byte(remote("--json", "create", "--pool", "dpool")), &ps); err != nil {
		t.Fatal(err)
	}
	if got := remote("exec", ps.ID, "--", "echo", "claimed"); got != "claimed\n" {
		t.Fatalf("exec in a sandbox from the pool: %q", got)
	}
	// Every sandbox the daemon has: the four above and the create that
	// failed, in state error with its reason.
	var left struct {
		Sandboxes []struct {
			ID, State string
			Reason    string `json:"error_reason"`
		}
	}
	if err := json.Unmarshal([]byte(remote("--json", "ls")), &left); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, s := range left.Sandboxes {
		if s.State == "error" && strings.Contains(s.Reason, "does not trust") {
			failed++
		}
		remote("rm", s.ID)
	}
	if len(left.Sandboxes) != 5 || failed != 1 {
		t.Errorf("the deployed daemon's sandboxes: %+v", left.Sandboxes)
	}
	remote("pool", "rm", "dpool")
	if err := poll(ctx, func() error {
		sbs, err := dynamicSandboxes(ctx, c, sandboxes)
		for _, s := range left.Sandboxes {
			if err == nil && strings.Contains(sbs, s.ID) {
				err = fmt.Errorf("the Sandbox of %s is still there after rm", s.ID)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// deployForTestCluster changes paddock.yaml's Deployment o where the test
// cluster differs from a real one: the daemon's image is the one imported
// into the node (never pulled), and env's variables are set.
func deployForTestCluster(t *testing.T, o *unstructured.Unstructured, image string, env map[string]string) {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) != 1 {
		t.Fatalf("paddock.yaml's Deployment: want one container: %v", err)
	}
	ctr := containers[0].(map[string]any)
	ctr["image"], ctr["imagePullPolicy"] = image, "Never"
	vars, _ := ctr["env"].([]any)
	for name, value := range env {
		found := false
		for _, v := range vars {
			if m := v.(map[string]any); m["name"] == name {
				m["value"], found = value, true
			}
		}
		if !found {
			vars = append(vars, map[string]any{"name": name, "value": value})
		}
	}
	ctr["env"] = vars
	if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// mountSecret mounts Secret secret read-only at path in the only
// container of Deployment o, as volume name.
func mountSecret(t *testing.T, o *unstructured.Unstructured, name, secret, path string) {
	t.Helper()
	spec, _, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err != nil {
		t.Fatal(err)
	}
	vols, _ := spec["volumes"].([]any)
	spec["volumes"] = append(vols, map[string]any{"name": name, "secret": map[string]any{"secretName": secret}})
	ctr := spec["containers"].([]any)[0].(map[string]any)
	mounts, _ := ctr["volumeMounts"].([]any)
	ctr["volumeMounts"] = append(mounts, map[string]any{"name": name, "mountPath": path, "readOnly": true})
	if err := unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec"); err != nil {
		t.Fatal(err)
	}
}

// deployedPod waits for the Deployment's pod to be Ready.
func deployedPod(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) *corev1.Pod {
	t.Helper()
	var last string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=paddock"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return p
				}
			}
			last = fmt.Sprintf("%s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			if t := c.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: new(int64(20))}); t != nil {
				if b, err := t.DoRaw(ctx); err == nil && len(b) > 0 {
					last += "\nlog:\n" + string(b)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the deployed daemon's pod is not Ready in 3 minutes; last: %s", last)
	return nil
}

// dynamicSandboxes lists the names and labels of the Sandboxes in ns.
func dynamicSandboxes(ctx context.Context, c *cluster.Cluster, ns string) (string, error) {
	b, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/agents.x-k8s.io/v1beta1/namespaces/" + ns + "/sandboxes").DoRaw(ctx)
	return string(b), err
}

// checkPulledFrom checks that the pod of sandbox id in ns runs an image
// under prefix with the pull Secret secret, and that the node asked the
// registry for a manifest.
func checkPulledFrom(ctx context.Context, t *testing.T, c *cluster.Cluster, reg *pushRegistry, ns, id, prefix, secret string) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found *corev1.Pod
	for i := range pods.Items {
		if strings.Contains(pods.Items[i].Name, id) {
			found = &pods.Items[i]
		}
	}
	if found == nil {
		t.Fatalf("no pod of sandbox %s in %s", id, ns)
	}
	if img := found.Spec.Containers[0].Image; !strings.HasPrefix(img, prefix+"/") {
		t.Errorf("pod %s runs %q, want an image under %s", found.Name, img, prefix)
	}
	if ps := found.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != secret {
		t.Errorf("pod %s pull secrets %+v, want %s", found.Name, ps, secret)
	}
	if len(reg.nodePulls()) == 0 {
		t.Error("the node asked the registry for no manifest")
	}
}
