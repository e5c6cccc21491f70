package kube

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentclient "github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// A Paddock warm pool on a cluster is agent-sandbox's: a SandboxTemplate
// and a SandboxWarmPool that keeps Replicas pods of it ready, and a create
// from the pool is a SandboxClaim, which the agent-sandbox controller
// satisfies by handing over one of the ready Sandboxes (or by starting one
// from the template when none is ready). Paddock adds what a pool's pods
// cannot have at start, since one template makes them all: an identity.
//
//   - The pool's pods get the pool's token (a Secret of the pool) and
//     their agent starts unclaimed: it answers nothing but one claim.
//   - A create makes the sandbox's own Secret and SandboxClaim, waits for
//     the claim's Sandbox, points its pod template at the sandbox's Secret
//     (for its later starts), and claims the agent with the pool's token,
//     giving it the sandbox's token. Only then is the sandbox handed out.
//   - An agent that someone else claimed first is never used: the create
//     fails and the sandbox is destroyed.
//
// What differs from a cold create: the pod's hostname is the pool
// Sandbox's name, not the sandbox's id, and the pool's token stays in the
// pod's initial environment (which root in the sandbox can read); it opens
// nothing once the pod is claimed, and the sandbox's NetworkPolicy lets it
// reach no other pod.

// LabelWarmPool, on a pool's objects and pods, is the pool's object name.
const LabelWarmPool = "paddock.dev/warm-pool"

// annotationPool carries the pool's Paddock name on its objects and on the
// claims made from it.
const annotationPool = "paddock.dev/pool"

// poolObject is the name of a pool's Secret, NetworkPolicy, SandboxTemplate
// and SandboxWarmPool: a digest of the daemon's instance, the runtime and
// the pool's name, so two daemons' pools of one name never meet, and
// short, as the pool's Sandboxes are named after it.
func (b *Backend) poolObject(name string) string {
	sum := sha256.Sum256([]byte(b.o.Instance + "\x00" + b.o.Name + "\x00" + name))
	return "paddock-pool-" + hex.EncodeToString(sum[:6])
}

func (b *Backend) poolLabels(obj string) map[string]string {
	return map[string]string{LabelWarmPool: obj, LabelInstance: b.o.Instance, LabelRuntime: b.o.Name}
}

// poolMeta is the metadata of pool name's objects (Secret, NetworkPolicy,
// SandboxTemplate, SandboxWarmPool).
func (b *Backend) poolMeta(name string) metav1.ObjectMeta {
	obj := b.poolObject(name)
	return metav1.ObjectMeta{Name: obj, Namespace: b.o.Namespace, Labels: b.poolLabels(obj), Annotations: map[string]string{annotationPool: name}}
}

