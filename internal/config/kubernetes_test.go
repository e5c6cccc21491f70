package config

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestParseRuntimeClasses(t *testing.T) {
	good := []struct {
		in   string
		want map[string]string
	}{
		{"runc=", map[string]string{"runc": ""}},
		{"runc=,gvisor=gvisor", map[string]string{"runc": "", "gvisor": "gvisor"}},
		{" gvisor = sandboxed , ", map[string]string{"gvisor": "sandboxed"}},
	}
	for _, tt := range good {
		got, err := ParseRuntimeClasses(tt.in)
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("ParseRuntimeClasses(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := map[string]string{
		"gvisor":            "is not RUNTIME=CLASS",
		"runc=,runc=gvisor": "given twice",
		",,":                "names no runtime",
		"runc=a,gvisor":     "is not RUNTIME=CLASS",
	}
	for in, want := range bad {
		if _, err := ParseRuntimeClasses(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRuntimeClasses(%q) = %v; want an error containing %q", in, err, want)
		}
	}
}

func TestKubeRuntimeClassesFromEnv(t *testing.T) {
	env := map[string]string{"PADDOCK_BACKEND": "kubernetes", "PADDOCK_KUBE_RUNTIME_CLASSES": "runc=,gvisor=gvisor"}
	c := Default()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"runc": "", "gvisor": "gvisor"}; !maps.Equal(c.Kubernetes.RuntimeClasses, want) {
		t.Fatalf("runtime classes %v, want %v", c.Kubernetes.RuntimeClasses, want)
	}
	// A runtime Paddock does not have and a class that is not a name are
	// refused by Validate, with what is wrong.
	env["PADDOCK_KUBE_RUNTIME_CLASSES"] = "kata=kata,gvisor=Not_A_Name"
	c = Default()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `runtime "kata"`) || !strings.Contains(err.Error(), `RuntimeClass "Not_A_Name"`) {
		t.Fatalf("Validate() = %v; want both entries refused", err)
	}
	env["PADDOCK_KUBE_RUNTIME_CLASSES"] = "gvisor"
	c = Default()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "PADDOCK_KUBE_RUNTIME_CLASSES") {
		t.Fatalf("ApplyEnv with a malformed value = %v", err)
	}
}

func TestKubeEgressProxy(t *testing.T) {
	for v, ok := range map[string]bool{
		"10.213.0.1:3128": true, "10.213.0.1:0": true,
		"0.0.0.0:3128": false, "[::1]:3128": false, "10.213.0.1": false, "proxy:3128": false, "10.213.0.1:70000": false,
	} {
		env := map[string]string{"PADDOCK_BACKEND": "kubernetes", "PADDOCK_KUBE_EGRESS_PROXY": v}
		c := Default()
		if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		if c.Kubernetes.EgressProxy != v {
			t.Fatalf("%q: egress proxy %q", v, c.Kubernetes.EgressProxy)
		}
		err := c.Validate()
		if ok && err != nil || !ok && (err == nil || !strings.Contains(err.Error(), "egress_proxy")) {
			t.Errorf("%q: Validate() = %v", v, err)
		}
	}
}

// kubeSetting checks a numeric setting read from env: each value is
// valid (want "") or refused by Validate with an error naming want, and a
// malformed one is refused by ApplyEnv naming env.
func kubeSetting(t *testing.T, env string, values map[string]string, malformed string) {
	t.Helper()
	for v, want := range values {
		vars := map[string]string{"PADDOCK_BACKEND": "kubernetes", env: v}
		c := Default()
		if err := c.ApplyEnv(func(k string) string { return vars[k] }); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s=%q: Validate() = %v", env, v, err)
		}
	}
	c := Default()
	if err := c.ApplyEnv(func(k string) string { return map[string]string{env: malformed}[k] }); err == nil || !strings.Contains(err.Error(), env) {
		t.Fatalf("ApplyEnv with %s=%q = %v", env, malformed, err)
	}
}

