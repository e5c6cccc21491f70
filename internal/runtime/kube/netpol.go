package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// networkPolicy is a sandbox's network on a cluster: in only to the
// agent's port, which answers nothing without the sandbox's token, and out
// to nothing (network none, DNS included) or only to what e names
// (network egress: Paddock's egress proxy and the address rules' prefixes,
// egress.go). The cluster's network plugin enforces it; one that ignores
// NetworkPolicies (the reference bridge plugin) leaves the pod on the pod
// network, which docs/kubernetes.md says.
func (b *Backend) networkPolicy(id string, e *runtime.Egress) *networkingv1.NetworkPolicy {
	m := metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace, Labels: b.labels(id)}
	np := b.policy(m, map[string]string{LabelSandbox: id, LabelInstance: b.o.Instance})
	np.Spec.Egress = egressRules(e, b.o.EgressProxyPods)
	return np
}

// policy is that policy for the pods selector matches, named by m.
func (b *Backend) policy(m metav1.ObjectMeta, selector map[string]string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(agentPort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: m,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
}

// ensureNetworkPolicy creates the sandbox's NetworkPolicy, or brings its
// egress rules up to date, before its pod exists, so the pod never runs
// without it.
func (b *Backend) ensureNetworkPolicy(ctx context.Context, id string, e *runtime.Egress) error {
	err := b.o.Client.Create(ctx, b.networkPolicy(id, e))
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("sandbox %s: create NetworkPolicy: %w", id, apiErr(err))
	}
	var np networkingv1.NetworkPolicy
	if err := b.o.Client.Get(ctx, b.key(id), &np); err != nil {
		return fmt.Errorf("sandbox %s: its NetworkPolicy: %w", id, apiErr(err))
	}
	return b.updateEgress(ctx, id, &np, e) // egress.go
}

func (b *Backend) deleteNetworkPolicy(ctx context.Context, id string) error {
	np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace}}
	if err := b.o.Client.Delete(ctx, &np); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: delete NetworkPolicy: %w", id, apiErr(err))
	}
	return nil
}
