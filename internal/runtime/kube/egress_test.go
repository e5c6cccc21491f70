package kube

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// TestEgressObjects: a sandbox with egress keeps its proxy credential in a
// Secret of its own (the Sandbox names it, never holds it), mounts its
// trust bundle, may reach the proxy and its direct prefixes only, is
// never served from a warm pool, and leaves nothing at destroy.
func TestEgressObjects(t *testing.T) {
	b, cl := fakeBackend(t, "runc", "inst")
	ctx := context.Background()
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const cred = "http://sbx1:secret-token-0123456789@10.0.0.1:3128"
	spec := runtime.Spec{
		ID: "sbx1", Image: busybox, Env: []string{"NO_PROXY=localhost"},
		SecretEnv:   []string{"HTTP_PROXY=" + cred, "https_proxy=" + cred},
		TrustBundle: bundle,
		Egress:      &runtime.Egress{Proxy: netip.MustParseAddrPort("10.0.0.1:3128"), Direct: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30")}},
		WarmPool:    "pool1",
	}
	if _, err := b.Start(ctx, spec); err == nil {
		t.Fatal("start without a pod: no error")
	}
	var cls extv1.SandboxClaimList
	if err := cl.List(ctx, &cls); err != nil || len(cls.Items) != 0 {
		t.Fatalf("a sandbox with egress was claimed from a warm pool: %v %d", err, len(cls.Items))
	}
	var sec corev1.Secret
	if err := cl.Get(ctx, b.nsName("paddock-sbx1-egress"), &sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["env.HTTP_PROXY"]) != cred || string(sec.Data["env.https_proxy"]) != cred || !strings.Contains(string(sec.Data[trustKey]), "BEGIN CERTIFICATE") {
		t.Fatalf("egress Secret: %v", sec.Data)
	}
	var sb sandboxv1.Sandbox
	if err := cl.Get(ctx, b.key("sbx1"), &sb); err != nil {
		t.Fatal(err)
	}
	c := sb.Spec.PodTemplate.Spec.Containers[0]
	found := 0
	for _, e := range c.Env {
		if strings.Contains(e.Value, "secret-token") {
			t.Errorf("the Sandbox holds the credential in %s", e.Name)
		}
		if (e.Name == "HTTP_PROXY" || e.Name == "https_proxy") && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == "paddock-sbx1-egress" {
			found++
		}
	}
	if found != 2 {
		t.Errorf("proxy variables from the egress Secret: %d of 2: %+v", found, c.Env)
	}
	relay := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if e.Name == wire.EnvEgressRelay || e.Name == wire.EnvEgressUpstream {
			relay[e.Name] = e
		}
	}
	if relay[wire.EnvEgressRelay].Value != wire.EgressRelayAddr || relay[wire.EnvEgressUpstream].ValueFrom == nil ||
		relay[wire.EnvEgressUpstream].ValueFrom.SecretKeyRef.Key != upstreamKey || string(sec.Data[upstreamKey]) != "10.0.0.1:3128" {
		t.Errorf("the agent's relay: %+v, Secret %q", relay, sec.Data[upstreamKey])
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == runtime.TrustBundlePath && m.ReadOnly && m.SubPath != "" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("trust bundle not mounted: %+v", c.VolumeMounts)
	}
	var np networkingv1.NetworkPolicy
	if err := cl.Get(ctx, b.key("sbx1"), &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 2 || np.Spec.Egress[0].To[0].IPBlock.CIDR != "10.0.0.1/32" || np.Spec.Egress[0].Ports[0].Port.IntValue() != 3128 ||
		np.Spec.Egress[1].To[0].IPBlock.CIDR != "192.0.2.0/30" || len(np.Spec.Egress[1].Ports) != 0 {
		t.Fatalf("NetworkPolicy egress: %+v", np.Spec.Egress)
	}

	// Rules changed: the policy follows; a start brings the Secret up to
	// date.
	if err := b.SetEgress(ctx, "sbx1", runtime.Egress{Proxy: netip.MustParseAddrPort("10.0.0.1:3128")}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.key("sbx1"), &np); err != nil || len(np.Spec.Egress) != 1 {
		t.Fatalf("after SetEgress: %v %+v", err, np.Spec.Egress)
	}
	if err := b.SetEgress(ctx, "nosuch", runtime.Egress{}); err != nil {
		t.Errorf("SetEgress of a sandbox without a policy: %v", err)
	}
	// The proxy moved (a daemon back at another address): the policy
	// and the Secret follow; without a pod there is no agent to tell.
	if err := b.SetEgress(ctx, "sbx1", runtime.Egress{Proxy: netip.MustParseAddrPort("10.0.0.7:4000")}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.key("sbx1"), &np); err != nil || np.Spec.Egress[0].To[0].IPBlock.CIDR != "10.0.0.7/32" || np.Spec.Egress[0].Ports[0].Port.IntValue() != 4000 {
		t.Fatalf("NetworkPolicy after the proxy moved: %v %+v", err, np.Spec.Egress)
	}
	if err := cl.Get(ctx, b.nsName("paddock-sbx1-egress"), &sec); err != nil || string(sec.Data[upstreamKey]) != "10.0.0.7:4000" {
		t.Fatalf("egress Secret after the proxy moved: %v %q", err, sec.Data[upstreamKey])
	}
	spec.SecretEnv = []string{"HTTP_PROXY=http://sbx1:new-token-0123456789@10.0.0.1:3128"}
	_, _ = b.Start(ctx, spec)
	if err := cl.Get(ctx, b.nsName("paddock-sbx1-egress"), &sec); err != nil || len(sec.Data) != 3 || !strings.Contains(string(sec.Data["env.HTTP_PROXY"]), "new-token") ||
		string(sec.Data[upstreamKey]) != "10.0.0.1:3128" {
		t.Fatalf("egress Secret after a start with new settings: %v %v", err, sec.Data)
	}

	// A bad variable name is refused before anything is made.
	bad := spec
	bad.ID, bad.SecretEnv = "sbx2", []string{"BAD NAME=x"}
	if _, err := b.Start(ctx, bad); err == nil || !strings.Contains(err.Error(), "variable name") {
		t.Errorf("a bad variable name: %v", err)
	}
	if err := cl.Get(ctx, b.key("sbx2"), &sec); !apierrors.IsNotFound(err) {
		t.Errorf("a refused start left its Secret: %v", err)
	}

	if err := b.Destroy(ctx, "sbx1"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.nsName("paddock-sbx1-egress"), &sec); !apierrors.IsNotFound(err) {
		t.Errorf("egress Secret after destroy: %v", err)
	}
}

// TestNoEgressDeniesAll: without egress the policy allows nothing out.
func TestNoEgressDeniesAll(t *testing.T) {
	b, _ := fakeBackend(t, "runc", "inst")
	np := b.networkPolicy("sbx1", nil)
	if np.Spec.Egress == nil || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
		t.Fatalf("network none: %+v", np.Spec)
	}
}

// TestEgressToProxyPods: with the proxy's pods named, the policy reaches
// them by namespace and labels, not by address.
func TestEgressToProxyPods(t *testing.T) {
	pods := &PodSelector{Namespace: "paddock-system", Labels: map[string]string{"app.kubernetes.io/name": "paddock"}}
	rules := egressRules(&runtime.Egress{Proxy: netip.MustParseAddrPort("10.1.2.3:3128"), Direct: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30")}}, pods)
	if len(rules) != 2 {
		t.Fatalf("rules: %+v", rules)
	}
	to := rules[0].To
	if len(to) != 1 || to[0].IPBlock != nil || to[0].NamespaceSelector == nil || to[0].PodSelector == nil ||
		to[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "paddock-system" || to[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "paddock" ||
		rules[0].Ports[0].Port.IntValue() != 3128 {
		t.Errorf("the way to the proxy: %+v", rules[0])
	}
	if rules[1].To[0].IPBlock == nil || rules[1].To[0].IPBlock.CIDR != "192.0.2.0/30" {
		t.Errorf("an address rule: %+v", rules[1])
	}
}
