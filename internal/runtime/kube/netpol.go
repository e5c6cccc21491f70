package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// networkPolicy is a sandbox's network none on a cluster: no egress at
// all (DNS included), and in only to the agent's port, which answers
// nothing without the sandbox's token. The cluster's network plugin
// enforces it; one that ignores NetworkPolicies (the reference bridge
// plugin) leaves the pod on the pod network, which docs/kubernetes.md
// says.
func (b *Backend) networkPolicy(id string) *networkingv1.NetworkPolicy {
	m := metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace, Labels: b.labels(id)}
	return b.policy(m, map[string]string{LabelSandbox: id, LabelInstance: b.o.Instance})
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

// ensureNetworkPolicy creates the sandbox's NetworkPolicy unless it is
// there, before its pod exists, so the pod never runs without it.
func (b *Backend) ensureNetworkPolicy(ctx context.Context, id string) error {
	err := b.o.Client.Create(ctx, b.networkPolicy(id))
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("sandbox %s: create NetworkPolicy: %w", id, apiErr(err))
}

func (b *Backend) deleteNetworkPolicy(ctx context.Context, id string) error {
	np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace}}
	if err := b.o.Client.Delete(ctx, &np); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: delete NetworkPolicy: %w", id, apiErr(err))
	}
	return nil
}
