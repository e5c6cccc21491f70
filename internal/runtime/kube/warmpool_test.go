package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

func fakeBackend(t *testing.T, name, instance string) (*Backend, client.Client) {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&extv1.SandboxClaim{}).Build()
	b, err := New(Options{Name: name, Client: cl, Namespace: "ns", Instance: instance, ImagePrefix: "paddock.local", StartTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return b, cl
}

var busybox = runtime.ImageRef{Name: "busybox", Digest: "sha256:" + strings.Repeat("b", 64)}

// TestWarmPoolObjects: SetWarmPool makes the pool's token, policy,
// template (whose pods start unclaimed, with the pool's token) and warm
// pool, resizes on a second call, and keeps two daemons' pools of one
// name apart; DeleteWarmPool removes them all.
func TestWarmPoolObjects(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	other, _ := fakeBackend(t, "runc", "pd-b")
	if b.poolObject("py") == other.poolObject("py") || b.poolObject("py") == b.poolObject("js") {
		t.Fatal("pool object names collide")
	}
	spec := runtime.Spec{Image: busybox, Env: []string{"A=1"}, Resources: runtime.Resources{CPUMillis: 500, MemoryBytes: 256 << 20}}
	if err := b.SetWarmPool(ctx, "py", spec, 2); err != nil {
		t.Fatal(err)
	}
	obj := b.poolObject("py")
	var tpl extv1.SandboxTemplate
	if err := cl.Get(ctx, b.nsName(obj), &tpl); err != nil {
		t.Fatal(err)
	}
	env := tpl.Spec.PodTemplate.Spec.Containers[0].Env
	if env[0].Name != wire.EnvPoolToken || env[0].ValueFrom.SecretKeyRef.Name != obj {
		t.Errorf("the pool's pods get %+v first, want the pool's token", env[0])
	}
	if tpl.Spec.NetworkPolicyManagement != extv1.NetworkPolicyManagementUnmanaged {
		t.Errorf("template policy management %q", tpl.Spec.NetworkPolicyManagement)
	}
	var wp extv1.SandboxWarmPool
	if err := cl.Get(ctx, b.nsName(obj), &wp); err != nil || *wp.Spec.Replicas != 2 || wp.Spec.TemplateRef.Name != obj {
		t.Fatalf("warm pool %+v: %v", wp.Spec, err)
	}
	var sec corev1.Secret
	if err := cl.Get(ctx, b.nsName(obj), &sec); err != nil || len(sec.Data[tokenKey]) < 32 {
		t.Fatalf("pool Secret: %v", err)
	}
	if err := b.SetWarmPool(ctx, "py", spec, 5); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.nsName(obj), &wp); err != nil || *wp.Spec.Replicas != 5 {
		t.Fatalf("resized warm pool %+v: %v", wp.Spec, err)
	}
	if names, err := b.WarmPools(ctx); err != nil || !slices.Equal(names, []string{"py"}) {
		t.Fatalf("WarmPools = %v, %v", names, err)
	}
	if names, err := other.WarmPools(ctx); err != nil || len(names) != 0 {
		t.Fatalf("another daemon's WarmPools = %v, %v", names, err)
	}
	if err := b.DeleteWarmPool(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&extv1.SandboxWarmPool{}, &extv1.SandboxTemplate{}, &corev1.Secret{}} {
		if err := cl.Get(ctx, b.nsName(obj), o); err == nil {
			t.Errorf("%T left after DeleteWarmPool", o)
		}
	}
	if err := b.DeleteWarmPool(ctx, "py"); err != nil {
		t.Errorf("deleting a pool twice: %v", err)
	}
}

