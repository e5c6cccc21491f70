package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTemplateBuildOnKubernetes: a template's build steps run in a pod
// and keep what they made anywhere in it, not only in the home
// directory: a file under /opt, a file the step removed from the image,
// a file in the home. The template exported as one image and imported
// into the node, a sandbox from it has all three, through a stop and
// start. A rebuild whose second step changed runs both steps again (the
// pod cannot start on the first step's layer) and gives the new result.
// rm leaves nothing.
func TestTemplateBuildOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")

	const first = "mkdir -p /opt/tool && echo made > /opt/tool/out && rm /bin/vi && echo notes > /home/user/notes"
	build := func(second string) {
		t.Helper()
		start := time.Now()
		d.buildTemplate("kbuild", "name = \"kbuild\"\nimage = \"busybox\"\n\n[[step]]\nrun = \""+first+"\"\n\n[[step]]\nrun = \""+second+"\"\n")
		t.Logf("build with %q: %s", second, time.Since(start).Round(time.Millisecond))
		archive := filepath.Join(d.dir, "kbuild.tar")
		out := d.must("template", "export", "kbuild", "-o", archive)
		if !strings.Contains(out, "paddock.local/template-kbuild:") {
			t.Fatalf("template export: %q", out)
		}
		defer os.Remove(archive)
		if err := c.ImportImages(ctx, archive); err != nil {
			t.Fatal(err)
		}
	}
	check := func(id, want string) {
		t.Helper()
		got := d.must("exec", id, "--", "sh", "-c", "cat /opt/tool/out /home/user/notes; test -e /bin/vi && echo vi-still-there; true")
		if got != want {
			t.Errorf("sandbox %s from the template:\n%s\nwant:\n%s", id, got, want)
		}
	}
	create := func() string {
		t.Helper()
		var sb struct{ ID, State string }
		if err := json.Unmarshal([]byte(d.must("--json", "create", "--template", "kbuild")), &sb); err != nil {
			t.Fatal(err)
		}
		if sb.State != "running" {
			t.Fatalf("create from the template: %+v", sb)
		}
		return sb.ID
	}

	build("echo two >> /opt/tool/out")
	// The agent sent only what changed since the pod started: the daemon
	// knew when that was.
	if m := regexp.MustCompile(`build layer taken[^\n]*unchanged_since=(\S+)`).FindStringSubmatch(d.log.String()); m == nil || strings.HasPrefix(m[1], "0001-") {
		t.Errorf("the build's layers were taken without the pod's start time: %q", m)
	} else {
		t.Logf("files unchanged since %s came without their content", m[1])
	}
	id := create()
	check(id, "made\ntwo\nnotes\n")
	// The home file came with the pod's seed container, not through the
	// agent; the Sandbox's later pods run without it.
	initContainers := func() []string {
		t.Helper()
		pod, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ic := range pod.Spec.InitContainers {
			names = append(names, ic.Name)
		}
		return names
	}
	if got := initContainers(); !slices.Equal(got, []string{"seed-home"}) {
		t.Errorf("the first pod's init containers: %v; want seed-home", got)
	}
	if strings.Contains(d.log.String(), "snapshot restored into the home directory") {
		t.Error("the template's home files were written through the agent as well")
	}
	d.must("stop", id)
	d.must("start", id)
	check(id, "made\ntwo\nnotes\n")
	if got := initContainers(); len(got) != 0 {
		t.Errorf("a later pod's init containers: %v; want none", got)
	}

	build("echo three >> /opt/tool/out")
	id2 := create()
	check(id2, "made\nthree\nnotes\n")
	check(id, "made\ntwo\nnotes\n")

	for _, sb := range []string{id, id2} {
		d.must("rm", sb)
		checkGone(ctx, t, c, sb)
	}
}
