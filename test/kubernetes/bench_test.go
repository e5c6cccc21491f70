package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestKubernetesBench measures, in one run on the same cluster, a plain
// pod's create to Ready plus one exec (the baseline) against Paddock's
// cold create to the first exec's output on the kubernetes backend, and
// the same Paddock create on the local runc backend of this host; then a
// claim from a pool to first exec on both (the cluster's SandboxWarmPool
// against Paddock's pool on this host), and a burst of concurrent claims
// against the cluster's pool (claimBurst). It runs
// PADDOCK_K8S_BENCH_N rounds (default 3) and, with PADDOCK_K8S_BENCH_OUT
// set, writes the figures there as Markdown (`make bench-kubernetes`).
func TestKubernetesBench(t *testing.T) {
	c := clusterFor(t)
	n := 3
	if v := os.Getenv("PADDOCK_K8S_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100 {
			t.Fatalf("PADDOCK_K8S_BENCH_N=%q: want 1 to 100", v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	d := startPaddock(t, c)
	importImage(ctx, t, d, "busybox")

	var plain, kube, local []time.Duration
	for i := range n {
		plain = append(plain, plainPodToExec(ctx, t, c, fmt.Sprintf("bench-%d", i)))
		kube = append(kube, paddockCreateToExec(t, d))
	}
	ld := startLocalPaddock(t, d)
	for range n {
		local = append(local, paddockCreateToExec(t, ld))
	}
	// Warm claims, one at a time: the cluster's SandboxWarmPool against
	// Paddock's pool on this host.
	var kubeWarm, localWarm []time.Duration
	var warmLog string // d's log over its warm claims
	for _, pd := range []*paddockd{d, ld} {
		setBenchPool(t, pd, 2)
		from := pd.log.Len()
		for range n {
			took := paddockClaimToExec(t, pd)
			if pd == d {
				kubeWarm = append(kubeWarm, took)
			} else {
				localWarm = append(localWarm, took)
			}
			poolReady(t, pd, "bpool", 2)
		}
		if pd == d {
			warmLog = d.log.String()[from:]
		}
	}
	ld.must("pool", "rm", "bpool")
	burst := claimBurst(t, c, d)
	d.must("pool", "rm", "bpool")

	pm, km, lm := median(plain), median(kube), median(local)
	kwm, lwm := median(kubeWarm), median(localWarm)
	rows := [][3]string{
		{"plain pod: create to Ready, then one exec (baseline)", fmtSpread(plain), "1.00"},
		{"Paddock, kubernetes backend: create to first exec output", fmtSpread(kube), fmt.Sprintf("%.2f", float64(km)/float64(pm))},
		{"Paddock, local runc backend: create to first exec output", fmtSpread(local), fmt.Sprintf("%.2f", float64(lm)/float64(pm))},
		{"Paddock, kubernetes backend: claim from a SandboxWarmPool to first exec output", fmtSpread(kubeWarm), fmt.Sprintf("%.2f (%.2fx the local pool claim; goal at most 2x)", float64(kwm)/float64(pm), float64(kwm)/float64(lwm))},
		{"Paddock, local runc backend: pool claim to first exec output", fmtSpread(localWarm), fmt.Sprintf("%.3f", float64(lwm)/float64(pm))},
		{burst.label, burst.spread, burst.rate},
	}
	rows = slices.Insert(rows, 4, claimBreakdown(warmLog)...)
	var b strings.Builder
	fmt.Fprintf(&b, "# Kubernetes backend against a plain pod, same run\n\n")
	qps := "100 (the default)"
	if v := os.Getenv("PADDOCK_KUBE_QPS"); v != "" {
		qps = v + " (PADDOCK_KUBE_QPS)"
	}
	fmt.Fprintf(&b, "- date: %s\n- machine: %s, %d CPUs, load average %s\n- cluster: the test cluster of test/kubernetes (one node, containerd 1.6, runc), Kubernetes %s\n- daemon: at most %s requests a second to the API server\n- rounds: %d, run one after another; the image is already on the node\n\n",
		time.Now().UTC().Format(time.RFC3339), hostDesc(), runtime.NumCPU(), loadAvg(), serverVersion(c), qps, n)
	b.WriteString("| figure | median (min to max) | ratio to the plain pod, or rate |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("PADDOCK_K8S_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// claimBreakdown is where a warm claim's time goes on the kubernetes
// backend, from the daemon's log over the claims: the daemon's create
// request, the backend's part of it (its logged total), and, of that, the
// wait for agent-sandbox to satisfy the SandboxClaim.
func claimBreakdown(log string) [][3]string {
	figure := func(match []string, key string) []time.Duration {
		var out []time.Duration
	lines:
		for _, l := range strings.Split(log, "\n") {
			for _, m := range match {
				if !strings.Contains(l, m) {
					continue lines
				}
			}
			for _, f := range strings.Fields(l) {
				v, ok := strings.CutPrefix(f, key+"=")
				if !ok {
					continue
				}
				if ms, err := strconv.Atoi(v); err == nil {
					out = append(out, time.Duration(ms)*time.Millisecond)
				} else if d, err := time.ParseDuration(v); err == nil {
					out = append(out, d)
				}
			}
		}
		return out
	}
	var rows [][3]string
	taken := []string{`msg="sandbox taken from warm pool"`}
	for _, f := range []struct {
		label string
		match []string
		key   string
	}{
		{"of a claim: the daemon's create request (POST /v1/sandboxes)", []string{"msg=request", "method=POST", "path=/v1/sandboxes "}, "took"},
		{"of it: the backend's claim (Secret, SandboxClaim, policy, the agent claimed)", taken, "total_ms"},
		{"of that: agent-sandbox satisfying the SandboxClaim, as the backend saw it", taken, "claim_satisfied_ms"},
		{"of a claim: the daemon's first exec request (POST /v1/sandboxes/ID/exec)", []string{"msg=request", "method=POST", "/exec "}, "took"},
	} {
		if ds := figure(f.match, f.key); len(ds) > 0 {
			rows = append(rows, [3]string{f.label, fmtSpread(ds), ""})
		} else {
			rows = append(rows, [3]string{f.label, "not in the daemon's log", ""})
		}
	}
	return rows
}

// plainPodToExec creates a busybox pod, waits until it is Ready, runs one
// exec through the API server, deletes it, and returns create to exec.
func plainPodToExec(ctx context.Context, t *testing.T, c *cluster.Cluster, name string) time.Duration {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	start := time.Now()
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer deletePod(t, c, "default", name)
	waitPodReady(ctx, t, c, "default", name)
	if out, err := execIn(ctx, c, "default", name, "echo", "hi"); err != nil || out != "hi\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	return time.Since(start)
}

// setBenchPool builds the template bpool (busybox) on d and sets its pool
// to min ready, waiting until they are.
func setBenchPool(t *testing.T, d *paddockd, min int) {
	t.Helper()
	d.buildTemplate("bpool", "name = \"bpool\"\nimage = \"busybox\"\n")
	// Small pods: the one test node has two CPUs to request.
	d.must("pool", "set", "bpool", "--min-ready", strconv.Itoa(min), "--cpu", "0.1", "--memory", "128M")
	poolReady(t, d, "bpool", min)
}

type burstFigure struct{ label, spread, rate string }

// claimBurst sends PADDOCK_K8S_BENCH_CLAIMS (default 10) concurrent
// claims to first exec against the cluster's pool bpool of
// PADDOCK_K8S_BENCH_POOL (default 5) ready sandboxes, and reports claims
// per second over the burst. Claims beyond the ready ones are served cold
// (by agent-sandbox from the template, or by Paddock when the pool shows
// none ready). The test cluster's node runs at most 140 pods, which bounds
// the claims plus the pool's refill, and has two CPUs for their requests (the
// pool's sandboxes are small: 0.1 CPU, requesting 10m).
func claimBurst(t *testing.T, c *cluster.Cluster, d *paddockd) burstFigure {
	t.Helper()
	pool, claims := envInt(t, "PADDOCK_K8S_BENCH_POOL", 5), envInt(t, "PADDOCK_K8S_BENCH_CLAIMS", 10)
	if claims+pool > 130 {
		t.Fatalf("%d claims against a pool of %d do not fit the test node's 140 pods", claims, pool)
	}
	setBenchPool(t, d, pool)
	type result struct {
		took time.Duration
		id   string
		err  error
	}
	// Each claim runs in its own goroutine, which must not end the test:
	// failures come back as errors.
	claim := func() result {
		start := time.Now()
		out, errOut, code := d.run("--json", "create", "--pool", "bpool")
		var sb struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &sb) != nil {
			return result{err: fmt.Errorf("create: exit %d: %s%s", code, out, errOut)}
		}
		if out, errOut, code := d.run("exec", sb.ID, "--", "echo", "hi"); code != 0 || out != "hi\n" {
			return result{id: sb.ID, err: fmt.Errorf("exec: exit %d: %q %s", code, out, errOut)}
		}
		return result{took: time.Since(start), id: sb.ID}
	}
	results := make(chan result, claims)
	start := time.Now()
	for range claims {
		go func() { results <- claim() }()
	}
	var took []time.Duration
	var ids []string
	tookBy := map[string]time.Duration{}
	var errs []error
	for range claims {
		r := <-results
		if r.id != "" {
			ids = append(ids, r.id)
		}
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		took = append(took, r.took)
		tookBy[r.id] = r.took
	}
	wall := time.Since(start)
	if len(errs) > 0 {
		for _, id := range ids {
			d.run("rm", id)
		}
		t.Fatalf("%d of %d concurrent claims failed; the first: %v", len(errs), claims, errs[0])
	}
	// agent-sandbox says which claims got a pool's Sandbox (warm) and
	// which one made from the template (cold); a create that found the
	// pool empty made no claim.
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var warm, cold []time.Duration
	for _, id := range ids {
		claim, err := dc.Resource(claimResource).Namespace("default").Get(context.Background(), "paddock-"+id, metav1.GetOptions{})
		if err != nil {
			cold = append(cold, tookBy[id])
			continue
		}
		name, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
		sb, err := dc.Resource(sandboxResource).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && sb.GetLabels()["agents.x-k8s.io/launch-type"] == "warm" {
			warm = append(warm, tookBy[id])
		} else {
			cold = append(cold, tookBy[id])
		}
	}
	// Removed eight at a time: one by one takes minutes at a hundred.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if out, errOut, code := d.run("rm", id); code != 0 {
				t.Errorf("rm %s: exit %d: %s%s", id, code, out, errOut)
			}
		}()
	}
	wg.Wait()
	spread := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		return fmtSpread(ds)
	}
	return burstFigure{
		label: fmt.Sprintf("Paddock, kubernetes backend: %d concurrent claims to first exec output against a SandboxWarmPool of %d (%d got one of the pool's ready pods: %s; %d a new pod: %s)",
			claims, pool, len(warm), spread(warm), len(cold), spread(cold)),
		spread: fmtSpread(took) + fmt.Sprintf(", all in %s", wall.Round(10*time.Millisecond)),
		rate:   fmt.Sprintf("%.1f claims/s", float64(claims)/wall.Seconds()),
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// paddockCreateToExec creates a busybox sandbox with the CLI, runs one
// exec, removes it, and returns create to the exec's output.
func paddockCreateToExec(t *testing.T, d *paddockd) time.Duration {
	t.Helper()
	return paddockToExec(t, d, "--image", "busybox")
}

// paddockClaimToExec is paddockCreateToExec from the pool bpool.
func paddockClaimToExec(t *testing.T, d *paddockd) time.Duration {
	t.Helper()
	return paddockToExec(t, d, "--pool", "bpool")
}

func paddockToExec(t *testing.T, d *paddockd, from ...string) time.Duration {
	t.Helper()
	start := time.Now()
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(d.must(append([]string{"--json", "create"}, from...)...)), &sb); err != nil {
		t.Fatal(err)
	}
	if out := d.must("exec", sb.ID, "--", "echo", "hi"); out != "hi\n" {
		t.Fatalf("exec: %q", out)
	}
	took := time.Since(start)
	d.must("rm", sb.ID)
	return took
}

// startLocalPaddock runs a second daemon, on this host's runc backend,
// with its own state dir beside d's.
func startLocalPaddock(t *testing.T, d *paddockd) *paddockd {
	t.Helper()
	dir, err := os.MkdirTemp("", "pdk-local")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ld := &paddockd{t: t, bin: d.bin, dir: dir, socket: filepath.Join(dir, "pd.sock"), log: new(bytes.Buffer), cluster: d.cluster, local: true}
	ld.start()
	t.Cleanup(ld.stop)
	return ld
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func fmtSpread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("%s (%s to %s)", r(median(s)), r(s[0]), r(s[len(s)-1]))
}

func hostDesc() string {
	out, err := exec.Command("uname", "-srm").Output()
	if err != nil {
		return runtime.GOOS + "/" + runtime.GOARCH
	}
	return strings.TrimSpace(string(out))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func serverVersion(c *cluster.Cluster) string {
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		return "unknown"
	}
	return v.GitVersion
}
