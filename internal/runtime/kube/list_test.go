package kube

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestListKeepsToItsRuntime: two backends of one daemon (runc and gvisor
// on their RuntimeClasses) share a namespace and an instance; each lists
// only the sandboxes it made, including a Secret a crash left alone, and
// neither lists another daemon's.
func TestListKeepsToItsRuntime(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).Build()
	newBackend := func(name, instance string) *Backend {
		b, err := New(Options{Name: name, Client: cl, Namespace: "ns", Instance: instance, ImagePrefix: "paddock.local"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	runc, gvisor, other := newBackend("runc", "pd-a"), newBackend("gvisor", "pd-a"), newBackend("runc", "pd-b")
	ctx := context.Background()
	for _, o := range []struct {
		b  *Backend
		id string
	}{{runc, "r1"}, {gvisor, "g1"}, {other, "o1"}} {
		sb := &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: objectName(o.id), Namespace: "ns", Labels: o.b.labels(o.id)}}
		if err := cl.Create(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: objectName("g2"), Namespace: "ns", Labels: gvisor.labels("g2")}}
	if err := cl.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[*Backend][]string{runc: {"r1"}, gvisor: {"g1", "g2"}, other: {"o1"}} {
		got, err := b.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s/%s lists %v, want %v", b.o.Instance, b.o.Name, got, want)
		}
	}
}