// SetWarmPool implements runtime.WarmPooler.
func (b *Backend) SetWarmPool(ctx context.Context, name string, spec runtime.Spec, replicas int) error {
	if spec.Image.Name == "" || spec.Image.Digest == "" {
		return fmt.Errorf("pool %s: the kubernetes backend needs the image's name and digest: %w", name, errdefs.ErrInvalidArgument)
	}
	obj := b.poolObject(name)
	labels := b.poolLabels(obj)
	meta := b.poolMeta(name)
	tok, _, err := b.ensureToken(ctx, meta)
	if err != nil {
		return fmt.Errorf("pool %s: %w", name, err)
	}
	b.poolTokens.Store(obj, tok)
	readyIn := notReadyGrace
	if spec.Start != nil {
		readyIn += cmp.Or(time.Duration(spec.Start.ReadyTimeoutMs)*time.Millisecond, wire.DefaultReadyTimeout)
	}
	b.poolReadyIn.Store(obj, readyIn)
	b.poolStarts.Store(obj, spec.Start != nil)
	b.poolSeeds.Store(obj, b.seedsHome(spec)) // seedhome.go
	np := b.policy(meta, map[string]string{LabelWarmPool: obj, LabelInstance: b.o.Instance})
	if err := b.o.Client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pool %s: create NetworkPolicy: %w", name, apiErr(err))
	}
	pod, claims := b.poolPodSpec(spec, obj)
	tpl := extv1.SandboxTemplate{
		ObjectMeta: meta,
		Spec: extv1.SandboxTemplateSpec{
			SandboxBlueprint: sandboxv1.SandboxBlueprint{
				PodTemplate:          sandboxv1.PodTemplate{Spec: pod, ObjectMeta: sandboxv1.PodMetadata{Labels: labels}},
				Service:              &no,
				VolumeClaimTemplates: claims,
			},
			// Paddock's own policy (above) covers the pool's pods.
			NetworkPolicyManagement: extv1.NetworkPolicyManagementUnmanaged,
		},
	}
	var cur extv1.SandboxTemplate
	err = b.o.Client.Get(ctx, b.nsName(obj), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := b.o.Client.Create(ctx, &tpl); err != nil {
			return fmt.Errorf("pool %s: create SandboxTemplate: %w", name, apiErr(err))
		}
	case err != nil:
		return fmt.Errorf("pool %s: %w", name, apiErr(err))
	case !equality.Semantic.DeepEqual(cur.Spec.SandboxBlueprint, tpl.Spec.SandboxBlueprint):
		cur.Spec = tpl.Spec
		if err := b.o.Client.Update(ctx, &cur); err != nil {
			return fmt.Errorf("pool %s: update SandboxTemplate: %w", name, apiErr(err))
		}
	}
	n := int32(max(replicas, 0))
	// A rebuilt template's pool must not hand out the old build: stale
	// unclaimed Sandboxes are replaced at once.
	recreate := &extv1.SandboxWarmPoolUpdateStrategy{Type: extv1.RecreateSandboxWarmPoolUpdateStrategyType}
	var wp extv1.SandboxWarmPool
	err = b.o.Client.Get(ctx, b.nsName(obj), &wp)
	switch {
	case apierrors.IsNotFound(err):
		wp = extv1.SandboxWarmPool{ObjectMeta: meta, Spec: extv1.SandboxWarmPoolSpec{Replicas: &n, TemplateRef: extv1.SandboxTemplateRef{Name: obj}, UpdateStrategy: recreate}}
		if err := b.o.Client.Create(ctx, &wp); err != nil {
			return fmt.Errorf("pool %s: create SandboxWarmPool: %w", name, apiErr(err))
		}
	case err != nil:
		return fmt.Errorf("pool %s: %w", name, apiErr(err))
	case wp.Spec.Replicas == nil || *wp.Spec.Replicas != n || wp.Spec.UpdateStrategy == nil || *wp.Spec.UpdateStrategy != *recreate:
		patch := client.MergeFrom(wp.DeepCopy())
		wp.Spec.Replicas, wp.Spec.UpdateStrategy = &n, recreate
		if err := b.o.Client.Patch(ctx, &wp, patch); err != nil {
			return fmt.Errorf("pool %s: resize SandboxWarmPool: %w", name, apiErr(err))
		}
	}
	return nil
}

// poolPodSpec is podSpec for the pods of the pool whose objects are named
// obj: they start unclaimed, with the pool's token, and are Ready only
// once their agent answers (the readiness probe), so that the cluster's
// pool counts, and agent-sandbox hands out first, pods whose agent has
// started, not pods whose container has: on a small CPU limit the agent's
// start (about 70 to 100 ms of CPU, the container's runtime included)
// takes up to a second, and a claim of such a pod would wait for it.
func (b *Backend) poolPodSpec(spec runtime.Spec, obj string) (corev1.PodSpec, []sandboxv1.PersistentVolumeClaimTemplate) {
	pod, claims := b.podSpec(spec, secretEnv(wire.EnvPoolToken, obj))
	if ctr := &pod.Containers[0]; ctr.ReadinessProbe == nil {
		ctr.ReadinessProbe = startedProbe()
	}
	return pod, claims
}

// notReadyGrace is how long a pool's pod may run unready beyond its start
// command's readiness timeout before the pool says so.
const notReadyGrace = 15 * time.Second

// podFailing is the waiting reasons that say a pod will not run without
// a change (an image, a configuration): reported at once.
var podFailing = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true,
	"RunContainerError": true,
}

