package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installAgentSandbox applies the CRDs the build copied from
// sigs.k8s.io/agent-sandbox, waits for them to be established, and starts
// its controller with the extensions (templates, claims, warm pools) on.
func (c *Cluster) installAgentSandbox(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(c.binDir, "crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", filepath.Join(c.binDir, "crds"))
	}
	var names []string
	for _, f := range files {
		objs, err := ReadObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if _, err := dyn.Resource(crdResource).Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s: %w", o.GetName(), err)
			}
			names = append(names, o.GetName())
		}
	}
	for _, name := range names {
		if err := waitFor(ctx, "CRD "+name, 200*time.Millisecond, c.procs, func(ctx context.Context) error {
			o, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			for _, cd := range conds {
				m, _ := cd.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established")
		}); err != nil {
			return err
		}
	}
	_, err = c.startEnv("agent-sandbox-controller", "agent-sandbox-controller",
		[]string{"KUBECONFIG=" + c.Kubeconfig},
		"--leader-elect=false",
		"--extensions=true",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	)
	return err
}

// ReadObjects reads a file of YAML documents separated by "---" lines into
// unstructured objects, skipping empty documents.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeObjects(b)
}

// DecodeObjects is ReadObjects on bytes.
func DecodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decode YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}
