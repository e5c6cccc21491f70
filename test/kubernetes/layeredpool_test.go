package kubernetes_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLayeredTemplatePoolOnKubernetes: a pool of a template made by build
// steps is kept by the cluster too (a SandboxWarmPool whose pods run the
// template's image, its build layer stacked on busybox). A claim from it
// has the step's files outside the home from the image and its home files
// written in by the claim (the home volume hides the image's), and the
// template's start command runs only then: it reads a home file the step
// made. The files stay through a stop and start.
func TestLayeredTemplatePoolOnKubernetes(t *testing.T) {
	c, d, dc, ctx := poolTest(t)
	d.buildTemplate("klayer", `name = "klayer"
image = "busybox"
start = ["sh", "-c", "cat /home/user/notes > /tmp/started-with; echo serving; exec sleep 3600"]

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
	for _, e := range ctr.Env {
		if e.Name == "PADDOCK_AGENT_START" {
			t.Errorf("the pool's pods start the template's command at boot, before a claim wrote its home files: %+v", e)
		}
	}

	var sb struct {
		ID     string
		Labels map[string]string
	}
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--pool", "klayer")), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.Labels["paddock.dev/cluster-pool"] != "klayer" {
		t.Fatalf("the create from the pool was not a claim: labels %v", sb.Labels)
	}
	if _, err := dc.Resource(claimResource).Namespace("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{}); err != nil {
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
	if logs := d.must("proc", "logs", sb.ID, "start"); !strings.Contains(logs, "serving\n") {
		t.Errorf("the start process's output: %q", logs)
	}
	d.must("exec", sb.ID, "--", "sh", "-c", "echo changed > /home/user/notes")
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
