package kubernetes_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWarmPoolGrowsOnKubernetes: a pool with max_ready kept by the
// cluster grows after a burst as Paddock's own pools do: three creates
// against a pool of one set the SandboxWarmPool's replicas to three, and
// the cluster makes the pods (the pool shows three ready).
func TestWarmPoolGrowsOnKubernetes(t *testing.T) {
	_, d, dc, ctx := poolTest(t)
	d.buildTemplate("grow", "name = \"grow\"\nimage = \"busybox\"\n")
	d.must("pool", "set", "grow", "--min-ready", "1", "--max-ready", "3")
	poolReady(t, d, "grow", 1)

	var wg sync.WaitGroup
	ids := make([]string, 3)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, code := d.run("--json", "create", "--pool", "grow")
			if code != 0 {
				t.Errorf("create %d: exit %d: %s", i, code, errOut)
				return
			}
			var sb struct{ ID string }
			if err := json.Unmarshal([]byte(out), &sb); err != nil {
				t.Error(err)
			}
			ids[i] = sb.ID
		}()
	}
	wg.Wait()
	defer func() {
		for _, id := range ids {
			if id != "" {
				d.run("rm", "-f", id)
			}
		}
	}()
	if t.Failed() {
		return
	}
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for {
		wp := clusterPool(ctx, t, dc, "grow")
		if n, _, _ := unstructured.NestedInt64(wp.Object, "spec", "replicas"); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SandboxWarmPool did not grow to 3 replicas: %v", wp.Object["spec"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("figure: SandboxWarmPool resized %v after the burst's last create", time.Since(start).Round(time.Millisecond))
	poolReady(t, d, "grow", 3)
	var list struct {
		Pools []struct {
			Name   string
			Target int
		}
	}
	if err := json.Unmarshal([]byte(d.must("--json", "pool", "ls")), &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Pools {
		if p.Name == "grow" && p.Target != 3 {
			t.Errorf("pool ls target %d, want 3", p.Target)
		}
	}
	d.must("pool", "rm", "grow")
}
