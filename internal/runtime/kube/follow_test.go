package kube

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// countingClient counts the reads a wait makes.
type countingClient struct {
	client.WithWatch
	gets atomic.Int32
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.WithWatch.Get(ctx, key, obj, opts...)
}

// TestWaitClaimedWatches: a wait for a claim reads it once and then
// follows its changes as the API server sends them (no polling), sees the
// claim satisfied when it is, and sees a claim deleted under it.
func TestWaitClaimedWatches(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	cc := &countingClient{WithWatch: cl.(client.WithWatch)}
	b.o.Client, b.o.StartTimeout = cc, 10*time.Second
	for _, id := range []string{"w1", "w2"} {
		if err := cl.Create(ctx, &extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: "ns"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Satisfied after a while, with other claims changing meanwhile.
	go func() {
		time.Sleep(400 * time.Millisecond)
		var other extv1.SandboxClaim
		if err := cl.Get(ctx, b.key("w2"), &other); err == nil {
			other.Labels = map[string]string{"x": "y"}
			cl.Update(ctx, &other)
		}
		time.Sleep(400 * time.Millisecond)
		var c extv1.SandboxClaim
		if err := cl.Get(ctx, b.key("w1"), &c); err != nil {
			t.Error(err)
			return
		}
		c.Status.SandboxStatus.Name = "paddock-pool-x-abcde"
		if err := cl.Status().Update(ctx, &c); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	name, _, _, err := b.waitClaimed(ctx, "w1")
	if err != nil || name != "paddock-pool-x-abcde" {
		t.Fatalf("waitClaimed = %q, %v", name, err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("waitClaimed took %s", took)
	}
	if n := cc.gets.Load(); n != 1 {
		t.Errorf("the wait read the claim %d times in %s; want one read and a watch", n, time.Since(start))
	}

	// Deleted under the wait.
	go func() {
		time.Sleep(300 * time.Millisecond)
		cl.Delete(ctx, &extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: objectName("w2"), Namespace: "ns"}})
	}()
	if _, _, _, err := b.waitClaimed(ctx, "w2"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("waitClaimed of a claim deleted meanwhile: %v", err)
	}
}

// TestWaitPodIPFollowsThePod: a wait for a pod that does not exist yet
// polls until it does, then follows it to Running with an address; a pod
// that fails says so with its reason.
func TestWaitPodIPFollowsThePod(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	b.o.StartTimeout = 10 * time.Second
	go func() {
		time.Sleep(200 * time.Millisecond)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if err := cl.Create(ctx, pod); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(300 * time.Millisecond)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.9"}
		if err := cl.Status().Update(ctx, pod); err != nil {
			t.Error(err)
		}
	}()
	if ip, err := b.waitPodIP(ctx, "s1", "p1"); err != nil || ip != "10.213.0.9" {
		t.Fatalf("waitPodIP = %q, %v", ip, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "the node ran low on memory"}
		cl.Status().Update(ctx, pod)
	}()
	if _, err := b.waitPodIP(ctx, "s2", "p2"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "the node ran low on memory") {
		t.Fatalf("waitPodIP of a failed pod: %v", err)
	}
	b.o.StartTimeout = 300 * time.Millisecond
	if _, err := b.waitPodIP(ctx, "s3", "p3"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no pod yet") {
		t.Fatalf("waitPodIP of a pod never made: %v", err)
	}
	// A pod whose image the node cannot find says so and what to do.
	pull := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p4", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "paddock.local/busybox:0123"`}}}}}}
	if err := cl.Create(ctx, pull); err != nil {
		t.Fatal(err)
	}
	if _, err := b.waitPodIP(ctx, "s4", "p4"); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "ImagePullBackOff") ||
		!strings.Contains(err.Error(), "paddock images export") {
		t.Fatalf("waitPodIP of a pod without its image: %v", err)
	}
	if _, err := b.waitPodIP(ctx, "s3", "p3"); err == nil || strings.Contains(err.Error(), "images export") {
		t.Fatalf("waitPodIP of a pod never made speaks of images: %v", err)
	}
}

// TestWaitFollowsThePodsWatch: Wait follows a running pod through the
// backend's one watch of its pods (no read per sandbox per second), and
// says at once when the pod ends and when it is deleted.
func TestWaitFollowsThePodsWatch(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	t.Cleanup(func() { b.Close() })
	cc := &countingClient{WithWatch: cl.(client.WithWatch)}
	b.o.Client = cc
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.9",
		ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	for _, id := range []string{"s1", "s2"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: "ns", Labels: b.labels(id)}}
		if err := cl.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = running
		if err := cl.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		exit runtime.Exit
		err  error
	}
	wait := func(id string) chan result {
		ch := make(chan result, 1)
		go func() {
			e, err := b.Wait(ctx, id)
			ch <- result{e, err}
		}()
		return ch
	}
	w1, w2 := wait("s1"), wait("s2")
	time.Sleep(2500 * time.Millisecond)
	select {
	case r := <-w1:
		t.Fatalf("Wait of a running pod returned %+v", r)
	default:
	}
	if n := cc.gets.Load(); n > 4 {
		t.Errorf("two waits read their pods %d times in 2.5 s; want the watch to serve them", n)
	}

	// The agent is OOM-killed.
	var pod corev1.Pod
	if err := cl.Get(ctx, b.key("s1"), &pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
	if err := cl.Status().Update(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w1:
		if r.err != nil || r.exit.Reason != "out of memory" {
			t.Fatalf("Wait after an OOM kill: %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait did not see the pod end")
	}
	// The other pod is deleted.
	if err := cl.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: objectName("s2"), Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w2:
		if r.err != nil || r.exit.Reason != "its pod was deleted" {
			t.Fatalf("Wait after the pod was deleted: %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait did not see the pod deleted")
	}
	// A sandbox without a pod: at once.
	if e, err := b.Wait(ctx, "s3"); err != nil || e.Reason != "no pod runs" {
		t.Fatalf("Wait without a pod: %+v %v", e, err)
	}
}
