package kube

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podWatch keeps the state of every pod of this backend's sandboxes and
// pools (selected by instance and runtime) from one list and one watch of
// the API server, so following N running sandboxes (Wait) costs one
// connection, not N reads a second, which would also use up the client's
// request budget that creates need.
//
// It starts with the first Wait and runs until the backend's context
// ends. When the API server is away it keeps the last state it had: a pod
// is not taken for dead because it cannot be read.
type podWatch struct {
	b *Backend

	once sync.Once
	mu   sync.Mutex
	// synced: pods holds a whole list's answer (and the events since).
	synced bool
	pods   map[string]*corev1.Pod // by name
	// changed is closed, and replaced, at every change of pods.
	changed chan struct{}
}

// state is the pod name as last seen (nil when it is not there), whether
// a list has been read yet, and a channel closed at the next change.
func (w *podWatch) state(name string) (*corev1.Pod, bool, <-chan struct{}) {
	w.once.Do(func() {
		w.changed = make(chan struct{})
		w.pods = map[string]*corev1.Pod{}
		go w.run(w.b.ctx)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods[name], w.synced, w.changed
}

// set applies f to the pods under the lock and tells the waiters.
func (w *podWatch) set(f func(map[string]*corev1.Pod)) {
	w.mu.Lock()
	f(w.pods)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *podWatch) run(ctx context.Context) {
	b := w.b
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: b.o.Instance, LabelRuntime: b.o.Name})
	var delay time.Duration
	for ctx.Err() == nil {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		delay = min(max(2*delay, 200*time.Millisecond), 5*time.Second)
		var list corev1.PodList
		if err := b.o.Client.List(ctx, &list, &client.ListOptions{Namespace: b.o.Namespace, LabelSelector: sel}); err != nil {
			continue
		}
		w.set(func(pods map[string]*corev1.Pod) {
			clear(pods)
			for i := range list.Items {
				pods[list.Items[i].Name] = &list.Items[i]
			}
			w.synced = true
		})
		wc, ok := b.watcher() // follow.go
		if !ok {
			// No watch: the list again, a second later.
			delay = time.Second
			continue
		}
		wctx, cancel := watchContext(ctx)
		wi, err := wc.Watch(wctx, &corev1.PodList{}, &client.ListOptions{
			Namespace: b.o.Namespace, LabelSelector: sel,
			Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr(int64(watchSeconds))},
		})
		if err != nil {
			cancel()
			if ctx.Err() == nil && b.watchRefused.CompareAndSwap(false, true) {
				b.o.Logger.Warn("cannot watch the sandboxes' pods; listing them instead", "err", err)
			}
			continue
		}
		if w.follow(wctx, wi, sel) {
			delay = 0 // a watch that ran for a while: list again at once
		}
		cancel()
	}
}

// follow applies wi's events until it ends; it says whether any came. A
// pod sel does not match (a client that cannot select sends all) counts
// as gone.
func (w *podWatch) follow(ctx context.Context, wi watch.Interface, sel labels.Selector) bool {
	defer wi.Stop()
	any := false
	for {
		select {
		case <-ctx.Done():
			return any
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return any
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Error || !isPod {
				return any
			}
			any = true
			w.set(func(pods map[string]*corev1.Pod) {
				if ev.Type == watch.Deleted || !sel.Matches(labels.Set(pod.Labels)) {
					delete(pods, pod.Name)
				} else {
					pods[pod.Name] = pod
				}
			})
		}
	}
}
