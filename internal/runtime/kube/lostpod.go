package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// unconfirmedAfter is how long past its deletion time (the delete plus
// the pod's grace period) a destroyed sandbox's pod may stay before the
// daemon takes its node for lost. A node's kubelet confirms a deletion
// within seconds of the containers' end; one that has not for this long
// is not running (a node powered off, cut off from the API server, its
// kubelet stopped), and would keep the pod, and with it the Sandbox and
// its volume, on the API server for as long as it is away.
const unconfirmedAfter = 20 * time.Second

// waitPodGone waits until the sandbox's pod name is gone. For a destroy
// (force), a pod whose node has not confirmed its deletion
// unconfirmedAfter past its deletion time is deleted without waiting for
// the node (grace period 0, as `kubectl delete --force` does): the
// sandbox is being destroyed, so nothing of it is wanted, and a kubelet
// that comes back removes the containers of a pod the API server no
// longer has. A stop does not force: the home volume it keeps could still
// be written by the pod's containers on a node that is only cut off; its
// error after a minute says so.
func (b *Backend) waitPodGone(ctx context.Context, id, name string, force bool) error {
	after := unconfirmedAfter
	if !force {
		after = -1
	}
	return b.waitPodGoneAfter(ctx, id, name, after, time.Minute)
}

// waitPodGoneAfter is waitPodGone forcing after after (never if after is
// negative) and giving up after limit.
func (b *Backend) waitPodGoneAfter(ctx context.Context, id, name string, after, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	forced := after < 0
	var last corev1.Pod
	for {
		// Look at the pod, then follow it until it is gone, for at most
		// lookAgain or until it is due to be forced: a pod's deletion time
		// is set after the Sandbox's deletion, and passing it changes
		// nothing a watch would see.
		window := lookAgain
		var pod corev1.Pod
		err := b.o.Client.Get(ctx, b.nsName(name), &pod)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			last = pod
			if forced || pod.DeletionTimestamp == nil {
				break
			}
			due := time.Until(pod.DeletionTimestamp.Add(after))
			if due <= 0 {
				if err := b.forceDeletePod(ctx, id, &pod); err != nil {
					return err
				}
				forced = true
				continue
			}
			window = min(window, due)
		}
		wctx, wcancel := context.WithTimeout(ctx, window)
		err = b.follow(wctx, name, &corev1.Pod{}, &corev1.PodList{}, func(_ client.Object, err error) (bool, error) {
			return gone(err), nil // warmpool.go
		})
		wcancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return podStillThere(id, &last, limit)
		}
	}
}

// podStillThere is the error of a wait for a pod that did not end.
func podStillThere(id string, pod *corev1.Pod, limit time.Duration) error {
	if pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" {
		return fmt.Errorf("sandbox %s: its pod %s is still on node %s %v after its deletion, which the node has not confirmed (a node that stopped answering: `rm` deletes the pod without it): %w",
			id, pod.Name, pod.Spec.NodeName, limit, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("sandbox %s: its pod %s is still there after %v: %w", id, pod.Name, limit, errdefs.ErrUnavailable)
}

// lookAgain bounds each wait of waitPodGone between two reads of the pod.
const lookAgain = 5 * time.Second

// forceDeletePod deletes pod (of the sandbox id) without waiting for its
// node, preconditioned on its UID so that only this pod goes.
func (b *Backend) forceDeletePod(ctx context.Context, id string, pod *corev1.Pod) error {
	b.o.Logger.Warn("the node of a destroyed sandbox's pod has not confirmed its deletion; deleting it without the node",
		"sandbox", id, "pod", pod.Name, "node", pod.Spec.NodeName, "deleted_at", pod.DeletionTimestamp.Time)
	uid := pod.UID
	err := b.o.Client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("sandbox %s: delete its pod on node %s, which does not answer: %w", id, pod.Spec.NodeName, apiErr(err))
	}
	return nil
}
