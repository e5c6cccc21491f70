package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	agentclient "github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// A sandbox with network egress reaches Paddock's egress proxy and the
// addresses its address rules allow, and nothing else: its NetworkPolicy
// says so, and the cluster's network plugin enforces it. Its proxy
// settings carry a credential of its own, so they are not written into
// the Sandbox (which anyone who may read Sandboxes reads) but kept in a
// Secret of their own beside the agent's (which is immutable), with the
// trust bundle naming the egress CA; its pod takes the variables from
// that Secret and mounts the bundle over the image's.

// egressSecretName is the sandbox's Secret of proxy settings.
func egressSecretName(id string) string { return objectName(id) + "-egress" }

// Keys of the egress Secret: each credential variable under envKeyPrefix
// and its name, the proxy's address for the agent's relay, and the trust
// bundle.
const (
	envKeyPrefix = "env."
	upstreamKey  = "proxy-address"
	trustKey     = "trust-bundle"
	trustVolume  = "paddock-trust"
	// maxTrustBundle bounds the bundle kept in the Secret (a Secret holds
	// at most 1 MiB; an image's bundle is about 200 KiB).
	maxTrustBundle = 768 << 10
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// egressData is the egress Secret's content for spec.
func egressData(spec runtime.Spec) (map[string][]byte, error) {
	data := map[string][]byte{}
	for _, kv := range spec.SecretEnv {
		k, v, _ := cutEnv(kv)
		if !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("sandbox %s: variable name %q: %w", spec.ID, k, errdefs.ErrInvalidArgument)
		}
		data[envKeyPrefix+k] = []byte(v)
	}
	if spec.Egress != nil {
		data[upstreamKey] = []byte(spec.Egress.Proxy.String())
	}
	if spec.TrustBundle != "" {
		b, err := os.ReadFile(spec.TrustBundle)
		if err != nil {
			return nil, fmt.Errorf("sandbox %s trust bundle: %w", spec.ID, err)
		}
		if len(b) > maxTrustBundle {
			return nil, fmt.Errorf("sandbox %s: its trust bundle is %d bytes, more than a Secret keeps (%d): %w", spec.ID, len(b), maxTrustBundle, errdefs.ErrFailedPrecondition)
		}
		data[trustKey] = b
	}
	return data, nil
}

// ensureEgressSecret creates or updates the sandbox's egress Secret.
func (b *Backend) ensureEgressSecret(ctx context.Context, spec runtime.Spec) error {
	data, err := egressData(spec)
	if err != nil {
		return err
	}
	sec := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: egressSecretName(spec.ID), Namespace: b.o.Namespace, Labels: b.labels(spec.ID)},
		Type:       corev1.SecretTypeOpaque, Data: data,
	}
	err = b.o.Client.Create(ctx, &sec)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("sandbox %s: create its egress Secret: %w", spec.ID, apiErr(err))
	}
	var cur corev1.Secret
	if err := b.o.Client.Get(ctx, b.nsName(sec.Name), &cur); err != nil {
		return fmt.Errorf("sandbox %s: its egress Secret: %w", spec.ID, apiErr(err))
	}
	if sameData(cur.Data, data) {
		return nil
	}
	cur.Data = data
	if err := b.o.Client.Update(ctx, &cur); err != nil {
		return fmt.Errorf("sandbox %s: update its egress Secret: %w", spec.ID, apiErr(err))
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func (b *Backend) deleteEgressSecret(ctx context.Context, id string) error {
	sec := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: egressSecretName(id), Namespace: b.o.Namespace}}
	if err := b.o.Client.Delete(ctx, &sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: delete its egress Secret: %w", id, apiErr(err))
	}
	return nil
}

// withEgress adds spec's credential variables (from the egress Secret),
// the agent's relay to the proxy (wire.EnvEgressRelay, at the proxy's
// address in the Secret) and its trust bundle (mounted over the image's)
// to pod.
func withEgress(pod *corev1.PodSpec, spec runtime.Spec) {
	if len(spec.SecretEnv) == 0 && spec.TrustBundle == "" && spec.Egress == nil {
		return
	}
	c := &pod.Containers[0]
	secret := egressSecretName(spec.ID)
	if spec.Egress != nil {
		c.Env = append(c.Env, corev1.EnvVar{Name: wire.EnvEgressRelay, Value: wire.EgressRelayAddr},
			corev1.EnvVar{Name: wire.EnvEgressUpstream, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: upstreamKey,
			}}})
	}
	for _, kv := range spec.SecretEnv {
		k, _, _ := cutEnv(kv)
		c.Env = append(c.Env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: envKeyPrefix + k,
		}}})
	}
	if spec.TrustBundle != "" {
		file := path.Base(runtime.TrustBundlePath)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: trustVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, Items: []corev1.KeyToPath{{Key: trustKey, Path: file}},
		}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: trustVolume, MountPath: runtime.TrustBundlePath, SubPath: file, ReadOnly: true})
	}
}

