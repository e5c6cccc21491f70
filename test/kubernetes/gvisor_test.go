package kubernetes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRuntimeClassesOnKubernetes: `--kube-runtime-classes` maps Paddock's
// runtimes to RuntimeClasses; `create --runtime gvisor` gives a pod of the
// class mapped to gvisor, `paddock info` names each class, a runtime
// without a class is refused, and a daemon offering two runtimes re-adopts
// the sandboxes of both after a restart (each runtime's backend lists only
// its own objects; before, each took the other's for orphans and deleted
// them).
//
// The test cluster cannot run gVisor itself: gVisor's containerd shim
// sets its own OOM score to -999, which needs CAP_SYS_RESOURCE, and this
// host withholds that capability; containerd's runc shim driving runsc
// starts the pod sandbox but not its container. So the class mapped to
// gvisor here is a RuntimeClass whose handler is runc: what is tested is
// Paddock's side of the mapping, on a real cluster.
func TestRuntimeClassesOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const class = "paddock-test-second"
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc"}
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	d := startPaddock(t, c, "--kube-runtime-classes", "runc=,gvisor="+class)
	importImage(ctx, t, d, "busybox")

	info := d.must("info")
	if !strings.Contains(info, "kubernetes, RuntimeClass "+class) || !strings.Contains(info, "kubernetes, the cluster's default RuntimeClass") {
		t.Fatalf("paddock info does not name the RuntimeClasses:\n%s", info)
	}
	if _, errOut, code := d.run("create", "--image", "busybox", "--runtime", "crun"); code == 0 || !strings.Contains(errOut, "crun") {
		t.Fatalf("create --runtime crun without a class: exit %d, %q", code, errOut)
	}

	ids := map[string]string{} // runtime -> sandbox
	for _, runtime := range []string{"gvisor", "runc"} {
		var sb struct{ ID, State, Runtime string }
		if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox", "--runtime", runtime)), &sb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.run("rm", sb.ID) })
		if sb.State != "running" || sb.Runtime != runtime {
			t.Fatalf("created sandbox: %+v", sb)
		}
		ids[runtime] = sb.ID
		pod, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if pod.Spec.RuntimeClassName != nil {
			got = *pod.Spec.RuntimeClassName
		}
		if want := map[string]string{"gvisor": class, "runc": ""}[runtime]; got != want {
			t.Fatalf("%s sandbox's pod has runtimeClassName %q, want %q", runtime, got, want)
		}
		d.must("exec", sb.ID, "--", "sh", "-c", "echo "+runtime+" > /home/user/f")
	}

	d.stop()
	d.start()
	for runtime, id := range ids {
		var st struct{ State, Reason string }
		if err := json.Unmarshal([]byte(d.must("--json", "inspect", id)), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != "running" {
			t.Fatalf("%s sandbox %s after a daemon restart: %+v", runtime, id, st)
		}
		if got := d.must("exec", id, "--", "cat", "/home/user/f"); got != runtime+"\n" {
			t.Fatalf("%s sandbox after a daemon restart: %q", runtime, got)
		}
	}

	for _, id := range ids {
		d.must("rm", id)
	}
	for _, id := range ids {
		checkGone(ctx, t, c, id)
	}
}
