package kube

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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
// and its name, and the trust bundle.
const (
	envKeyPrefix = "env."
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

// withEgress adds spec's credential variables (from the egress Secret)
// and its trust bundle (mounted over the image's) to pod.
func withEgress(pod *corev1.PodSpec, spec runtime.Spec) {
	if len(spec.SecretEnv) == 0 && spec.TrustBundle == "" {
		return
	}
	c := &pod.Containers[0]
	secret := egressSecretName(spec.ID)
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
// address and port, and each direct prefix, any port. Nil e: none.
func egressRules(e *runtime.Egress) []networkingv1.NetworkPolicyEgressRule {
	rules := []networkingv1.NetworkPolicyEgressRule{}
	if e == nil {
		return rules
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(int32(e.Proxy.Port()))
	rules = append(rules, networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: e.Proxy.Addr().String() + "/32"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
	})
	for _, d := range e.Direct {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: d.Masked().String()}}},
		})
	}
	return rules
}

// SetEgress changes what a sandbox's pod may reach (its rules changed):
// its NetworkPolicy's egress rules. A sandbox without a policy yet gets
// them at its next start.
func (b *Backend) SetEgress(ctx context.Context, id string, e runtime.Egress) error {
	var np networkingv1.NetworkPolicy
	if err := b.o.Client.Get(ctx, b.key(id), &np); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("sandbox %s: its NetworkPolicy: %w", id, apiErr(err))
	}
	return b.updateEgress(ctx, id, &np, &e)
}

func (b *Backend) updateEgress(ctx context.Context, id string, np *networkingv1.NetworkPolicy, e *runtime.Egress) error {
	want := egressRules(e)
	if slices.EqualFunc(np.Spec.Egress, want, func(x, y networkingv1.NetworkPolicyEgressRule) bool { return x.String() == y.String() }) {
		return nil
	}
	np.Spec.Egress = want
	if err := b.o.Client.Update(ctx, np); err != nil {
		return fmt.Errorf("sandbox %s: update its NetworkPolicy: %w", id, apiErr(err))
	}
	return nil
}