// TestClaimNeverSatisfied: a claim the cluster does not satisfy within
// the start timeout fails with the claim's own reason, is listed (so a
// restart finds it), and Destroy removes it with the sandbox's Secret.
func TestClaimNeverSatisfied(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	if err := b.SetWarmPool(ctx, "py", runtime.Spec{Image: busybox}, 1); err != nil {
		t.Fatal(err)
	}
	// Nothing satisfies claims here; say why as the controller would.
	_, err := b.Start(ctx, runtime.Spec{ID: "s1", Image: busybox, WarmPool: "py"})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "not satisfied") {
		t.Fatalf("Start from a pool nothing serves: %v", err)
	}
	var claim extv1.SandboxClaim
	if err := cl.Get(ctx, b.key("s1"), &claim); err != nil {
		t.Fatal(err)
	}
	if claim.Spec.WarmPoolRef.Name != b.poolObject("py") || claim.Labels[LabelSandbox] != "s1" {
		t.Fatalf("claim %+v", claim)
	}
	if ids, err := b.List(ctx); err != nil || !slices.Contains(ids, "s1") {
		t.Fatalf("List = %v, %v", ids, err)
	}
	// Now the cluster satisfies it, with a reason shown while it did not.
	claim.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "WarmPoolNotFound", Message: "gone", LastTransitionTime: metav1.Now()}}
	if err := cl.Status().Update(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	_, err = b.Start(ctx, runtime.Spec{ID: "s1", Image: busybox, WarmPool: "py"})
	if err == nil || !strings.Contains(err.Error(), "WarmPoolNotFound: gone") {
		t.Fatalf("Start again: %v, want the claim's reason", err)
	}
	if err := b.Destroy(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&extv1.SandboxClaim{}, &corev1.Secret{}} {
		if err := cl.Get(ctx, b.key("s1"), o); err == nil {
			t.Errorf("%T left after Destroy", o)
		}
	}
	if ids, _ := b.List(ctx); slices.Contains(ids, "s1") {
		t.Errorf("List after Destroy: %v", ids)
	}
}

// TestClaimedSandboxName: a satisfied claim names the Sandbox every later
// call uses; a sandbox without a claim keeps its own name.
func TestClaimedSandboxName(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	claim := &extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: objectName("s2"), Namespace: "ns", Labels: b.labels("s2")}}
	if err := cl.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim.Status.SandboxStatus.Name = "paddock-pool-abc-xyz12"
	if err := cl.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	sb := &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "paddock-pool-abc-xyz12", Namespace: "ns"},
		Spec: sandboxv1.SandboxSpec{OperatingMode: sandboxv1.SandboxOperatingModeSuspended}}
	if err := cl.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if n, err := b.sandboxName(ctx, "s2"); err != nil || n != "paddock-pool-abc-xyz12" {
		t.Fatalf("sandboxName = %q, %v", n, err)
	}
	if st, err := b.Status(ctx, "s2"); err != nil || st != runtime.StatusStopped {
		t.Fatalf("Status of the claimed, suspended Sandbox = %q, %v", st, err)
	}
	if n, err := b.sandboxName(ctx, "s3"); err != nil || n != objectName("s3") {
		t.Fatalf("sandboxName of a sandbox without a claim = %q, %v", n, err)
	}
}

