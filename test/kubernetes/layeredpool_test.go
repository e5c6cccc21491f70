package kubernetes_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLayeredTemplatePoolOnKubernetes: a pool of a template made by build
// steps is kept by the cluster too (a SandboxWarmPool whose pods run the
// template's image, its build layer stacked on busybox). Each pool pod
// first copies the image's home into its home volume (an init container
// of the image's agent), so the template's start command, run by the
// pool's agents at boot, finds the step's home file. A claim has the
// step's files outside the home and in it, the start command's output
// says what it read, and the Sandbox it took no longer seeds its home: a
// change to the home survives a stop and start.
func TestLayeredTemplatePoolOnKubernetes(t *testing.T) {
	c, d, dc, ctx := poolTest(t)
	d.buildTemplate("klayer", `name = "klayer"
image = "busybox"
start = ["sh", "-c", "echo read-$(cat /home/user/notes); cat /home/user/notes > /tmp/started-with; echo serving; exec sleep 3600"]

[ready]
log = "^serving$"
timeout = "60s"

[[step]]
run = "mkdir -p /opt/tool && echo made > /opt/tool/out && echo notes > /home/user/notes"
`)
	archive := filepath.Join(d.dir, "klayer.tar")
	if out := d.must("template", "export", "klayer", "-o", archive); !strings.Contains(out, "paddock.local/template-klayer:") {
		t.Fatalf("template export: %q", out)
	}
	err := c.ImportImages(ctx, archive)
	os.Remove(archive)
	if err != nil {
		t.Fatal(err)
	}

	d.must("pool", "set", "klayer", "--min-ready", "1")
	poolReady(t, d, "klayer", 1)
	obj := clusterPool(ctx, t, dc, "klayer").GetName()
	unclaimed := poolPods(ctx, t, c, obj, false)
	if len(unclaimed) == 0 {
		t.Fatal("no unclaimed pod of the pool runs")
	}
	ctr := unclaimed[0].Spec.Containers[0]
	if !strings.Contains(ctr.Image, "paddock.local/template-klayer:") {
		t.Errorf("the pool's pods run %s, not the template's image", ctr.Image)
	}
	if ic := unclaimed[0].Spec.InitContainers; len(ic) != 1 || ic[0].Image != ctr.Image {
		t.Errorf("the pool's pods' init containers: %+v; want the image's agent seeding the home", ic)
	}

	var sb struct {
		ID     string
		Labels map[string]string
	}
	start := time.Now()
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--pool", "klayer")), &sb); err != nil {
		t.Fatal(err)
	}
	if out := d.must("exec", sb.ID, "--", "cat", "/home/user/notes"); out != "notes\n" {
		t.Fatalf("the claimed sandbox's home file: %q", out)
	}
	warm := time.Since(start)
	// A cold create from the template: its pod seeds its home too, then
	// starts the command and waits for its check.
	start = time.Now()
	var cold struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--template", "klayer")), &cold); err != nil {
		t.Fatal(err)
	}
	if out := d.must("exec", cold.ID, "--", "cat", "/home/user/notes", "/tmp/started-with"); out != "notes\nnotes\n" {
		t.Errorf("the cold sandbox's home file and what its start command read: %q", out)
	}
	t.Logf("figure: kubernetes backend, claim from a pool of a template with a build step to first exec %v, cold create from it (seeded home, start command) %v",
		warm.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	d.must("rm", cold.ID)
	if sb.Labels["paddock.dev/cluster-pool"] != "klayer" {
		t.Fatalf("the create from the pool was not a claim: labels %v", sb.Labels)
	}
	claim, err := dc.Resource(claimResource).Namespace("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's SandboxClaim: %v", err)
	}
	const want = "made\nnotes\nnotes\n"
	check := func(what string) {
		t.Helper()
		if got := d.must("exec", sb.ID, "--", "cat", "/opt/tool/out", "/home/user/notes", "/tmp/started-with"); got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("the claimed sandbox's files and what its start command read")
	var claimed struct {
		Spec struct {
			PodTemplate struct {
				Spec struct{ InitContainers []any }
			}
		}
	}
	// The pool's Sandbox the claim took carries the sandbox's label now.
	taken, err := dc.Resource(sandboxResource).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: "paddock.dev/sandbox=" + sb.ID})
	if err != nil || len(taken.Items) != 1 {
		t.Fatalf("the Sandbox of sandbox %s: %v (%d found; the claim says %v)", sb.ID, err, len(taken.Items), claim.Object["status"])
	}
	if !strings.HasPrefix(taken.Items[0].GetName(), obj+"-") {
		t.Errorf("the claim's Sandbox %s is not one of the pool's (%s-...)", taken.Items[0].GetName(), obj)
	}
	raw, _ := taken.Items[0].MarshalJSON()
	if err := json.Unmarshal(raw, &claimed); err != nil {
		t.Fatal(err)
	}
	if n := len(claimed.Spec.PodTemplate.Spec.InitContainers); n != 0 {
		t.Errorf("the claimed Sandbox still seeds its later pods' home (%d init containers)", n)
	}
	// It ran in the pool's pod before the claim, the home already seeded.
	if logs := d.must("proc", "logs", sb.ID, "start"); !strings.Contains(logs, "read-notes\nserving\n") {
		t.Errorf("the start process's output: %q", logs)
	}
	// The step ran as root: its file is root's, in the user's home.
	d.must("exec", sb.ID, "--", "sh", "-c", "rm -f /home/user/notes && echo changed > /home/user/notes")
	d.must("stop", sb.ID)
	d.must("start", sb.ID)
	// The home is the sandbox's now: a later start does not write the
	// template's files over it. The start command does not run again.
	if got := d.must("exec", sb.ID, "--", "cat", "/opt/tool/out", "/home/user/notes"); got != "made\nchanged\n" {
		t.Errorf("after a stop and start: %q", got)
	}

	d.must("pool", "rm", "klayer")
	d.must("rm", sb.ID)
	checkGone(ctx, t, c, sb.ID)
}
