package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestDaemonKilledMidCreateOnKubernetes: a daemon killed while a create
// waits for its pod leaves a sandbox that says so after the restart (state
// error, with the reason), and rm then leaves nothing of it on the cluster.
func TestDaemonKilledMidCreateOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")

	// Kill the daemon once a create has made its objects and waits for
	// the pod. A create that ends first (a fast node) is removed and tried
	// again.
	var id string
	var createOut strings.Builder
	for attempt := 1; id == ""; attempt++ {
		if attempt > 5 {
			t.Fatal("no create was caught waiting for its pod in 5 attempts")
		}
		createOut.Reset()
		create := exec.Command(d.bin, "--json", "create", "--image", "busybox")
		create.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket)
		create.Stdout, create.Stderr = &createOut, &createOut
		if err := create.Start(); err != nil {
			t.Fatal(err)
		}
		createDone := make(chan error, 1)
		go func() { createDone <- create.Wait() }()
		id = catchCreating(ctx, t, c, d, createDone)
		if id == "" {
			var sb struct{ ID string }
			if json.Unmarshal([]byte(createOut.String()), &sb) == nil && sb.ID != "" {
				d.must("rm", sb.ID)
			}
			t.Logf("attempt %d: the create ended before it was caught: %q", attempt, createOut.String())
			continue
		}
		d.kill9()
		select {
		case <-createDone:
		case <-time.After(time.Minute):
			t.Fatal("the create did not end when its daemon was killed")
		}
	}
	t.Logf("create, cut by the kill, printed %q", createOut.String())

	d.start()
	var st struct {
		State  string
		Reason string `json:"error_reason"`
	}
	if err := json.Unmarshal([]byte(d.must("--json", "inspect", id)), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "error" || !strings.Contains(st.Reason, "daemon restarted while the sandbox was being created") {
		t.Fatalf("sandbox after the restart: %+v", st)
	}
	// No pod keeps running for a create nobody waits for.
	waitPodGone(ctx, t, c, id)
	d.must("rm", id)
	checkGone(ctx, t, c, id)
}

// catchCreating polls for a sandbox in state creating whose Secret is on
// the cluster, until the create ends (createDone): the sandbox's id, or
// "" when the create ended first.
func catchCreating(ctx context.Context, t *testing.T, c *cluster.Cluster, d *paddockd, createDone <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-createDone:
			return ""
		default:
		}
		var list struct{ Sandboxes []struct{ ID, State string } }
		if out, _, code := d.run("--json", "ls"); code == 0 && json.Unmarshal([]byte(out), &list) == nil {
			for _, s := range list.Sandboxes {
				if s.State != "creating" {
					continue
				}
				if _, err := c.Client.CoreV1().Secrets("default").Get(ctx, "paddock-"+s.ID, metav1.GetOptions{}); err == nil {
					return s.ID
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("a create neither ended nor showed a sandbox in state creating in 2 minutes")
	return ""
}

// waitPodGone waits until sandbox id has no pod.
func waitPodGone(ctx context.Context, t *testing.T, c *cluster.Cluster, id string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod of sandbox %s is still there: %v", id, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