// TestClaimedSandboxStartsWithItsToken: a claimed sandbox whose Sandbox
// still names the pool's token (the claim was cut before the backend
// said otherwise) gets the sandbox's own token before its next pod.
func TestClaimedSandboxStartsWithItsToken(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	// The first start made the sandbox's Secret, then its claim.
	if _, _, err := b.ensureSecret(ctx, "s4"); err != nil {
		t.Fatal(err)
	}
	claim := &extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: objectName("s4"), Namespace: "ns", Labels: b.labels("s4")}}
	if err := cl.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim.Status.SandboxStatus.Name = "paddock-pool-abc-q1"
	if err := cl.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pod, _ := b.poolPodSpec(runtime.Spec{Image: busybox}, b.poolObject("py"))
	sb := &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "paddock-pool-abc-q1", Namespace: "ns"},
		Spec: sandboxv1.SandboxSpec{OperatingMode: sandboxv1.SandboxOperatingModeSuspended}}
	sb.Spec.PodTemplate.Spec = pod
	if err := cl.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	// No pod comes up here; the start fails waiting for it, after the
	// Sandbox was made the sandbox's own and set running.
	_, err := b.Start(ctx, runtime.Spec{ID: "s4", Image: busybox, WarmPool: "py"})
	if err == nil {
		t.Fatal("a start with no pod coming up succeeded")
	}
	if err := cl.Get(ctx, b.nsName("paddock-pool-abc-q1"), sb); err != nil {
		t.Fatal(err)
	}
	env := sb.Spec.PodTemplate.Spec.Containers[0].Env[0]
	if env.Name != wire.EnvToken || env.ValueFrom.SecretKeyRef.Name != objectName("s4") {
		t.Errorf("the pod template's token: %+v", env)
	}
	if sb.Spec.OperatingMode != sandboxv1.SandboxOperatingModeRunning || sb.Labels[LabelSandbox] != "s4" {
		t.Errorf("Sandbox after start: mode %s, labels %v", sb.Spec.OperatingMode, sb.Labels)
	}
}

// TestAdoptPatchesOnce: a claimed Sandbox as the pool's template made it
// is made the sandbox's own with one patch (no read): its labels added to
// the pool's, the pool's token replaced by the sandbox's; other env kept.
func TestAdoptPatchesOnce(t *testing.T) {
	ctx := context.Background()
	start := &wire.StartSpec{Cmd: []string{"sleep", "1"}, ReadyLog: "up"}
	for _, tc := range []struct {
		name      string
		start     *wire.StartSpec // the pool's
		told      bool            // adopt is told the pool has one
		seeds     bool            // the pool's pods seed their home
		toldSeeds bool
		wantReads int32
	}{
		{"plain pool", nil, false, false, false, 0},
		{"start command", start, true, false, false, 0},
		{"start command, not told", start, false, false, false, 0},
		{"told, but none", nil, true, false, false, 1},
		{"seeded home", start, true, true, true, 0},
		{"seeded home, not told", nil, false, true, false, 0},
		{"told of a seed, but none", nil, false, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, cl := fakeBackend(t, "runc", "pd-a")
			b.o.HomeVolume = true
			obj := b.poolObject("py")
			spec := runtime.Spec{Image: busybox, Env: []string{"A=1"}, Start: tc.start}
			if tc.seeds {
				spec.ImageLayers = 2 // a template's stacked image
			}
			pod, _ := b.poolPodSpec(spec, obj)
			if got := len(pod.InitContainers) == 1 && pod.InitContainers[0].Name == seedName; got != tc.seeds {
				t.Fatalf("the pool's pods seed their home: %v, want %v (init containers %+v)", got, tc.seeds, pod.InitContainers)
			}
			sb := &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "paddock-pool-abc-q2", Namespace: "ns", Labels: b.poolLabels(obj)}}
			sb.Spec.PodTemplate.Spec = pod
			if p := pod.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != wire.StartedPath {
				t.Fatalf("a pool's pod is Ready before its agent answers: probe %+v", p)
			}
			if err := cl.Create(ctx, sb); err != nil {
				t.Fatal(err)
			}
			cc := &countingClient{WithWatch: cl.(client.WithWatch)}
			b.o.Client = cc
			if err := b.adopt(ctx, "s5", sb.Name, tc.told, tc.toldSeeds); err != nil {
				t.Fatal(err)
			}
			if n := cc.gets.Load(); n != tc.wantReads {
				t.Errorf("adopt read the Sandbox %d times; want %d", n, tc.wantReads)
			}
			if err := cl.Get(ctx, b.nsName(sb.Name), sb); err != nil {
				t.Fatal(err)
			}
			ctr := sb.Spec.PodTemplate.Spec.Containers[0]
			env := ctr.Env
			if env[0].Name != wire.EnvToken || env[0].ValueFrom.SecretKeyRef.Name != objectName("s5") {
				t.Errorf("the pod template's token: %+v", env[0])
			}
			if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "A" && e.Value == "1" }) {
				t.Errorf("the template's other variables: %+v", env)
			}
			// Told, a claimed Sandbox's later pods run no start command
			// (the pool's pods ran it); not told, the fast patch leaves
			// it, which the read-and-patch path does not. The pool's
			// readiness probe goes in every case.
			hasStart := slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == wire.EnvStart })
			if tc.told && hasStart {
				t.Errorf("the start command stayed: env %+v", env)
			}
			if ctr.ReadinessProbe != nil {
				t.Errorf("the pool's readiness probe stayed: %+v", ctr.ReadinessProbe)
			}
			// Told, or read, the seed container goes: later pods of the
			// sandbox find its home its own.
			if seedStays := len(sb.Spec.PodTemplate.Spec.InitContainers) > 0; seedStays != (tc.seeds && !tc.toldSeeds) {
				t.Errorf("init containers after adopt: %+v", sb.Spec.PodTemplate.Spec.InitContainers)
			}
			if sb.Labels[LabelSandbox] != "s5" || sb.Labels[LabelWarmPool] != obj || sb.Labels[LabelInstance] != "pd-a" {
				t.Errorf("labels %v", sb.Labels)
			}
		})
	}
}

