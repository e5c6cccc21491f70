package kubernetes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestDeployedRBACOnKubernetes runs the daemon with the credentials
// deploy/kubernetes gives it: the namespaces and RBAC objects are applied
// for real, the daemon's kubeconfig holds a token of the paddock
// ServiceAccount, and sandboxes go to paddock-sandboxes. Everything the
// backend does must be allowed by the Role: a create with network egress
// (its Secrets and NetworkPolicy, changed by a rule), exec, stop and
// start, a snapshot restored into a new sandbox, a pool kept by the
// cluster and a create from it, rm of each, pool rm; and nothing more
// than the Role: the daemon's token cannot read the default namespace's
// Secrets nor create anything cluster-wide.
func TestDeployedRBACOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const sandboxes = "paddock-sandboxes"
	applyManifests(ctx, t, c, "namespaces.yaml", "rbac.yaml")
	kubeconfig := serviceAccountKubeconfig(ctx, t, c, "paddock-system", "paddock")

	pl, err := net.Listen("tcp4", netip.AddrPortFrom(c.NodeIP(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	proxyAt := pl.Addr().String()
	pl.Close()
	d := startPaddock(t, c, "--kubeconfig", kubeconfig, "--kube-namespace", sandboxes, "--kube-egress-proxy", proxyAt)
	importImage(ctx, t, d, "busybox")

	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox", "--allow-host", "up.test")), &sb); err != nil {
		t.Fatal(err)
	}
	if got := d.must("exec", sb.ID, "--", "sh", "-c", "echo kept > /home/user/kept.txt; cat /home/user/kept.txt"); got != "kept\n" {
		t.Fatalf("exec: %q", got)
	}
	d.must("net", "allow", sb.ID, "1.1.1.1") // a rule only: updates the NetworkPolicy
	np, err := c.Client.NetworkingV1().NetworkPolicies(sandboxes).Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil || len(np.Spec.Egress) != 2 {
		t.Fatalf("NetworkPolicy after an address rule: %v %+v", err, np)
	}
	d.must("stop", sb.ID)
	d.must("start", sb.ID)
	if got := d.must("exec", sb.ID, "--", "cat", "/home/user/kept.txt"); got != "kept\n" {
		t.Fatalf("after stop and start: %q", got)
	}
	var snap struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "snapshot", "create", sb.ID)), &snap); err != nil {
		t.Fatal(err)
	}
	var rs struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--from-snapshot", snap.ID)), &rs); err != nil {
		t.Fatal(err)
	}
	if got := d.must("exec", rs.ID, "--", "cat", "/home/user/kept.txt"); got != "kept\n" {
		t.Fatalf("restored: %q", got)
	}

	d.buildTemplate("rbac-pool", "name = \"rbacpool\"\nimage = \"busybox\"\n")
	d.must("pool", "set", "rbacpool", "--min-ready", "1")
	poolReady(t, d, "rbacpool", 1)
	var warm struct {
		ID     string
		Labels map[string]string
	}
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--pool", "rbacpool")), &warm); err != nil {
		t.Fatal(err)
	}
	if warm.Labels["paddock.dev/cluster-pool"] != "rbacpool" {
		t.Errorf("the create was not served by the cluster's pool: %+v", warm.Labels)
	}
	if got := d.must("exec", warm.ID, "--", "echo", "hi"); got != "hi\n" {
		t.Fatalf("exec in the claimed sandbox: %q", got)
	}

	// A create with egress is never served from the cluster's pool: its
	// pods started without the proxy's settings.
	var cold struct {
		ID     string
		Labels map[string]string
	}
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--pool", "rbacpool", "--allow-host", "up.test")), &cold); err != nil {
		t.Fatal(err)
	}
	if _, ok := cold.Labels["paddock.dev/cluster-pool"]; ok {
		t.Errorf("a create with egress was served by the cluster's pool: %+v", cold.Labels)
	}
	if got := d.must("exec", cold.ID, "--", "sh", "-c", "echo $HTTP_PROXY"); !strings.HasPrefix(got, "http://"+cold.ID+":") {
		t.Errorf("the pool's create with egress has no proxy settings: %q", got)
	}

	for _, id := range []string{sb.ID, rs.ID, warm.ID, cold.ID} {
		d.must("rm", id)
		checkGoneIn(ctx, t, c, sandboxes, id)
	}
	d.must("pool", "rm", "rbacpool")
	if strings.Contains(d.log.String(), "forbidden") {
		t.Errorf("the cluster refused the daemon something:\n%s", grepLines(d.log.String(), "forbidden"))
	}

	// The token can do no more than the Role says.
	sa := saClient(t, kubeconfig)
	if _, err := sa.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's token lists the default namespace's Secrets: %v", err)
	}
	if _, err := sa.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "paddock-rbac-probe"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's token creates namespaces: %v", err)
	}
	if _, err := sa.CoreV1().Pods(sandboxes).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's token creates pods of its own: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// applyManifests creates the objects of deploy/kubernetes's files for
// real (waiting for a namespace another test is deleting to go first),
// and deletes them when the test ends.
func applyManifests(ctx context.Context, t *testing.T, c *cluster.Cluster, files ...string) {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := cluster.ReadObjects(filepath.Join("../../deploy/kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	applyObjects(ctx, t, c, objs)
}

// applyObjects creates objs in order, each deleted at the test's end.
func applyObjects(ctx context.Context, t *testing.T, c *cluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			ri = dc.Resource(m.Resource).Namespace(ns)
		}
		name := o.GetName()
		if err := poll(ctx, func() error {
			_, err := ri.Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s %s is still there (being deleted)", gvk.Kind, name)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = ri.Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount ns/name with a token the API server issues for an hour.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: sa
  context: {cluster: test, user: %s}
current-context: sa
`, c.Config.Host, base64.StdEncoding.EncodeToString(ca), name, tr.Status.Token, name)
	p := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// saClient is a clientset with kubeconfig's credentials.
func saClient(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
