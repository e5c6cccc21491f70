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

	create := exec.Command(d.bin, "--json", "create", "--image", "busybox")
	create.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket)
	var createOut strings.Builder
	create.Stdout, create.Stderr = &createOut, &createOut
	if err := create.Start(); err != nil {
		t.Fatal(err)
	}
	createDone := make(chan error, 1)
	go func() { createDone <- create.Wait() }()
	// Kill the daemon once the create has made its Sandbox and waits for
	// the pod.
	var id string
	deadline := time.Now().Add(2 * time.Minute)
	for id == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no sandbox in state creating appeared; create printed %q", createOut.String())
		}
		var list []struct{ ID, State string }
		if out, _, code := d.run("--json", "ls"); code == 0 && json.Unmarshal([]byte(out), &list) == nil {
			for _, s := range list {
				if s.State == "creating" {
					if _, err := c.Client.CoreV1().Secrets("default").Get(ctx, "paddock-"+s.ID, metav1.GetOptions{}); err == nil {
						id = s.ID
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.kill9()
	select {
	case <-createDone:
	case <-time.After(time.Minute):
		t.Fatal("the create did not end when its daemon was killed")
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
