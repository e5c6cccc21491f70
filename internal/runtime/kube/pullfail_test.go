package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestPullFailsForGood: the pull failures a retry does not mend are told
// apart from those it may (a registry down, a timeout), each with what to
// do about it.
func TestPullFailsForGood(t *testing.T) {
	for _, c := range []struct {
		reason string
		ok     bool
		hint   string
	}{
		{`ErrImagePull: failed to pull and unpack image "10.1.0.1:5000/p/x:1": failed to resolve reference "10.1.0.1:5000/p/x:1": failed to do request: Head "https://10.1.0.1:5000/v2/p/x/manifests/1": http: server gave HTTP response to HTTPS client`, true, "plain HTTP"},
		{`ImagePullBackOff: Back-off pulling image "r.example/p/x:1": ErrImagePull: failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized`, true, "PADDOCK_KUBE_IMAGE_PULL_SECRET"},
		{`ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "paddock.local/busybox:1": failed to resolve reference "paddock.local/busybox:1": paddock.local/busybox:1: not found`, true, "paddock images export"},
		{`ErrImagePull: x509: certificate signed by unknown authority`, true, "trust"},
		{`ErrImageNeverPull: Container image "paddock.local/busybox:1" is not present with pull policy of Never`, true, "paddock images export"},
		{`InvalidImageName: Failed to apply default image tag "UPPER/x": couldn't parse image name`, true, ""},
		// A retry may mend these.
		{`ErrImagePull: failed to do request: Head "https://r.example/v2/p/x/manifests/1": dial tcp 10.1.0.1:443: connect: connection refused`, false, ""},
		{`ErrImagePull: unexpected status from HEAD request: 503 Service Unavailable`, false, ""},
		{`ImagePullBackOff: Back-off pulling image "paddock.local/busybox:0123"`, false, ""},
		{`ContainerCreating: `, false, ""},
		{`CrashLoopBackOff: back-off 10s restarting failed container: image not found in the story`, false, ""},
	} {
		hint, ok := pullFailsForGood(c.reason)
		if ok != c.ok || !strings.Contains(hint, c.hint) {
			t.Errorf("pullFailsForGood(%q) = %q, %v; want %v and a hint with %q", c.reason, hint, ok, c.ok, c.hint)
		}
	}
}

// TestPullWatchGivesUp: a pull that fails for good fails the create
// pullGiveUp after it was first seen failing (the kubelet's second try),
// not before; a change to a reason a retry may mend starts the count
// again; an image the node must not pull fails at once.
func TestPullWatchGivesUp(t *testing.T) {
	const plain = `ErrImagePull: Head "https://10.1.0.1:5000/v2/": http: server gave HTTP response to HTTPS client`
	const backoff = `ImagePullBackOff: Back-off pulling image "10.1.0.1:5000/p/x:1": ` + plain
	t0 := time.Unix(1000, 0)
	var w pullWatch
	if w.failing(plain, t0) || w.failing(backoff, t0.Add(pullGiveUp/2)) {
		t.Fatal("gave up before pullGiveUp")
	}
	if !w.failing(plain, t0.Add(pullGiveUp)) || !strings.Contains(w.hint, "plain HTTP") {
		t.Fatalf("did not give up after pullGiveUp (hint %q)", w.hint)
	}
	var w2 pullWatch
	w2.failing(plain, t0)
	w2.failing(`ErrImagePull: dial tcp 10.1.0.1:5000: connect: connection refused`, t0.Add(pullGiveUp/2))
	if w2.failing(plain, t0.Add(pullGiveUp)) {
		t.Fatal("a failure a retry may mend did not start the count again")
	}
	var w3 pullWatch
	if !w3.failing(`ErrImageNeverPull: Container image "paddock.local/x:1" is not present with pull policy of Never`, t0) {
		t.Fatal("an image the node must not pull did not fail at once")
	}
}

// TestWaitPodIPGivesUpOnAnImageNeverPulled: a create whose pod's image
// the node must not pull and does not hold fails at once with what to do,
// not at the start timeout.
func TestWaitPodIPGivesUpOnAnImageNeverPulled(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	b.o.StartTimeout = time.Minute
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p5", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ErrImageNeverPull", Message: `Container image "paddock.local/busybox:0123" is not present with pull policy of Never`}}}}}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := b.waitPodIP(ctx, "s5", "p5")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "cannot pull its image") || !strings.Contains(err.Error(), "paddock images export") {
		t.Fatalf("waitPodIP of a pod whose image is never pulled: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("gave up after %s", d)
	}
}