// A claimed Sandbox whose fast patch cannot apply (adopted before, cut
// short) is read and patched: the start command goes too.
func TestAdoptReadsWhenPatchFails(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	obj := b.poolObject("py")
	pod, _ := b.poolPodSpec(runtime.Spec{Image: busybox, Start: &wire.StartSpec{Cmd: []string{"true"}}}, obj)
	pod.Containers[0].Env[0], pod.Containers[0].Env[1] = pod.Containers[0].Env[1], pod.Containers[0].Env[0]
	sb := &sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "paddock-pool-abc-q3", Namespace: "ns", Labels: b.poolLabels(obj)}}
	sb.Spec.PodTemplate.Spec = pod
	if err := cl.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := b.adopt(ctx, "s6", sb.Name, true, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.nsName(sb.Name), sb); err != nil {
		t.Fatal(err)
	}
	ctr := sb.Spec.PodTemplate.Spec.Containers[0]
	if len(ctr.Env) != 1 || ctr.Env[0].Name != wire.EnvToken || ctr.ReadinessProbe != nil {
		t.Errorf("after the read-and-patch: env %+v, probe %+v", ctr.Env, ctr.ReadinessProbe)
	}
}

// poolProblem reads a pool's pods: the first that cannot run or runs
// unready too long says why; claimed and ready pods, and pods still
// within their readiness time, say nothing.
func TestPoolProblem(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	running := func(name string, ready bool, since time.Duration) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-since))}},
			}}},
		}
	}
	claimed := running("c", false, time.Hour)
	claimed.Labels = map[string]string{extv1.SandboxIDLabel: "uid"}
	pullFails := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}}
	pulling := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	unschedulable := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}}}
	readyIn := 45 * time.Second
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string // a part of the answer; "" for none
	}{
		{"all well", []corev1.Pod{running("a", true, time.Hour), running("b", false, 10*time.Second), pulling, claimed}, ""},
		{"unready too long", []corev1.Pod{running("a", true, time.Hour), running("b", false, time.Minute)}, "pod b of the pool has run 1m0s without becoming ready: the template's start command failed"},
		{"image", []corev1.Pod{running("a", true, time.Hour), pullFails}, "pod p of the pool cannot start: ImagePullBackOff: no such image"},
		{"unschedulable", []corev1.Pod{unschedulable}, "pod u of the pool is not scheduled: 0/1 nodes are available"},
	} {
		got := poolProblem(tc.pods, readyIn, now)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
