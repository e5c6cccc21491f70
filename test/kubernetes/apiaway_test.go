package kubernetes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestAPIServerAwayOnKubernetes: the API server stops answering for a
// while (frozen, so connections hang rather than fail fast). A running
// sandbox keeps working (exec and files go to its pod's agent, not
// through the API server); a create in the meantime fails in bounded time
// with an error that says the API server did not answer; once the server
// is back the same daemon, never restarted, creates, stops, starts and
// removes again, and nothing of the failed create is left on the cluster.
func TestAPIServerAwayOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	d := startPaddock(t, c)
	importImage(ctx, t, d, "busybox")
	var a struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.run("rm", a.ID) })

	thaw := freeze(t, c.FreezeAPIServer, c.ThawAPIServer) // lostnode_test.go

	if got := d.must("exec", a.ID, "--", "sh", "-c", "echo during > /home/user/during; cat /home/user/during"); got != "during\n" {
		t.Fatalf("exec while the API server is away: %q", got)
	}
	start := time.Now()
	out, errOut, code := d.run("--json", "create", "--image", "busybox")
	took := time.Since(start)
	t.Logf("figure: create with the API server away failed after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(errOut))
	if code == 0 {
		t.Fatalf("create succeeded with the API server away: %s", out)
	}
	if !strings.Contains(errOut, "API server") {
		t.Errorf("the create's error does not say the API server did not answer: %q", errOut)
	}
	if took > 45*time.Second {
		t.Errorf("the create took %v to fail", took)
	}
	thaw()

	// The failed create's sandbox is in error with its reason; rm removes
	// whatever it left on the cluster.
	var list struct {
		Sandboxes []struct {
			ID, State string
			Reason    string `json:"error_reason"`
		}
	}
	if err := json.Unmarshal([]byte(d.must("--json", "ls")), &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Sandboxes {
		if s.ID == a.ID {
			if s.State != "running" {
				t.Errorf("the running sandbox after the outage: %+v", s)
			}
			continue
		}
		if s.State != "error" || !strings.Contains(s.Reason, "API server") {
			t.Errorf("the failed create's sandbox: %+v", s)
		}
		d.must("rm", s.ID)
		checkGone(ctx, t, c, s.ID)
	}

	// Back to normal without a daemon restart.
	var b struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &b); err != nil {
		t.Fatal(err)
	}
	d.must("exec", b.ID, "--", "sh", "-c", "echo kept > /home/user/f")
	d.must("stop", b.ID)
	d.must("start", b.ID)
	if got := d.must("exec", b.ID, "--", "cat", "/home/user/f"); got != "kept\n" {
		t.Fatalf("file after stop/start: %q", got)
	}
	for _, id := range []string{a.ID, b.ID} {
		d.must("rm", id)
		checkGone(ctx, t, c, id)
	}
}
