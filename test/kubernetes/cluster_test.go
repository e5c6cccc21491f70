package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestPlainPodRunsAndExecs proves the cluster runs a pod from an imported
// image and execs in it through the API server, the kubelet and containerd's
// stream server, and measures the baseline the Kubernetes backend is judged
// against: a plain pod's create to Ready, and one exec.
func TestPlainPodRunsAndExecs(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           cluster.BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "3600"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	start := time.Now()
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, c, "default", pod.Name) })
	waitPodReady(ctx, t, c, "default", pod.Name)
	ready := time.Since(start)

	var execs []time.Duration
	for i := range 5 {
		start := time.Now()
		out, err := execIn(ctx, c, "default", pod.Name, "echo", fmt.Sprintf("hello %d", i))
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		execs = append(execs, time.Since(start))
		if want := fmt.Sprintf("hello %d\n", i); out != want {
			t.Fatalf("exec printed %q, want %q", out, want)
		}
	}
	slices.Sort(execs)
	t.Logf("figure: plain pod create to Ready %v; exec (echo) median %v of %d (min %v, max %v)",
		ready.Round(time.Millisecond), execs[len(execs)/2].Round(time.Millisecond), len(execs),
		execs[0].Round(time.Millisecond), execs[len(execs)-1].Round(time.Millisecond))
}

var sandboxResource = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

const sandboxYAML = `
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: first
  namespace: default
spec:
  podTemplate:
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: main
        image: ` + cluster.BusyboxImage + `
        imagePullPolicy: Never
        command: ["sleep", "3600"]
`

// TestAgentSandboxRunsPod proves agent-sandbox's CRDs and controller work on
// the cluster: a Sandbox created from YAML gets a Running pod and becomes
// Ready, and deleting it removes the pod (the controller manager's garbage
// collector follows the owner reference).
func TestAgentSandboxRunsPod(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := cluster.DecodeObjects([]byte(sandboxYAML))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode: %v (%d objects)", err, len(objs))
	}
	sbs := dyn.Resource(sandboxResource).Namespace("default")
	start := time.Now()
	if _, err := sbs.Create(ctx, objs[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbs.Delete(context.Background(), "first", metav1.DeleteOptions{}) })

	var podName string
	if err := poll(ctx, func() error {
		sb, err := sbs.Get(ctx, "first", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !conditionTrue(sb, "Ready") {
			return fmt.Errorf("sandbox not Ready: %v", sb.Object["status"])
		}
		sel, _, _ := unstructured.NestedString(sb.Object, "status", "selector")
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("want one Running pod for selector %q, have %d", sel, len(pods.Items))
		}
		podName = pods.Items[0].Name
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: agent-sandbox Sandbox create to Ready %v", time.Since(start).Round(time.Millisecond))

	out, err := execIn(ctx, c, "default", podName, "cat", "/etc/hostname")
	if err != nil {
		t.Fatalf("exec in the sandbox's pod: %v", err)
	}
	if strings.TrimSpace(out) == "" {
		t.Fatal("the sandbox's pod has no hostname")
	}

	deleted := time.Now()
	if err := sbs.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() error {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s still there (%v)", podName, err)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: Sandbox delete to its pod gone %v", time.Since(deleted).Round(time.Millisecond))
}

func conditionTrue(o *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func poll(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitPodReady(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	if err := poll(ctx, func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("pod %s not Ready: phase %s %v", name, p.Status.Phase, p.Status.ContainerStatuses)
	}); err != nil {
		t.Fatal(err)
	}
}

func deletePod(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete pod %s: %v", name, err)
	}
}

// execIn runs argv in the pod's first container through the API server and
// returns its stdout; anything on stderr is an error.
func execIn(ctx context.Context, c *cluster.Cluster, ns, pod string, argv ...string) (string, error) {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("%w (stderr %q)", err, stderr.String())
	}
	if stderr.Len() > 0 {
		return stdout.String(), fmt.Errorf("stderr: %q", stderr.String())
	}
	return stdout.String(), nil
}
