package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchSeconds is how long a watch asks the API server to run; it is given
// up watchGrace later if the server did not end it (a connection lost
// without a word), and opened again after a read.
const (
	watchSeconds = 300
	watchGrace   = 30 * time.Second
)

// watcher is the client that opens watches, if there is one.
func (b *Backend) watcher() (client.WithWatch, bool) {
	if b.o.Watcher != nil {
		return b.o.Watcher, true
	}
	wc, ok := b.o.Client.(client.WithWatch)
	return wc, ok
}

// watchContext bounds one watch (watchSeconds and watchGrace).
func watchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, watchSeconds*time.Second+watchGrace)
}

func ptr[T any](v T) *T { return &v }

// follow reads the object name (of obj's kind, list being its list kind)
// and hands each state it sees to see until see says it is done or fails,
// or ctx ends (ctx's error). see gets the object, or nil and the read's
// error (NotFound while the object does not exist yet).
//
// It reads once, then watches the object from the version read, so a
// change is seen when the API server sends it rather than at the next of
// a series of polls (a claim satisfied or a pod running is often a matter
// of tens of milliseconds, of which polling added half on average). While
// the object does not exist yet, or the client cannot watch, it reads
// again after a short, growing delay; when a watch ends (the server's
// timeout, or watchGrace after it) it reads again at once.
func (b *Backend) follow(ctx context.Context, name string, obj client.Object, list client.ObjectList, see func(client.Object, error) (bool, error)) error {
	wc, canWatch := b.watcher()
	var delay backoff // warmpool.go
	for {
		err := b.o.Client.Get(ctx, b.nsName(name), obj)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var done bool
		var serr error
		if err == nil {
			done, serr = see(obj, nil)
		} else {
			done, serr = see(nil, err)
		}
		if done || serr != nil {
			return serr
		}
		if err == nil && canWatch {
			done, serr = b.watchOne(ctx, wc, name, obj.GetResourceVersion(), list, see)
			if done || serr != nil {
				return serr
			}
			delay = 0 // the watch ended; read again at once
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay.next()):
		}
	}
}

// watchOne watches the object name from version rv and hands see each
// state; it returns when see is done or fails, or when the watch ends
// (false, nil: the caller reads again).
func (b *Backend) watchOne(ctx context.Context, wc client.WithWatch, name, rv string, list client.ObjectList, see func(client.Object, error) (bool, error)) (bool, error) {
	wctx, cancel := watchContext(ctx)
	defer cancel()
	w, err := wc.Watch(wctx, list, &client.ListOptions{
		Namespace:     b.o.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
		Raw:           &metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: ptr(int64(watchSeconds))},
	})
	if err != nil {
		if ctx.Err() == nil && b.watchRefused.CompareAndSwap(false, true) {
			// Polling still works; say once why it is used.
			b.o.Logger.Warn("cannot watch objects on the cluster; waits poll instead", "err", err)
		}
		return false, nil
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			o, isObj := ev.Object.(client.Object)
			switch {
			case ev.Type == watch.Error || !isObj:
				return false, nil
			case o.GetName() != name:
				// A client that cannot select by name (a fake) sends
				// the namespace's other objects too.
				continue
			case ev.Type == watch.Deleted:
				return see(nil, apierrors.NewNotFound(schema.GroupResource{}, name))
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if done, err := see(o, nil); done || err != nil {
					return done, err
				}
			}
		}
	}
}
