package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPoolOnKubernetes: Paddock's own warm pools on the kubernetes
// backend, which a template with a start command keeps (the cluster's
// pool cannot run it; warmpool_test.go has the cluster's). The pool keeps
// sandboxes (pods) ready; a create from it gets
// one at once, faster than a cold create, and the pool refills; removing
// the pool removes its unclaimed pods.
func TestPoolOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")

	tpl := filepath.Join(d.dir, "kpool.toml")
	if err := os.WriteFile(tpl, []byte("name = \"kpool\"\nimage = \"busybox\"\nstart = [\"sleep\", \"3600\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("template", "build", "-f", tpl)
	d.must("pool", "set", "kpool", "--min-ready", "2")
	poolReady(t, d, "kpool", 2)

	createToExec := func(args ...string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		var sb struct {
			ID     string
			Labels map[string]string
		}
		if err := json.Unmarshal([]byte(d.must(append([]string{"--json", "create"}, args...)...)), &sb); err != nil {
			t.Fatal(err)
		}
		if out := d.must("exec", sb.ID, "--", "echo", "hi"); out != "hi\n" {
			t.Fatalf("exec: %q", out)
		}
		took := time.Since(start)
		if (args[0] == "--pool") != (sb.Labels["paddock.dev/pool"] == "kpool") {
			t.Fatalf("sandbox from %v has labels %v", args, sb.Labels)
		}
		return sb.ID, took
	}
	warmID, warm := createToExec("--pool", "kpool")
	coldID, cold := createToExec("--image", "busybox")
	t.Logf("figure: kubernetes backend, pool claim to first exec %v, cold create to first exec %v", warm.Round(time.Millisecond), cold.Round(time.Millisecond))
	if warm >= cold {
		t.Errorf("a claim from the warm pool (%v) was not faster than a cold create (%v)", warm, cold)
	}
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+warmID, metav1.GetOptions{}); err != nil {
		t.Fatalf("the claimed sandbox's pod: %v", err)
	}
	poolReady(t, d, "kpool", 2) // refilled

	// Removing the pool removes its unclaimed sandboxes, pods and all; the
	// claimed one stays.
	var pooled struct{ Sandboxes []struct{ ID string } }
	if err := json.Unmarshal([]byte(d.must("--json", "ls", "--label", "paddock.dev/pool=kpool")), &pooled); err != nil {
		t.Fatal(err)
	}
	if len(pooled.Sandboxes) < 3 {
		t.Fatalf("the pool's sandboxes: %+v", pooled)
	}
	d.must("pool", "rm", "kpool")
	for _, p := range pooled.Sandboxes {
		if p.ID == warmID {
			continue
		}
		waitPodGone(ctx, t, c, p.ID)
	}
	if got := d.must("exec", warmID, "--", "echo", "kept"); got != "kept\n" {
		t.Fatalf("the claimed sandbox after the pool was removed: %q", got)
	}
	for _, id := range []string{warmID, coldID} {
		d.must("rm", id)
		checkGone(ctx, t, c, id)
	}
	if out := d.must("ls"); strings.Contains(out, "kpool") {
		t.Errorf("sandboxes of the removed pool are listed:\n%s", out)
	}
}
