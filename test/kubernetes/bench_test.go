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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestKubernetesBench measures, in one run on the same cluster, a plain
// pod's create to Ready plus one exec (the baseline) against Paddock's
// cold create to the first exec's output on the kubernetes backend, and
// the same Paddock create on the local runc backend of this host. It runs
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
	pm, km, lm := median(plain), median(kube), median(local)
	rows := [][3]string{
		{"plain pod: create to Ready, then one exec (baseline)", fmtSpread(plain), "1.00"},
		{"Paddock, kubernetes backend: create to first exec output", fmtSpread(kube), fmt.Sprintf("%.2f", float64(km)/float64(pm))},
		{"Paddock, local runc backend: create to first exec output", fmtSpread(local), fmt.Sprintf("%.2f", float64(lm)/float64(pm))},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Kubernetes backend against a plain pod, same run\n\n")
	fmt.Fprintf(&b, "- date: %s\n- machine: %s, %d CPUs, load average %s\n- cluster: the test cluster of test/kubernetes (one node, containerd 1.6, runc), Kubernetes %s\n- rounds: %d, run one after another; the image is already on the node\n\n",
		time.Now().UTC().Format(time.RFC3339), hostDesc(), runtime.NumCPU(), loadAvg(), serverVersion(c), n)
	b.WriteString("| figure | median (min to max) | ratio to the plain pod |\n|---|---|---|\n")
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

// paddockCreateToExec creates a busybox sandbox with the CLI, runs one
// exec, removes it, and returns create to the exec's output.
func paddockCreateToExec(t *testing.T, d *paddockd) time.Duration {
	t.Helper()
	start := time.Now()
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &sb); err != nil {
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