// WarmPoolProblem implements runtime.WarmPoolDiagnoser: the first of the
// pool's unclaimed pods that cannot run (its image, no node takes it) or
// runs unready past its start command's readiness timeout, and why.
func (b *Backend) WarmPoolProblem(ctx context.Context, name string) string {
	obj := b.poolObject(name)
	var pods corev1.PodList
	if err := b.o.Client.List(ctx, &pods, client.InNamespace(b.o.Namespace),
		client.MatchingLabels{LabelWarmPool: obj, LabelInstance: b.o.Instance}); err != nil {
		return ""
	}
	readyIn := notReadyGrace + wire.DefaultReadyTimeout
	if d, ok := b.poolReadyIn.Load(obj); ok {
		readyIn = d.(time.Duration)
	}
	return poolProblem(pods.Items, readyIn, time.Now())
}

// poolProblem is WarmPoolProblem's reading of the pods.
func poolProblem(pods []corev1.Pod, readyIn time.Duration, now time.Time) string {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range pods {
		p := &pods[i]
		if p.Labels[extv1.SandboxIDLabel] != "" || p.DeletionTimestamp != nil {
			continue // claimed, or going
		}
		if p.Status.Phase == corev1.PodFailed {
			return fmt.Sprintf("pod %s of the pool failed: %s", p.Name, podReason(p))
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s of the pool is not scheduled: %s", p.Name, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && podFailing[w.Reason] {
				return fmt.Sprintf("pod %s of the pool cannot start: %s: %s", p.Name, w.Reason, w.Message)
			}
			if r := cs.State.Running; r != nil && !cs.Ready && now.Sub(r.StartedAt.Time) > readyIn {
				return fmt.Sprintf("pod %s of the pool has run %s without becoming ready: the template's start command failed or its readiness check did not pass (the agent's log in the pod says which)",
					p.Name, now.Sub(r.StartedAt.Time).Round(time.Second))
			}
		}
	}
	return ""
}

// WarmPoolReady implements runtime.WarmPooler.
func (b *Backend) WarmPoolReady(ctx context.Context, name string) (int, error) {
	var wp extv1.SandboxWarmPool
	err := b.o.Client.Get(ctx, b.nsName(b.poolObject(name)), &wp)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("pool %s: %w", name, apiErr(err))
	}
	return int(wp.Status.ReadyReplicas), nil
}

// DeleteWarmPool implements runtime.WarmPooler: the SandboxWarmPool goes
// first (its unclaimed Sandboxes with it), then, once none of its
// unclaimed pods is left, its template, policy and token.
func (b *Backend) DeleteWarmPool(ctx context.Context, name string) error {
	obj := b.poolObject(name)
	om := metav1.ObjectMeta{Name: obj, Namespace: b.o.Namespace}
	fg := client.PropagationPolicy(metav1.DeletePropagationForeground)
	b.poolTokens.Delete(obj)
	if err := b.o.Client.Delete(ctx, &extv1.SandboxWarmPool{ObjectMeta: om}, fg); err != nil && !gone(err) {
		return fmt.Errorf("pool %s: delete SandboxWarmPool: %w", name, apiErr(err))
	}
	if err := b.waitGone(ctx, "pool "+name, obj, &extv1.SandboxWarmPool{}, &extv1.SandboxWarmPoolList{}); err != nil {
		return err
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var pods corev1.PodList
		if err := b.o.Client.List(ctx2, &pods, client.InNamespace(b.o.Namespace), client.MatchingLabels{LabelWarmPool: obj, LabelInstance: b.o.Instance}); err != nil {
			return fmt.Errorf("pool %s: list pods: %w", name, apiErr(err))
		}
		left := 0
		for _, p := range pods.Items {
			if p.Labels[extv1.SandboxIDLabel] == "" { // not claimed
				left++
			}
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx2.Done():
			return fmt.Errorf("pool %s: %d unclaimed pods still there after a minute: %w", name, left, errdefs.ErrUnavailable)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, o := range []client.Object{&extv1.SandboxTemplate{ObjectMeta: om}, &corev1.Secret{ObjectMeta: om}} {
		if err := b.o.Client.Delete(ctx, o); err != nil && !gone(err) {
			return fmt.Errorf("pool %s: delete %T: %w", name, o, apiErr(err))
		}
	}
	// Claimed pods keep the pool's label; their own policies cover them.
	if err := b.o.Client.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: om}); err != nil && !gone(err) {
		return fmt.Errorf("pool %s: delete NetworkPolicy: %w", name, apiErr(err))
	}
	return nil
}

