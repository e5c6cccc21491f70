package kube

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// nodeHold is a finalizer that stands for a node's kubelet: the pod stays,
// with its deletion time set, until the "kubelet" confirms (the test
// removes it) or the pod is deleted with no grace period, which the API
// server honours without the node.
const nodeHold = "test.paddock.dev/kubelet"

// lostPodBackend is a backend on a fake API server whose pod deletes with
// grace period 0 remove the pod at once, counting them in forced.
func lostPodBackend(t *testing.T, forced *atomic.Int32) (*Backend, client.WithWatch) {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			var o client.DeleteOptions
			o.ApplyOptions(opts)
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 {
				return nil
			}
			if o.Preconditions == nil || o.Preconditions.UID == nil {
				t.Errorf("a forced delete of %s without the pod's UID as a precondition", obj.GetName())
			}
			forced.Add(1)
			return release(ctx, c, obj.GetName())
		},
	})
	b, err := New(Options{Name: "runc", Client: cl, Namespace: "ns", Instance: "pd-a", ImagePrefix: "paddock.local"})
	if err != nil {
		t.Fatal(err)
	}
	return b, cl
}

// release removes nodeHold from the pod name: its node confirmed.
func release(ctx context.Context, c client.Client, name string) error {
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	pod.Finalizers = nil
	return c.Update(ctx, &pod)
}

func heldPod(ctx context.Context, t *testing.T, cl client.Client, name string, deleted bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Finalizers: []string{nodeHold}},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
	}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if deleted {
		grace := int64(5)
		if err := cl.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDestroyedPodOfALostNode: a destroyed sandbox's pod whose node never
// confirms its deletion is deleted without the node once it is overdue; a
// pod whose node confirms in time is not; a stopped sandbox's pod is never
// forced, and the error says the node has not confirmed; a pod never
// deleted is waited for until the limit, and the error says so.
func TestDestroyedPodOfALostNode(t *testing.T) {
	ctx := context.Background()

	t.Run("node lost", func(t *testing.T) {
		var forced atomic.Int32
		b, cl := lostPodBackend(t, &forced)
		heldPod(ctx, t, cl, "paddock-lost", true)
		start := time.Now()
		if err := b.waitPodGoneAfter(ctx, "lost", "paddock-lost", 300*time.Millisecond, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if forced.Load() != 1 {
			t.Errorf("forced deletes: %d, want 1", forced.Load())
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the overdue pod went after %v", took)
		}
	})

	t.Run("node confirms", func(t *testing.T) {
		var forced atomic.Int32
		b, cl := lostPodBackend(t, &forced)
		heldPod(ctx, t, cl, "paddock-slow", true)
		time.AfterFunc(200*time.Millisecond, func() {
			if err := release(ctx, cl, "paddock-slow"); err != nil {
				t.Error(err)
			}
		})
		if err := b.waitPodGoneAfter(ctx, "slow", "paddock-slow", time.Hour, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if forced.Load() != 0 {
			t.Errorf("a pod whose node confirmed was forced")
		}
	})

	t.Run("stop does not force", func(t *testing.T) {
		var forced atomic.Int32
		b, cl := lostPodBackend(t, &forced)
		heldPod(ctx, t, cl, "paddock-stopped", true)
		err := b.waitPodGoneAfter(ctx, "stopped", "paddock-stopped", -1, 500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "node node-a") || !strings.Contains(err.Error(), "has not confirmed") {
			t.Fatalf("waiting for a stopped sandbox's pod its node keeps: %v", err)
		}
		if forced.Load() != 0 {
			t.Errorf("a stopped sandbox's pod was forced")
		}
	})

	t.Run("never deleted", func(t *testing.T) {
		var forced atomic.Int32
		b, cl := lostPodBackend(t, &forced)
		heldPod(ctx, t, cl, "paddock-kept", false)
		err := b.waitPodGoneAfter(ctx, "kept", "paddock-kept", 0, 500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "still there") {
			t.Fatalf("waiting for a pod never deleted: %v", err)
		}
		if forced.Load() != 0 {
			t.Errorf("a pod nobody deleted was forced")
		}
	})
}
