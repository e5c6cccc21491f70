package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestLostNodeOnKubernetes: the node of a running sandbox stops answering
// (its kubelet frozen: no heartbeat, no pod's deletion confirmed, while
// its containers run on). `rm` of that sandbox used to wait a minute for
// a pod the node never let go and fail, leaving the Sandbox, its pod and
// its volume on the API server for as long as the node was away. It now
// succeeds once the pod is overdue (its grace period plus 20 s): the
// daemon deletes it without the node, and nothing of the sandbox is left
// on the API server. When the node comes back its kubelet removes the
// pod's containers, and the node takes new sandboxes again.
func TestLostNodeOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	d := startPaddock(t, c)
	importImage(ctx, t, d, "busybox")
	var a struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.run("rm", a.ID) })
	pod := "paddock-" + a.ID
	if ids, err := c.PodContainers(ctx, pod); err != nil || len(ids) == 0 {
		t.Fatalf("the sandbox's containers on the node: %v %v", ids, err)
	}

	thaw := freeze(t, c.FreezeKubelet, c.ThawKubelet)

	start := time.Now()
	out, errOut, code := d.run("rm", a.ID)
	took := time.Since(start)
	t.Logf("figure: rm of a sandbox whose node does not answer took %v", took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("rm with the node away: %s %s", out, errOut)
	}
	if took > 45*time.Second {
		t.Errorf("rm took %v", took)
	}
	checkGone(ctx, t, c, a.ID)
	if !strings.Contains(d.log.String(), "has not confirmed its deletion") {
		t.Errorf("the daemon's log does not say the pod was deleted without its node")
	}

	thaw()
	if err := waitNodeBack(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The kubelet back removes the containers of the pod it no longer has.
	deadline := time.Now().Add(90 * time.Second)
	for {
		ids, err := c.PodContainers(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted pod's containers are still on the node after the kubelet came back: %v", ids)
		}
		time.Sleep(time.Second)
	}
	var b struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &b); err != nil {
		t.Fatal(err)
	}
	if got := d.must("exec", b.ID, "--", "echo", "back"); got != "back\n" {
		t.Fatalf("exec after the node came back: %q", got)
	}
	d.must("rm", b.ID)
	checkGone(ctx, t, c, b.ID)
}

// waitNodeBack waits until the node is Ready and carries none of the
// taints the node controller puts on a node that stopped answering.
func waitNodeBack(ctx context.Context, c *cluster.Cluster) error {
	var last string
	for {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err == nil {
			ready := false
			for _, cond := range n.Status.Conditions {
				ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
			}
			tainted := false
			for _, tn := range n.Spec.Taints {
				tainted = tainted || tn.Key == corev1.TaintNodeUnreachable || tn.Key == corev1.TaintNodeNotReady
			}
			if ready && !tainted {
				return nil
			}
			last = fmt.Sprintf("ready %v, taints %v", ready, n.Spec.Taints)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node not back: %s", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// freeze stops a part of the cluster with stop and returns the function
// that resumes it with resume, once, which the test's end calls too.
func freeze(t *testing.T, stop, resume func() error) func() {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	thaw := func() {
		if !resumed {
			resumed = true
			if err := resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(thaw)
	return thaw
}