// egressRules are the NetworkPolicy's egress rules for e: the proxy's
// port on its address (or on the pods proxyPods names), and each direct
// prefix, any port. Nil e: none.
func egressRules(e *runtime.Egress, proxyPods *PodSelector) []networkingv1.NetworkPolicyEgressRule {
	rules := []networkingv1.NetworkPolicyEgressRule{}
	if e == nil {
		return rules
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(int32(e.Proxy.Port()))
	proxy := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: e.Proxy.Addr().String() + "/32"}}
	if proxyPods != nil {
		proxy = networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: proxyPods.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: proxyPods.Labels},
		}
	}
	rules = append(rules, networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{proxy},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
	})
	for _, d := range e.Direct {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: d.Masked().String()}}},
		})
	}
	return rules
}

// SetEgress changes what a sandbox's pod may reach (its rules changed)
// and where it finds the proxy (the proxy moved): its NetworkPolicy's
// egress rules, the proxy's address in its egress Secret (for its next
// pods) and in its running agent's relay. A sandbox without a policy yet
// gets them at its next start.
func (b *Backend) SetEgress(ctx context.Context, id string, e runtime.Egress) error {
	var np networkingv1.NetworkPolicy
	if err := b.o.Client.Get(ctx, b.key(id), &np); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("sandbox %s: its NetworkPolicy: %w", id, apiErr(err))
	}
	if err := b.updateEgress(ctx, id, &np, &e); err != nil {
		return err
	}
	return b.moveRelay(ctx, id, e.Proxy.String())
}

// relayCallTimeout bounds the call that points a running agent's relay.
const relayCallTimeout = 5 * time.Second

// moveRelay points the sandbox's egress relay at the proxy's address
// upstream, when its Secret names another: the Secret for the pods to
// come, then the running pod's agent. A sandbox without a running pod
// gets it at its next start.
func (b *Backend) moveRelay(ctx context.Context, id, upstream string) error {
	var sec corev1.Secret
	if err := b.o.Client.Get(ctx, b.nsName(egressSecretName(id)), &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("sandbox %s: its egress Secret: %w", id, apiErr(err))
	}
	if string(sec.Data[upstreamKey]) == upstream {
		return nil
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[upstreamKey] = []byte(upstream)
	if err := b.o.Client.Update(ctx, &sec); err != nil {
		return fmt.Errorf("sandbox %s: update its egress Secret: %w", id, apiErr(err))
	}
	info, err := b.Info(ctx, id)
	if err != nil {
		if errors.Is(err, runtime.ErrNotFound) {
			return nil
		}
		return err
	}
	ag := agentclient.NewTCP(info.AgentAddr, info.AgentToken)
	defer ag.Close()
	// Bounded: a daemon starting again points every sandbox in turn, and
	// a pod on a node that stopped answering must not hold it up.
	actx, cancel := context.WithTimeout(ctx, relayCallTimeout)
	defer cancel()
	if err := ag.SetEgressUpstream(actx, upstream); err != nil {
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			// Its agent is from before the relay: its variables name
			// the proxy itself, which a start of the sandbox changes.
			b.o.Logger.Warn("sandbox's agent has no egress relay; stop and start it to reach the proxy at its new address", "sandbox", id, "proxy", upstream)
			return nil
		}
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

func (b *Backend) updateEgress(ctx context.Context, id string, np *networkingv1.NetworkPolicy, e *runtime.Egress) error {
	want := egressRules(e, b.o.EgressProxyPods)
	if slices.EqualFunc(np.Spec.Egress, want, func(x, y networkingv1.NetworkPolicyEgressRule) bool { return x.String() == y.String() }) {
		return nil
	}
	np.Spec.Egress = want
	if err := b.o.Client.Update(ctx, np); err != nil {
		return fmt.Errorf("sandbox %s: update its NetworkPolicy: %w", id, apiErr(err))
	}
	return nil
}