func TestKubeStartTimeout(t *testing.T) {
	if d := Default().Kubernetes.StartTimeout; d != 3*time.Minute {
		t.Fatalf("default start timeout %s", d)
	}
	kubeSetting(t, "PADDOCK_KUBE_START_TIMEOUT", map[string]string{"20s": "", "1h": "", "4s": "start_timeout", "2h": "start_timeout", "-1m": "start_timeout"}, "soon")
}

func TestKubeQPS(t *testing.T) {
	if n := Default().Kubernetes.QPS; n != 100 {
		t.Fatalf("default qps %d", n)
	}
	kubeSetting(t, "PADDOCK_KUBE_QPS", map[string]string{"5": "", "5000": "", "4": "qps", "5001": "qps", "-1": "qps"}, "fast")
}

// TestKubeImagePush: a push needs a registry to push to; its credentials
// file is an absolute path; a pull secret is a Secret's name.
func TestKubeImagePush(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"PADDOCK_KUBE_IMAGE_PUSH": "true"}, "not a registry"},
		{map[string]string{"PADDOCK_KUBE_IMAGE_PUSH": "true", "PADDOCK_KUBE_IMAGE_PREFIX": "registry.example.com:5000/paddock"}, ""},
		{map[string]string{"PADDOCK_KUBE_IMAGE_PUSH": "1", "PADDOCK_KUBE_IMAGE_PREFIX": "127.0.0.1:5000", "PADDOCK_KUBE_REGISTRY_CONFIG": "/etc/paddock/registry.json"}, ""},
		{map[string]string{"PADDOCK_KUBE_REGISTRY_CONFIG": "registry.json"}, "absolute path"},
		{map[string]string{"PADDOCK_KUBE_IMAGE_PULL_SECRET": "pull.example-1"}, ""},
		{map[string]string{"PADDOCK_KUBE_IMAGE_PULL_SECRET": "Pull_Secret"}, "image_pull_secret"},
		{map[string]string{"PADDOCK_KUBE_IMAGE_PULL_SECRET": strings.Repeat("a", 254)}, "image_pull_secret"},
	} {
		tc.vars["PADDOCK_BACKEND"] = "kubernetes"
		c := Default()
		if err := c.ApplyEnv(func(k string) string { return tc.vars[k] }); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: Validate() = %v", tc.vars, err)
		}
	}
	c := Default()
	if err := c.ApplyEnv(func(k string) string { return map[string]string{"PADDOCK_KUBE_IMAGE_PUSH": "yes please"}[k] }); err == nil || !strings.Contains(err.Error(), "PADDOCK_KUBE_IMAGE_PUSH") {
		t.Errorf("a malformed PADDOCK_KUBE_IMAGE_PUSH: %v", err)
	}
}

func TestKubeEgressProxyPods(t *testing.T) {
	ns, labels, err := ParsePodSelector("paddock-system/app.kubernetes.io/name=paddock, tier=proxy")
	if err != nil || ns != "paddock-system" || len(labels) != 2 || labels["app.kubernetes.io/name"] != "paddock" || labels["tier"] != "proxy" {
		t.Fatalf("parse: %q %v %v", ns, labels, err)
	}
	for v, ok := range map[string]bool{
		"paddock-system/app=paddock": true, "ns/a=": true,
		"app=paddock": false, "/app=paddock": false, "Bad_NS/app=paddock": false, "ns/": false, "ns/app": false,
		"ns/app=bad value": false, "ns/-app=x": false, "ns/a=b,a=c": false, "ns/bad_prefix/app=x": false,
	} {
		env := map[string]string{"PADDOCK_BACKEND": "kubernetes", "PADDOCK_KUBE_EGRESS_PROXY": "10.213.0.1:3128", "PADDOCK_KUBE_EGRESS_PROXY_PODS": v}
		c := Default()
		if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if ok && err != nil || !ok && (err == nil || !strings.Contains(err.Error(), "egress_proxy_pods")) {
			t.Errorf("%q: Validate() = %v", v, err)
		}
	}
	// Without the proxy itself it means nothing.
	env := map[string]string{"PADDOCK_BACKEND": "kubernetes", "PADDOCK_KUBE_EGRESS_PROXY_PODS": "ns/app=paddock"}
	c := Default()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "without egress_proxy") {
		t.Errorf("pods without the proxy: %v", err)
	}
}
