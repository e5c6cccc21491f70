package kubernetes_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestUnschedulableOnKubernetes: when no node takes a sandbox's pod (the
// one node is tainted), a create fails once --kube-start-timeout passes,
// with the scheduler's reason, not a bare timeout; the sandbox is in state
// error saying so, and rm leaves nothing of it on the cluster. A pool whose
// pods no node takes stays at zero ready, and a create from it fails the
// same way. Once the node takes pods again, creates work.
func TestUnschedulableOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	const timeout = 15 * time.Second
	d := startPaddock(t, c, "--kube-start-timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")
	untaint := taintNode(ctx, t, c)

	type sandbox struct {
		ID, State string
		Reason    string `json:"error_reason"`
	}
	list := func() []sandbox {
		t.Helper()
		var l struct{ Sandboxes []sandbox }
		if err := json.Unmarshal([]byte(d.must("--json", "ls")), &l); err != nil {
			t.Fatal(err)
		}
		return l.Sandboxes
	}
	failedCreate := func(args ...string) sandbox {
		t.Helper()
		before := map[string]bool{}
		for _, sb := range list() {
			before[sb.ID] = true
		}
		start := time.Now()
		out, errOut, code := d.run(append([]string{"--json", "create"}, args...)...)
		took := time.Since(start)
		if code == 0 {
			t.Fatalf("create %v on a node that takes no pods succeeded: %s", args, out)
		}
		t.Logf("create %v failed after %s: %s", args, took.Round(time.Millisecond), strings.TrimSpace(errOut))
		for _, want := range []string{"Unschedulable", "taint"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("create's error does not say %q: %s", want, errOut)
			}
		}
		if took < timeout || took > timeout+45*time.Second {
			t.Errorf("create failed after %s; want the start timeout (%s) and little more", took, timeout)
		}
		after := list()
		i := slices.IndexFunc(after, func(sb sandbox) bool { return !before[sb.ID] })
		if i < 0 {
			t.Fatalf("no sandbox recorded for the failed create: %+v", after)
		}
		sb := after[i]
		if sb.State != "error" || !strings.Contains(sb.Reason, "Unschedulable") {
			t.Errorf("sandbox after the failed create: %+v; want state error with the scheduler's reason", sb)
		}
		return sb
	}

	sb := failedCreate("--image", "busybox")
	d.must("rm", sb.ID)
	checkGone(ctx, t, c, sb.ID)

	// A pool of pods no node takes.
	d.buildTemplate("held", "name = \"held\"\nimage = \"busybox\"\n")
	d.must("pool", "set", "held", "--min-ready", "1", "--cpu", "0.2", "--memory", "128M")
	time.Sleep(3 * time.Second) // the pool's pod made, and left pending
	type pool struct {
		Name  string
		Ready int
		Error string
	}
	var pools struct{ Pools []pool }
	if err := json.Unmarshal([]byte(d.must("--json", "pool", "ls")), &pools); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(pools.Pools, func(p pool) bool { return p.Name == "held" }); i < 0 || pools.Pools[i].Ready != 0 {
		t.Fatalf("pools: %+v; want held with none ready", pools.Pools)
	}
	sb = failedCreate("--pool", "held")
	d.must("rm", sb.ID)
	checkGone(ctx, t, c, sb.ID)
	// The pool says why it has none ready (until the node takes pods).
	poolError := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var pools struct{ Pools []pool }
			if err := json.Unmarshal([]byte(d.must("--json", "pool", "ls")), &pools); err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(pools.Pools, func(p pool) bool { return p.Name == "held" })
			if i >= 0 && (want == "") == (pools.Pools[i].Error == "") && strings.Contains(pools.Pools[i].Error, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pools: %+v; want held's error to say %q", pools.Pools, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	poolError("of the pool is not scheduled: 0/1 nodes are available")

	// The node takes pods again: the pool fills and a create from it works.
	untaint()
	poolReady(t, d, "held", 1)
	poolError("")
	var made struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--pool", "held")), &made); err != nil {
		t.Fatal(err)
	}
	if out := d.must("exec", made.ID, "--", "echo", "hi"); out != "hi\n" {
		t.Fatalf("exec: %q", out)
	}
	d.must("rm", made.ID)
	d.must("pool", "rm", "held")
	checkGone(ctx, t, c, made.ID)
}

// taintNode makes the cluster's node take no new pods (a NoSchedule
// taint) until the function it returns, or the test's end, takes the
// taint off.
func taintNode(ctx context.Context, t *testing.T, c *cluster.Cluster) func() {
	t.Helper()
	const key = "paddock.dev/test-hold"
	set := func(on bool) error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key })
		if on {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Value: "unschedulable", Effect: corev1.TaintEffectNoSchedule})
		}
		_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	}
	if err := set(true); err != nil {
		t.Fatalf("taint the node: %v", err)
	}
	done := false
	untaint := func() {
		if done {
			return
		}
		done = true
		// Conflicts with the kubelet's own updates are retried.
		for i := 0; ; i++ {
			err := set(false)
			if err == nil {
				return
			}
			if i == 20 {
				t.Errorf("take the taint off the node: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Cleanup(untaint)
	return untaint
}
