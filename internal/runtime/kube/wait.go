package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// waitPoll is how often Wait reads a pod the backend's watch of pods
// does not hold.
const waitPoll = time.Second

// Wait implements runtime.Watcher: it follows the sandbox's pod (the one
// running when Wait is called) until that pod ends, is deleted or is
// replaced, and says why in the cluster's words: evicted, OOMKilled, the
// agent's exit code, or deleted by someone else.
//
// The pod's state comes from the backend's one watch of its pods
// (podwatch.go). A pod the watch does not hold (not listed yet, just
// made, or gone) is read from the API server, which alone may say it is
// gone; while the server cannot be read, the pod is not taken for dead.
func (b *Backend) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return runtime.Exit{}, err
	}
	var uid types.UID
	seen := false // a pod of uid was seen
	misses := 0
	for {
		pod, synced, changed := b.pods.state(name)
		var again <-chan time.Time
		if !synced || pod == nil {
			var p corev1.Pod
			err := b.o.Client.Get(ctx, b.nsName(name), &p)
			switch {
			case apierrors.IsNotFound(err):
				if !seen {
					return runtime.Exit{Reason: "no pod runs"}, nil
				}
				return runtime.Exit{Reason: "its pod was deleted"}, nil
			case err != nil:
				if ctx.Err() != nil {
					return runtime.Exit{}, ctx.Err()
				}
				misses++
				if misses%30 == 1 {
					b.o.Logger.Warn("cannot read the sandbox's pod", "sandbox", id, "err", err)
				}
			default:
				misses = 0
				pod = &p
			}
			again = time.After(waitPoll)
		}
		if pod != nil {
			if !seen {
				uid, seen = pod.UID, true
			}
			if pod.UID != uid {
				return runtime.Exit{Reason: "its pod was replaced"}, nil
			}
			if exit, ended := podEnded(pod); ended {
				return exit, nil
			}
		}
		select {
		case <-ctx.Done():
			return runtime.Exit{}, ctx.Err()
		case <-changed:
		case <-again:
		}
	}
}

// podEnded says whether the pod's sandbox no longer runs, and why.
func podEnded(pod *corev1.Pod) (runtime.Exit, bool) {
	if pod.Status.Reason == "Evicted" {
		return runtime.Exit{Reason: "pod evicted: " + pod.Status.Message, Known: true}, true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != containerName {
			continue
		}
		if term := cs.State.Terminated; term != nil {
			if term.Reason == "OOMKilled" {
				return runtime.Exit{Reason: "out of memory", Known: true}, true
			}
			if term.Signal != 0 {
				return runtime.Exit{Reason: fmt.Sprintf("agent exited: signal %d", term.Signal), Known: true}, true
			}
			return runtime.Exit{Reason: fmt.Sprintf("agent exited: status %d (%s)", term.ExitCode, term.Reason), Known: true}, true
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return runtime.Exit{Reason: "pod ended: " + podReason(pod), Known: true}, true
	}
	if pod.DeletionTimestamp != nil {
		return runtime.Exit{Reason: "its pod is being deleted"}, true
	}
	return runtime.Exit{}, false
}
