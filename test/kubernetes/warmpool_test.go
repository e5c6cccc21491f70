package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

var (
	warmPoolResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	templateResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	claimResource    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// TestWarmPoolOnKubernetes: a Paddock pool on the kubernetes backend is
// agent-sandbox's SandboxWarmPool of a SandboxTemplate, and a create from
// it is a SandboxClaim. The pool's pods start unclaimed: their token opens
// nothing until the daemon claims one for a sandbox, after which only the
// sandbox's own token works. A claimed sandbox keeps its files through a
// stop and start, the pool refills, and removing the pool removes the
// cluster's pool and its unclaimed pods while the claimed sandbox runs on.
func TestWarmPoolOnKubernetes(t *testing.T) {
	c, d, dc, ctx := poolTest(t)
	d.buildTemplate("wpool", "name = \"wpool\"\nimage = \"busybox\"\n")
	d.must("pool", "set", "wpool", "--min-ready", "2")
	start := time.Now()
	poolReady(t, d, "wpool", 2)

	// The cluster keeps the pool.
	wp := clusterPool(ctx, t, dc, "wpool")
	obj := wp.GetName()
	if n, _, _ := unstructured.NestedInt64(wp.Object, "spec", "replicas"); n != 2 {
		t.Errorf("SandboxWarmPool replicas %d, want 2", n)
	}
	if s, _, _ := unstructured.NestedString(wp.Object, "spec", "updateStrategy", "type"); s != "Recreate" {
		t.Errorf("SandboxWarmPool update strategy %q, want Recreate", s)
	}
	if ref, _, _ := unstructured.NestedString(wp.Object, "spec", "sandboxTemplateRef", "name"); ref != obj {
		t.Errorf("SandboxWarmPool template %q, want %q", ref, obj)
	}
	if _, err := dc.Resource(templateResource).Namespace("default").Get(ctx, obj, metav1.GetOptions{}); err != nil {
		t.Fatalf("the pool's SandboxTemplate: %v", err)
	}
	sec, err := c.Client.CoreV1().Secrets("default").Get(ctx, obj, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool's Secret: %v", err)
	}
	poolToken := string(sec.Data["agent-token"])

	// An unclaimed pod's agent takes the pool's token for nothing but a
	// claim.
	unclaimed := poolPods(ctx, t, c, obj, false)
	if len(unclaimed) == 0 {
		t.Fatal("no unclaimed pod of the pool runs")
	}
	if code := agentHealth(t, unclaimed[0].Status.PodIP, poolToken); code != http.StatusUnauthorized {
		t.Errorf("an unclaimed pod's agent answered the pool's token with %d, want 401", code)
	}

	createToExec := func(args ...string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		var sb struct{ ID string }
		if err := json.Unmarshal([]byte(d.must(append([]string{"--json", "create"}, args...)...)), &sb); err != nil {
			t.Fatal(err)
		}
		if out := d.must("exec", sb.ID, "--", "echo", "hi"); out != "hi\n" {
			t.Fatalf("exec: %q", out)
		}
		return sb.ID, time.Since(start)
	}
	warmID, warm := createToExec("--pool", "wpool")
	coldID, cold := createToExec("--image", "busybox")
	t.Logf("figure: kubernetes backend, SandboxClaim from a SandboxWarmPool to first exec %v, cold create to first exec %v", warm.Round(time.Millisecond), cold.Round(time.Millisecond))
	if warm >= cold {
		t.Errorf("a claim from the warm pool (%v) was not faster than a cold create (%v)", warm, cold)
	}
	var got struct{ Labels map[string]string }
	if err := json.Unmarshal([]byte(d.must("--json", "inspect", warmID)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["paddock.dev/pool"] != "wpool" || got.Labels["paddock.dev/cluster-pool"] != "wpool" {
		t.Errorf("the claimed sandbox's labels: %v", got.Labels)
	}

	// The create was a claim, satisfied by one of the pool's Sandboxes.
	claim, err := dc.Resource(claimResource).Namespace("default").Get(ctx, "paddock-"+warmID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's SandboxClaim: %v", err)
	}
	sbName, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	if !strings.HasPrefix(sbName, obj+"-") {
		t.Fatalf("the claim's Sandbox %q is not one of the pool's (%s-...)", sbName, obj)
	}
	pod, err := c.Client.CoreV1().Pods("default").Get(ctx, sbName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claimed pod: %v", err)
	}
	if code := agentHealth(t, pod.Status.PodIP, poolToken); code != http.StatusUnauthorized {
		t.Errorf("the claimed pod's agent answered the pool's token with %d, want 401", code)
	}
	// The sandbox's own NetworkPolicy selects the claim's identity, which
	// the pod carries.
	if uid := string(claim.GetUID()); pod.Labels["agents.x-k8s.io/claim-uid"] != uid {
		t.Errorf("the claimed pod's labels %v lack the claim's uid %s", pod.Labels, uid)
	}
	if _, err := c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "paddock-"+warmID, metav1.GetOptions{}); err != nil {
		t.Errorf("the claimed sandbox's own NetworkPolicy: %v", err)
	}

	// Its later pods take the sandbox's own token; its home survives.
	d.must("exec", warmID, "--", "sh", "-c", "echo kept > /home/user/kept.txt")
	d.must("stop", warmID)
	d.must("start", warmID)
	if out := d.must("exec", warmID, "--", "cat", "/home/user/kept.txt"); out != "kept\n" {
		t.Fatalf("the claimed sandbox's file after a stop and start: %q", out)
	}
	poolReady(t, d, "wpool", 2) // refilled
	// The pool loop (every 5 s) finds the template unchanged and leaves it
	// alone: an update would make agent-sandbox recreate the pool's pods.
	if tpl, err := dc.Resource(templateResource).Namespace("default").Get(ctx, obj, metav1.GetOptions{}); err != nil || tpl.GetGeneration() != 1 {
		t.Errorf("the pool's SandboxTemplate after %s: generation %d, %v; want 1", time.Since(start).Round(time.Second), tpl.GetGeneration(), err)
	}

	// Removing the pool removes the cluster's; the claimed sandbox stays.
	d.must("pool", "rm", "wpool")
	for _, o := range []struct {
		what string
		get  func() error
	}{
		{"SandboxWarmPool", func() error {
			_, err := dc.Resource(warmPoolResource).Namespace("default").Get(ctx, obj, metav1.GetOptions{})
			return err
		}},
		{"SandboxTemplate", func() error {
			_, err := dc.Resource(templateResource).Namespace("default").Get(ctx, obj, metav1.GetOptions{})
			return err
		}},
		{"Secret", func() error {
			_, err := c.Client.CoreV1().Secrets("default").Get(ctx, obj, metav1.GetOptions{})
			return err
		}},
		{"NetworkPolicy", func() error {
			_, err := c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, obj, metav1.GetOptions{})
			return err
		}},
	} {
		if err := o.get(); !apierrors.IsNotFound(err) {
			t.Errorf("the pool's %s after pool rm: %v", o.what, err)
		}
	}
	if left := poolPods(ctx, t, c, obj, false); len(left) > 0 {
		t.Errorf("%d unclaimed pods of the pool are left after pool rm", len(left))
	}
	if out := d.must("exec", warmID, "--", "echo", "kept"); out != "kept\n" {
		t.Fatalf("the claimed sandbox after pool rm: %q", out)
	}

	for _, id := range []string{warmID, coldID} {
		d.must("rm", id)
		checkGone(ctx, t, c, id)
	}
	if _, err := dc.Resource(claimResource).Namespace("default").Get(ctx, "paddock-"+warmID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("SandboxClaim after rm: %v", err)
	}
	if _, err := dc.Resource(sandboxResource).Namespace("default").Get(ctx, sbName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed Sandbox after rm: %v", err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, sbName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed pod after rm: %v", err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "home-"+sbName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed sandbox's home claim after rm: %v", err)
	}
}

// poolReady waits until `pool ls` shows n ready in pool name.
func poolReady(t *testing.T, d *paddockd, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var list struct {
			Pools []struct {
				Name  string
				Ready int
				Error string
			}
		}
		if err := json.Unmarshal([]byte(d.must("--json", "pool", "ls")), &list); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Pools {
			if p.Name == name && p.Ready >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s never had %d ready: %+v", name, n, list.Pools)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clusterPool finds the SandboxWarmPool that keeps Paddock's pool name.
func clusterPool(ctx context.Context, t *testing.T, dc dynamic.Interface, name string) *unstructured.Unstructured {
	t.Helper()
	list, err := dc.Resource(warmPoolResource).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].GetAnnotations()["paddock.dev/pool"] == name {
			return &list.Items[i]
		}
	}
	t.Fatalf("no SandboxWarmPool keeps pool %s (%d pools)", name, len(list.Items))
	return nil
}

// poolPods lists the running pods of the pool obj, claimed or not.
func poolPods(ctx context.Context, t *testing.T, c *cluster.Cluster, obj string, claimed bool) []corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "paddock.dev/warm-pool=" + obj})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if (p.Labels["agents.x-k8s.io/claim-uid"] != "") == claimed && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			out = append(out, p)
		}
	}
	return out
}

// agentHealth asks the agent at ip for /health with token and returns the
// status code.
func agentHealth(t *testing.T, ip, token string) int {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/health", net.JoinHostPort(ip, "49983")), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Paddock-Agent-Token", token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the agent at %s: %v", ip, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