// gone says an object (or its whole kind) is not there.
func gone(err error) bool { return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) }

// WarmPools implements runtime.WarmPooler.
func (b *Backend) WarmPools(ctx context.Context) ([]string, error) {
	var wps extv1.SandboxWarmPoolList
	err := b.o.Client.List(ctx, &wps, client.InNamespace(b.o.Namespace), client.MatchingLabels{LabelInstance: b.o.Instance, LabelRuntime: b.o.Name})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list SandboxWarmPools: %w", apiErr(err))
	}
	var names []string
	for _, wp := range wps.Items {
		if n := wp.Annotations[annotationPool]; n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// ensureToken returns the token in the Secret m names, creating the
// Secret with a fresh token if there is none (created says it did). It
// tries the create first: a new sandbox has none, and a start again pays
// one refused create.
func (b *Backend) ensureToken(ctx context.Context, m metav1.ObjectMeta) (token string, created bool, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(raw)
	immutable := true
	sec := corev1.Secret{ObjectMeta: m, Immutable: &immutable, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{tokenKey: []byte(token)}}
	err = b.o.Client.Create(ctx, &sec)
	if err == nil {
		return token, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", false, fmt.Errorf("create Secret: %w", apiErr(err))
	}
	if err := b.o.Client.Get(ctx, b.nsName(m.Name), &sec); err != nil {
		return "", false, apiErr(err)
	}
	if t := string(sec.Data[tokenKey]); len(t) >= 32 {
		return t, false, nil
	}
	return "", false, fmt.Errorf("its Secret %s holds no usable token: %w", m.Name, errdefs.ErrFailedPrecondition)
}

// sandboxName is the name of id's Sandbox and pod: objectName(id) for a
// sandbox this backend created, the adopted Sandbox's for one taken from
// a warm pool, which its SandboxClaim names. Answers are kept: a name
// never changes once known.
func (b *Backend) sandboxName(ctx context.Context, id string) (string, error) {
	if v, ok := b.names.Load(id); ok {
		return v.(string), nil
	}
	var cl extv1.SandboxClaim
	err := b.o.Client.Get(ctx, b.key(id), &cl)
	switch {
	case gone(err):
		b.names.Store(id, objectName(id))
		return objectName(id), nil
	case err != nil:
		return "", fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	if n := claimedName(&cl); n != "" {
		b.names.Store(id, n)
		return n, nil
	}
	return objectName(id), nil // not satisfied yet: nothing runs
}

func claimedName(cl *extv1.SandboxClaim) string {
	if n := cl.Status.SandboxStatus.Name; n != "" {
		return n
	}
	return cl.Annotations[extv1.AssignedSandboxNameAnnotation]
}

// claim takes spec's sandbox from its warm pool (see the top of this
// file); token is the sandbox's own.
func (b *Backend) claim(ctx context.Context, spec runtime.Spec, token string) (runtime.Info, error) {
	id, pool := spec.ID, spec.WarmPool
	start := time.Now()
	obj := b.poolObject(pool)
	poolToken, err := b.poolToken(ctx, pool)
	if err != nil {
		return runtime.Info{}, fmt.Errorf("sandbox %s: pool %s: %w", id, pool, err)
	}
	cl := extv1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace, Labels: b.labels(id), Annotations: map[string]string{annotationPool: pool}},
		Spec:       extv1.SandboxClaimSpec{WarmPoolRef: extv1.SandboxWarmPoolRef{Name: obj}},
	}
	if err := b.o.Client.Create(ctx, &cl); err != nil && !apierrors.IsAlreadyExists(err) {
		return runtime.Info{}, fmt.Errorf("sandbox %s: create SandboxClaim: %w", id, apiErr(err))
	}
	name, uid, ips, err := b.waitClaimed(ctx, id)
	if err != nil {
		return runtime.Info{}, err
	}
	satisfied := time.Now()
	b.names.Store(id, name)
	// Three things before the sandbox is handed out, at once: its own
	// policy, which follows the claim's identity (agent-sandbox keeps it
	// on the pod; the pool's policy covers the pod meanwhile), its
	// Sandbox made its own, and its agent claimed.
	var info runtime.Info
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		np := b.policy(metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace, Labels: b.labels(id)}, map[string]string{extv1.SandboxIDLabel: uid})
		if err := b.o.Client.Create(gctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("sandbox %s: create NetworkPolicy: %w", id, apiErr(err))
		}
		return nil
	})
	started, _ := b.poolStarts.Load(obj)
	seeds, _ := b.poolSeeds.Load(obj)
	g.Go(func() error { return b.adopt(gctx, id, name, started == true, seeds == true) })
	g.Go(func() error {
		// The claim mirrors its pod's address once the pod runs (a warm
		// pool's pods do); otherwise the pod is waited for.
		ip := firstIPv4(ips)
		if ip == "" {
			var err error
			if ip, err = b.waitPodIP(gctx, id, name); err != nil {
				return err
			}
		}
		info = runtime.Info{AgentAddr: net.JoinHostPort(ip, strconv.Itoa(agentPort)), AgentToken: token}
		cctx, cancel := context.WithTimeout(gctx, b.o.StartTimeout)
		defer cancel()
		if err := agentclient.Claim(cctx, info.AgentAddr, poolToken, token); err != nil {
			// The pool's Secret may have been made again meanwhile.
			b.poolTokens.Delete(obj)
			return fmt.Errorf("sandbox %s: pool %s: %w", id, pool, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return runtime.Info{}, err
	}
	b.o.Logger.Info("sandbox taken from warm pool", "sandbox", id, "pool", pool, "pod", name, "agent", info.AgentAddr,
		"claim_satisfied_ms", satisfied.Sub(start).Milliseconds(), "total_ms", time.Since(start).Milliseconds())
	return info, nil
}

// poolToken is the token of pool's pods: the one kept, or its Secret's.
func (b *Backend) poolToken(ctx context.Context, pool string) (string, error) {
	obj := b.poolObject(pool)
	if t, ok := b.poolTokens.Load(obj); ok {
		return t.(string), nil
	}
	t, _, err := b.ensureToken(ctx, b.poolMeta(pool))
	if err != nil {
		return "", err
	}
	b.poolTokens.Store(obj, t)
	return t, nil
}

// waitClaimed waits until id's claim names its Sandbox, and returns that
// name, the claim's uid and the pod's addresses the claim shows (none
// while its pod does not run).
func (b *Backend) waitClaimed(ctx context.Context, id string) (name, uid string, ips []string, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.o.StartTimeout)
	defer cancel()
	var last string
	var deleted error
	err = b.follow(ctx, objectName(id), &extv1.SandboxClaim{}, &extv1.SandboxClaimList{}, func(o client.Object, err error) (bool, error) {
		switch {
		case err == nil:
			cl := o.(*extv1.SandboxClaim)
			if n := claimedName(cl); n != "" {
				name, uid, ips = n, string(cl.UID), cl.Status.SandboxStatus.PodIPs
				return true, nil
			}
			last = "no Sandbox yet"
			if c := meta.FindStatusCondition(cl.Status.Conditions, string(sandboxv1.SandboxConditionReady)); c != nil && c.Reason != "" {
				last = c.Reason + ": " + c.Message
			}
		case apierrors.IsNotFound(err):
			deleted = fmt.Errorf("sandbox %s: its SandboxClaim was deleted: %w", id, errdefs.ErrUnavailable)
			return true, deleted
		default:
			last = err.Error()
		}
		return false, nil
	})
	switch {
	case deleted != nil:
		return "", "", nil, deleted
	case err == nil:
		return name, uid, ips, nil
	}
	return "", "", nil, fmt.Errorf("sandbox %s: the warm pool's claim was not satisfied after %s (%s): %w", id, time.Since(start).Round(time.Second), last, errdefs.ErrUnavailable)
}

// firstIPv4 is the first IPv4 address of ips, or "".
func firstIPv4(ips []string) string {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a.String()
		}
	}
	return ""
}

