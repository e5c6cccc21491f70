package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// TestDeployManifestsValid sends every object of deploy/kubernetes (all but
// the agent-sandbox release, which the cluster has installed from the same
// version) to the API server as a server-side dry run: each must be a valid
// object of a kind the cluster serves. The namespaces are created for real,
// since namespaced objects are checked against them.
func TestDeployManifestsValid(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := "../../deploy/kubernetes"
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kz struct{ Resources []string }
	if err := yaml.Unmarshal(b, &kz); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	remote := 0
	for _, r := range kz.Resources {
		if strings.HasPrefix(r, "https://") {
			if !strings.Contains(r, "agent-sandbox/releases/download/v1.0.3/") {
				t.Errorf("remote resource %s is not the agent-sandbox release the tests run", r)
			}
			remote++
			continue
		}
		o, err := cluster.ReadObjects(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		objs = append(objs, o...)
	}
	if remote != 1 || len(objs) < 8 {
		t.Fatalf("kustomization: %d remote resources, %d objects", remote, len(objs))
	}
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: the cluster does not serve it: %v", gvk.Kind, o.GetName(), err)
			continue
		}
		ri := dc.Resource(m.Resource)
		opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
		if gvk.Kind == "Namespace" {
			opts.DryRun = nil
			t.Cleanup(func() {
				_ = dc.Resource(m.Resource).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			})
		}
		var cerr error
		if ns := o.GetNamespace(); ns != "" {
			_, cerr = ri.Namespace(ns).Create(ctx, o, opts)
		} else {
			_, cerr = ri.Create(ctx, o, opts)
		}
		if cerr != nil {
			t.Errorf("%s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), cerr)
		}
	}
}