// adopt makes the claimed Sandbox name the sandbox id's: its labels (so
// List finds it) and, for its pods after a stop, the sandbox's own token
// instead of the pool's, no start command (started: the pool's pods ran
// one at boot, which a sandbox's later start does not do, as on one host)
// and no readiness probe (a later start waits for the agent itself). The
// running pod keeps its spec.
//
// One JSON patch does it when the Sandbox is as the pool's template made
// it (the pool's token first in the agent's environment, the start
// command second, which the patch tests); otherwise the Sandbox is read
// and patched where they are.
func (b *Backend) adopt(ctx context.Context, id, name string, started, seeds bool) error {
	const ctr = "/spec/podTemplate/spec/containers/0"
	ops := []map[string]any{
		{"op": "test", "path": ctr + "/env/0/name", "value": wire.EnvPoolToken},
		{"op": "replace", "path": ctr + "/env/0", "value": secretEnv(wire.EnvToken, objectName(id))},
	}
	if started {
		ops = append(ops,
			map[string]any{"op": "test", "path": ctr + "/env/1/name", "value": wire.EnvStart},
			map[string]any{"op": "remove", "path": ctr + "/env/1"})
	}
	if seeds {
		const init = "/spec/podTemplate/spec/initContainers"
		ops = append(ops,
			map[string]any{"op": "test", "path": init + "/0/name", "value": seedName},
			map[string]any{"op": "remove", "path": init})
	}
	ops = append(ops, map[string]any{"op": "remove", "path": ctr + "/readinessProbe"})
	for k, v := range b.labels(id) {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + jsonPointerEscape(k), "value": v})
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	sb := sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.o.Namespace}}
	if err := b.o.Client.Patch(ctx, &sb, client.RawPatch(types.JSONPatchType, raw)); err == nil {
		return nil
	} else if ctx.Err() != nil {
		return fmt.Errorf("sandbox %s: label its claimed Sandbox %s: %w", id, name, apiErr(err))
	}
	if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
		return fmt.Errorf("sandbox %s: its claimed Sandbox %s: %w", id, name, apiErr(err))
	}
	patch := client.MergeFrom(sb.DeepCopy())
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	for k, v := range b.labels(id) {
		sb.Labels[k] = v
	}
	sb.Spec.PodTemplate.Spec.InitContainers, _ = withoutSeed(sb.Spec.PodTemplate.Spec.InitContainers) // seedhome.go
	cs := sb.Spec.PodTemplate.Spec.Containers
	for i := range cs {
		for j := range cs[i].Env {
			if cs[i].Env[j].Name == wire.EnvPoolToken {
				cs[i].Env[j] = secretEnv(wire.EnvToken, objectName(id))
			}
		}
		cs[i].Env = slices.DeleteFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == wire.EnvStart })
		if p := cs[i].ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path == wire.StartedPath {
			cs[i].ReadinessProbe = nil
		}
	}
	if err := b.o.Client.Patch(ctx, &sb, patch); err != nil {
		return fmt.Errorf("sandbox %s: label its claimed Sandbox %s: %w", id, name, apiErr(err))
	}
	return nil
}

// jsonPointerEscape escapes s as one token of a JSON pointer (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// deleteClaim deletes id's SandboxClaim, if it has one.
func (b *Backend) deleteClaim(ctx context.Context, id string) error {
	cl := extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace}}
	err := b.o.Client.Delete(ctx, &cl, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if err != nil && !gone(err) {
		return fmt.Errorf("sandbox %s: delete SandboxClaim: %w", id, apiErr(err))
	}
	return nil
}

var _ runtime.WarmPooler = (*Backend)(nil)

// backoff is a polling delay that starts short, as an answer often comes
// within milliseconds, and grows to 100 ms.
type backoff time.Duration

func (d *backoff) next() time.Duration {
	*d = backoff(min(max(2*time.Duration(*d), 5*time.Millisecond), 100*time.Millisecond))
	return time.Duration(*d)
}
