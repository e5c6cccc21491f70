// Package kube runs Paddock sandboxes as agent-sandbox Sandbox objects
// (sigs.k8s.io/agent-sandbox, agents.x-k8s.io/v1beta1) on a Kubernetes
// cluster. Each sandbox is one pod whose only container runs Paddock's
// agent from an image Paddock exported (image.ExportOCI), listening on the
// pod's network with a token of its own kept in a Secret. The daemon
// reaches the agent by the pod's IP; everything else (exec, files,
// sessions, the E2B data plane) goes through the agent as on one host.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Labels on every object the backend creates.
const (
	LabelSandbox  = "paddock.dev/sandbox"
	LabelInstance = "paddock.dev/instance"
	// LabelRuntime is the Paddock runtime (one Backend each) whose sandbox
	// an object belongs to: each backend lists only its own, so a daemon
	// offering runc and gvisor never takes one's sandboxes for the other's
	// orphans at a restart.
	LabelRuntime = "paddock.dev/runtime"
)

// tokenKey is the Secret's key holding the agent's token.
const tokenKey = "agent-token"

// agentPort is the port the exported images' agent listens on.
const agentPort = image.AgentPort

// containerName is the pod's one container.
const containerName = "sandbox"

// Options configure a Backend.
type Options struct {
	// Name is the runtime name the API shows ("runc", "gvisor").
	Name string
	// Client reaches the cluster's API server.
	Client client.Client
	// Watcher opens watches (Cluster.Watcher); nil: Client, if it can.
	Watcher client.WithWatch
	// Namespace holds every object of this daemon's sandboxes.
	Namespace string
	// Instance tells this daemon's objects from another's in the same
	// namespace (LabelInstance).
	Instance string
	// ImagePrefix is where the sandboxes' images are named
	// (image.OCIRef): a registry the nodes pull from, or the name the
	// images were imported under on the nodes.
	ImagePrefix string
	// AgentID names the agent the images carry (image.AgentID), as image
	// references do (image.OCIRef).
	AgentID string
	// ImagePullSecret names the Secret the pods pull their image with
	// ("": none).
	ImagePullSecret string
	// RuntimeClass is the pods' RuntimeClass ("" = the cluster's default).
	RuntimeClass string
	// HomeVolume puts the default user's home directory (/home/user) on
	// a PersistentVolumeClaim of the Sandbox (volumeClaimTemplates), so
	// files there survive a stop, which deletes the pod. HomeStorageClass
	// names its StorageClass ("" = the cluster's default).
	HomeVolume       bool
	HomeStorageClass string
	// StartTimeout bounds the wait for a pod to get an address
	// (scheduling and image pull included).
	StartTimeout time.Duration
	// EgressProxyPods, when set, are the pods serving the egress proxy
	// (the daemon's, in the cluster): the sandboxes' NetworkPolicies
	// name them by namespace and labels instead of by the proxy's
	// address.
	EgressProxyPods *PodSelector
	Logger          *slog.Logger
}

// PodSelector names pods by their namespace and labels.
type PodSelector struct {
	Namespace string
	Labels    map[string]string
}

// Backend is a runtime.Backend on a Kubernetes cluster.
type Backend struct {
	o Options
	// names caches sandboxName's answers (warmpool.go).
	names sync.Map // id -> Sandbox and pod name
	// poolTokens keeps the pools' tokens this daemon read or made
	// (warmpool.go), so a claim does not read them again.
	poolTokens sync.Map // pool object -> token
	// poolReadyIn is how long a pool's pod may run before it is ready
	// (its start command's readiness timeout and a margin), by pool
	// object (warmpool.go, WarmPoolProblem).
	poolReadyIn sync.Map
	// poolStarts says, by pool object, whether the pool's pods run a
	// start command (adopt takes it out of a claimed Sandbox).
	poolStarts sync.Map
	// poolSeeds says, by pool object, whether the pool's pods seed their
	// home volume from their image (seedhome.go).
	poolSeeds sync.Map
	// watchRefused is set once a watch was refused (follow.go).
	watchRefused atomic.Bool
	// pods follows the pods of running sandboxes for Wait (podwatch.go),
	// until ctx ends (Close).
	pods   podWatch
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a backend; it checks nothing until used (see Probe).
func New(o Options) (*Backend, error) {
	if o.Client == nil || o.Namespace == "" || o.Instance == "" || o.ImagePrefix == "" || o.Name == "" {
		return nil, errors.New("kubernetes backend: client, namespace, instance, image prefix and name are required")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{o: o}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.pods.b = b
	return b, nil
}

// Close stops the backend's background work (the pods' watch).
func (b *Backend) Close() error {
	b.cancel()
	return nil
}

// StartTimeout implements runtime.StartBounder.
func (b *Backend) StartTimeout() time.Duration { return b.o.StartTimeout }

var _ runtime.StartBounder = (*Backend)(nil)

// Name implements runtime.Backend.
func (b *Backend) Name() string { return b.o.Name }

// objectName is the name of a sandbox's Sandbox, pod and Secret.
func objectName(id string) string { return "paddock-" + id }

func (b *Backend) key(id string) types.NamespacedName {
	return b.nsName(objectName(id))
}

func (b *Backend) nsName(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: b.o.Namespace, Name: name}
}

func (b *Backend) labels(id string) map[string]string {
	return map[string]string{LabelSandbox: id, LabelInstance: b.o.Instance, LabelRuntime: b.o.Name}
}

// Start creates the sandbox's Secret and Sandbox, or sets a suspended one
// running again, and waits until its pod has an address.
func (b *Backend) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if spec.NetNSPath != "" || spec.ResolvConf != "" || (spec.TrustBundle != "" && spec.Egress == nil) {
		return runtime.Info{}, fmt.Errorf("sandbox %s: host networking settings do not apply on the kubernetes backend: %w", spec.ID, errdefs.ErrFailedPrecondition)
	}
	if spec.Image.Name == "" || spec.Image.Digest == "" {
		return runtime.Info{}, fmt.Errorf("sandbox %s: the kubernetes backend needs the image's name and digest: %w", spec.ID, errdefs.ErrInvalidArgument)
	}
	if spec.Egress != nil {
		if _, err := egressData(spec); err != nil { // egress.go; checked before anything is made
			return runtime.Info{}, err
		}
		// A warm pool's pods started without the proxy's settings.
		spec.WarmPool = ""
	}
	token, fresh, err := b.ensureSecret(ctx, spec.ID)
	if err != nil {
		return runtime.Info{}, err
	}
	if spec.Egress != nil {
		if err := b.ensureEgressSecret(ctx, spec); err != nil { // egress.go
			return runtime.Info{}, err
		}
	}
	// A Secret made now says the sandbox is new: it has no claim or
	// Sandbox to read yet.
	name := objectName(spec.ID)
	var sb sandboxv1.Sandbox
	sbErr := error(apierrors.NewNotFound(sandboxv1.GroupVersion.WithResource("sandboxes").GroupResource(), name))
	if !fresh {
		if name, err = b.sandboxName(ctx, spec.ID); err != nil { // warmpool.go
			return runtime.Info{}, err
		}
		sbErr = b.o.Client.Get(ctx, b.nsName(name), &sb)
	}
	if apierrors.IsNotFound(sbErr) && spec.WarmPool != "" && name == objectName(spec.ID) {
		return b.claim(ctx, spec, token) // warmpool.go
	}
	if err := b.ensureNetworkPolicy(ctx, spec.ID, spec.Egress); err != nil { // netpol.go
		return runtime.Info{}, err
	}
	switch err := sbErr; {
	case apierrors.IsNotFound(err):
		sb = b.sandboxObject(spec)
		if layers, _ := b.layersToWrite(spec); len(layers) > 0 {
			sb.Annotations = map[string]string{annotationRestore: "pending"} // snapshot.go
		}
		if err := b.o.Client.Create(ctx, &sb); err != nil {
			return runtime.Info{}, fmt.Errorf("sandbox %s: create Sandbox: %w", spec.ID, apiErr(err))
		}
	case err != nil:
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", spec.ID, apiErr(err))
	case sb.Spec.OperatingMode == sandboxv1.SandboxOperatingModeSuspended:
		if name != objectName(spec.ID) {
			// Taken from a warm pool: its next pod must start with the
			// sandbox's token even if the claim was cut before it said so.
			if err := b.adopt(ctx, spec.ID, name, false, false); err != nil { // warmpool.go
				return runtime.Info{}, err
			}
			if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
				return runtime.Info{}, fmt.Errorf("sandbox %s: %w", spec.ID, apiErr(err))
			}
		}
		patch := client.MergeFrom(sb.DeepCopy())
		sb.Spec.OperatingMode = sandboxv1.SandboxOperatingModeRunning
		if err := b.o.Client.Patch(ctx, &sb, patch); err != nil {
			return runtime.Info{}, fmt.Errorf("sandbox %s: resume Sandbox: %w", spec.ID, apiErr(err))
		}
	}
	ip, err := b.waitPodIP(ctx, spec.ID, name)
	if err != nil {
		return runtime.Info{}, err
	}
	info := runtime.Info{AgentAddr: net.JoinHostPort(ip, strconv.Itoa(agentPort)), AgentToken: token}
	// A sandbox restored from a snapshot gets its files on its first
	// start only (or again after a restore that failed): later starts
	// find its home newer than the snapshot.
	layers, inImage := b.layersToWrite(spec) // seedhome.go
	if sb.Annotations[annotationRestore] != "" && len(layers) > 0 {
		if err := b.restoreLayers(ctx, &sb, info, layers, inImage); err != nil { // snapshot.go
			return runtime.Info{}, err
		}
	}
	if err := b.seeded(ctx, spec.ID, &sb); err != nil { // seedhome.go
		return runtime.Info{}, err
	}
	b.o.Logger.Info("sandbox started", "sandbox", spec.ID, "pod_ip", ip)
	return info, nil
}

// ensureSecret returns the sandbox's token, creating its Secret with a
// fresh one if there is none; created says it did, and so that the
// sandbox is new: its Secret is the first of its objects a start makes,
// so no claim or Sandbox of it exists yet.
func (b *Backend) ensureSecret(ctx context.Context, id string) (token string, created bool, err error) {
	t, created, err := b.ensureToken(ctx, metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace, Labels: b.labels(id)}) // warmpool.go
	if err != nil {
		return "", false, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return t, created, nil
}

// sandboxObject is the Sandbox for spec: one pod (podSpec) that finds its
// agent's token in the sandbox's Secret.
func (b *Backend) sandboxObject(spec runtime.Spec) sandboxv1.Sandbox {
	pod, claims := b.podSpec(spec, secretEnv(wire.EnvToken, objectName(spec.ID)))
	pod.Hostname = spec.ID
	withEgress(&pod, spec) // egress.go
	return sandboxv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(spec.ID), Namespace: b.o.Namespace, Labels: b.labels(spec.ID)},
		Spec: sandboxv1.SandboxSpec{
			SandboxBlueprint: sandboxv1.SandboxBlueprint{
				PodTemplate: sandboxv1.PodTemplate{
					Spec:       pod,
					ObjectMeta: sandboxv1.PodMetadata{Labels: b.labels(spec.ID)},
				},
				Service:              &no,
				VolumeClaimTemplates: claims,
			},
			OperatingMode: sandboxv1.SandboxOperatingModeRunning,
		},
	}
}

// secretEnv is the variable name taken from the Secret secret's token.
func secretEnv(name, secret string) corev1.EnvVar {
	return corev1.EnvVar{
		Name: name,
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret},
			Key:                  tokenKey,
		}},
	}
}

var no = false

// podSpec is the pod for spec: one container running the agent, which
// gets token (a variable from a Secret) first in its environment; no
// service account token, no service links, the sandbox's limits as
// requests and limits alike. It returns the home volume's claim template
// with it, if the backend keeps homes on volumes.
func (b *Backend) podSpec(spec runtime.Spec, token corev1.EnvVar) (corev1.PodSpec, []sandboxv1.PersistentVolumeClaimTemplate) {
	env := []corev1.EnvVar{token}
	for _, kv := range spec.Env {
		k, v, _ := cutEnv(kv)
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	limits, requests := resourcesFor(spec.Resources)
	grace := int64(5)
	var claims []sandboxv1.PersistentVolumeClaimTemplate
	var mounts []corev1.VolumeMount
	if b.o.HomeVolume {
		claims, mounts = b.homeClaim(spec.Resources.DiskBytes)
		env = append(env, corev1.EnvVar{Name: wire.EnvOwnHome, Value: "1"})
	}
	ref := image.OCIRef(b.o.ImagePrefix, &image.Image{Name: spec.Image.Name, Digest: spec.Image.Digest}, b.o.AgentID)
	sec := &corev1.SecurityContext{
		Privileged:     &no,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	pod := corev1.PodSpec{
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		TerminationGracePeriodSeconds: &grace,
		RestartPolicy:                 corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name:            containerName,
			Image:           ref,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Env:             env,
			VolumeMounts:    mounts,
			Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: agentPort, Protocol: corev1.ProtocolTCP}},
			Resources:       corev1.ResourceRequirements{Requests: requests, Limits: limits},
			SecurityContext: sec,
		}},
	}
	if b.seedsHome(spec) { // seedhome.go
		pod.InitContainers = []corev1.Container{seedContainer(ref, pod.Containers[0].Resources, sec)}
	}
	if b.o.ImagePullSecret != "" {
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: b.o.ImagePullSecret}}
	}
	if spec.Start != nil {
		// The agent runs the template's start command at boot; the pod is
		// ready, and the cluster's pool counts it, once its check passed.
		// Second, after the token: adopt removes it from a claimed
		// Sandbox's later pods by its place (warmpool.go).
		raw, _ := json.Marshal(spec.Start)
		ctr := &pod.Containers[0]
		ctr.Env = slices.Insert(ctr.Env, 1, corev1.EnvVar{Name: wire.EnvStart, Value: string(raw)})
		ctr.ReadinessProbe = startedProbe()
	}
	if b.o.RuntimeClass != "" {
		rc := b.o.RuntimeClass
		pod.RuntimeClassName = &rc
	}
	return pod, claims
}

// startedProbe asks the agent, each second, whether it answers and its
// start command (if any) is ready: the kubelet's readiness probe of a pod
// that is Ready only then.
func startedProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: wire.StartedPath, Port: intstr.FromInt32(agentPort),
		}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		FailureThreshold: 1,
	}
}

// resourcesFor makes the sandbox's limits the pod's limits, and requests
// a share of them, as one host overcommits idle sandboxes: a tenth of the
// CPU (at least 10m), a quarter of the memory and a sixteenth of the
// ephemeral storage (a limit without a request would request it all).
func resourcesFor(r runtime.Resources) (limits, requests corev1.ResourceList) {
	limits, requests = corev1.ResourceList{}, corev1.ResourceList{}
	if r.CPUMillis > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI)
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(r.CPUMillis/10, 10), resource.DecimalSI)
	}
	if r.MemoryBytes > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
		requests[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes/4, resource.BinarySI)
	}
	if r.DiskBytes > 0 {
		limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.DiskBytes, resource.BinarySI)
		requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.DiskBytes/16, resource.BinarySI)
	}
	return limits, requests
}

// homeVolume is the claim template's name; agent-sandbox names the claim
// "home-<Sandbox name>" and adds the pod volume "home".
const homeVolume = "home"

// homePath is where the home volume is mounted: the default user's home in
// Paddock's images.
const homePath = "/home/user"

// homeClaim is the home directory's claim template, as large as the
// sandbox's disk, and its mount.
func (b *Backend) homeClaim(diskBytes int64) ([]sandboxv1.PersistentVolumeClaimTemplate, []corev1.VolumeMount) {
	if diskBytes <= 0 {
		diskBytes = 1 << 30
	}
	spec := corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceStorage: *resource.NewQuantity(diskBytes, resource.BinarySI),
		}},
	}
	if b.o.HomeStorageClass != "" {
		sc := b.o.HomeStorageClass
		spec.StorageClassName = &sc
	}
	tmpl := sandboxv1.PersistentVolumeClaimTemplate{Spec: spec}
	tmpl.Name = homeVolume
	return []sandboxv1.PersistentVolumeClaimTemplate{tmpl}, []corev1.VolumeMount{{Name: homeVolume, MountPath: homePath}}
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// waitPodIP follows the sandbox's pod (follow.go) until it runs with an
// address, fails, or StartTimeout passes.
func (b *Backend) waitPodIP(ctx context.Context, id, name string) (string, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.o.StartTimeout)
	defer cancel()
	var last, ip string
	var ended error
	var pull pullWatch
	err := b.follow(ctx, name, &corev1.Pod{}, &corev1.PodList{}, func(o client.Object, err error) (bool, error) {
		switch {
		case err == nil:
			pod := o.(*corev1.Pod)
			if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
				ended = fmt.Errorf("sandbox %s: its pod ended (%s): %s: %w", id, pod.Status.Phase, podReason(pod), errdefs.ErrUnavailable)
				return true, ended
			}
			if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
				ip = pod.Status.PodIP
				return true, nil
			}
			last = podReason(pod)
			if pull.failing(last, time.Now()) {
				ended = fmt.Errorf("sandbox %s: its pod cannot pull its image (%s)%s: %w", id, last, hintSuffix(pull.hint), errdefs.ErrUnavailable)
				return true, ended
			}
		case !apierrors.IsNotFound(err):
			last = err.Error()
		}
		return false, nil
	})
	switch {
	case ended != nil:
		return "", ended
	case err == nil:
		return ip, nil
	}
	if last == "" {
		last = "no pod yet" + b.sandboxSays(id, name)
	}
	if imageMissing(last) {
		hint, _ := pullFailsForGood(last)
		if hint == "" {
			hint = exportHint
		}
		last += "; " + hint
	}
	return "", fmt.Errorf("sandbox %s: pod not running after %s (%s): %w", id, time.Since(start).Round(time.Second), last, errdefs.ErrUnavailable)
}

// sandboxSays is what the Sandbox's conditions say that is not true
// (why agent-sandbox made no pod), or "".
func (b *Backend) sandboxSays(id, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var sb sandboxv1.Sandbox
	if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
		return ""
	}
	var out []string
	for _, c := range sb.Status.Conditions {
		if c.Status != metav1.ConditionTrue && c.Message != "" {
			out = append(out, c.Type+": "+c.Message)
		}
	}
	if len(out) == 0 {
		return ""
	}
	b.o.Logger.Warn("sandbox without a pod", "sandbox", id, "conditions", out)
	return "; the Sandbox says " + strings.Join(out, "; ")
}

// podReason says in a few words why a pod is where it is.
func podReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.InitContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return w.Reason + ": " + w.Message
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("%s: %s (exit %d): %s", cs.Name, t.Reason, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return w.Reason + ": " + w.Message
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			return c.Reason + ": " + c.Message
		}
	}
	if pod.Status.Reason != "" {
		return pod.Status.Reason + ": " + pod.Status.Message
	}
	return string(pod.Status.Phase)
}

// Status implements runtime.Backend.
func (b *Backend) Status(ctx context.Context, id string) (runtime.Status, error) {
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return "", err
	}
	var sb sandboxv1.Sandbox
	if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("sandbox %s: %w", id, runtime.ErrNotFound)
		}
		return "", fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	if sb.Spec.OperatingMode == sandboxv1.SandboxOperatingModeSuspended {
		return runtime.StatusStopped, nil
	}
	var pod corev1.Pod
	if err := b.o.Client.Get(ctx, b.nsName(name), &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return runtime.StatusStopped, nil
		}
		return "", fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return runtime.StatusStopped, nil
	}
	return runtime.StatusRunning, nil
}

// Info implements runtime.Backend.
func (b *Backend) Info(ctx context.Context, id string) (runtime.Info, error) {
	var sec corev1.Secret
	if err := b.o.Client.Get(ctx, b.key(id), &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return runtime.Info{}, fmt.Errorf("sandbox %s: %w", id, runtime.ErrNotFound)
		}
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return runtime.Info{}, err
	}
	var pod corev1.Pod
	if err := b.o.Client.Get(ctx, b.nsName(name), &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return runtime.Info{}, fmt.Errorf("sandbox %s has no pod: %w", id, runtime.ErrNotFound)
		}
		return runtime.Info{}, fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	if pod.Status.PodIP == "" {
		return runtime.Info{}, fmt.Errorf("sandbox %s: its pod has no address (%s): %w", id, podReason(&pod), errdefs.ErrUnavailable)
	}
	return runtime.Info{AgentAddr: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(agentPort)), AgentToken: string(sec.Data[tokenKey])}, nil
}

// UsageFromAgent implements runtime.AgentUsageReporter: a pod's cgroup
// is on its node, which the daemon does not reach; the agent reads it
// from inside the pod.
func (b *Backend) UsageFromAgent() {}

// Signal implements runtime.Backend: a pod's init cannot be signalled
// through the API.
func (b *Backend) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	return fmt.Errorf("signalling a sandbox's init is not possible on the kubernetes backend: %w", errdefs.ErrFailedPrecondition)
}

// Stop suspends the Sandbox: the controller deletes the pod and keeps the
// Sandbox and its volumes.
func (b *Backend) Stop(ctx context.Context, id string) error {
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return err
	}
	var sb sandboxv1.Sandbox
	if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	if sb.Spec.OperatingMode != sandboxv1.SandboxOperatingModeSuspended {
		patch := client.MergeFrom(sb.DeepCopy())
		sb.Spec.OperatingMode = sandboxv1.SandboxOperatingModeSuspended
		if err := b.o.Client.Patch(ctx, &sb, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("sandbox %s: suspend: %w", id, apiErr(err))
		}
	}
	return b.waitPodGone(ctx, id, name, false) // lostpod.go
}

// Destroy deletes the Sandbox (its pod and volumes go with it), and its
// SandboxClaim if it came from a warm pool, and the Secret, and waits
// until the pod is gone.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return err
	}
	fg := client.PropagationPolicy(metav1.DeletePropagationForeground)
	if err := b.deleteClaim(ctx, id); err != nil { // warmpool.go
		return err
	}
	sb := sandboxv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.o.Namespace}}
	if err := b.o.Client.Delete(ctx, &sb, fg); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: delete Sandbox: %w", id, apiErr(err))
	}
	if err := b.waitPodGone(ctx, id, name, true); err != nil { // lostpod.go
		return err
	}
	if err := b.waitGone(ctx, id, homeVolume+"-"+name, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}); err != nil {
		return err
	}
	// Foreground deletion keeps the Sandbox (and a claim) until the
	// garbage collector has removed what they own: a delete that returns
	// leaves nothing behind.
	if err := b.waitGone(ctx, id, name, &sandboxv1.Sandbox{}, &sandboxv1.SandboxList{}); err != nil {
		return err
	}
	if err := b.waitGone(ctx, id, objectName(id), &extv1.SandboxClaim{}, &extv1.SandboxClaimList{}); err != nil {
		return err
	}
	// The Secret and the NetworkPolicy go once the pod is gone: a pod
	// never runs without its policy.
	sec := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: objectName(id), Namespace: b.o.Namespace}}
	if err := b.o.Client.Delete(ctx, &sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: delete Secret: %w", id, apiErr(err))
	}
	if err := b.deleteEgressSecret(ctx, id); err != nil { // egress.go
		return err
	}
	if err := b.deleteNetworkPolicy(ctx, id); err != nil {
		return err
	}
	b.names.Delete(id)
	return nil
}

// waitGone waits up to a minute until the object name of obj's kind (list
// being its list kind) no longer exists, watching it (follow.go).
func (b *Backend) waitGone(ctx context.Context, id, name string, obj client.Object, list client.ObjectList) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := b.follow(ctx, name, obj, list, func(_ client.Object, err error) (bool, error) {
		return gone(err), nil // warmpool.go
	})
	if err != nil {
		return fmt.Errorf("sandbox %s: %T %s is still there after a minute: %w", id, obj, name, errdefs.ErrUnavailable)
	}
	return nil
}

// List implements runtime.Backend: the sandboxes of this daemon's
// instance with any object left (a Sandbox, or a Secret or NetworkPolicy
// a crash left without one), so reconciliation finds every orphan.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	sel := []client.ListOption{client.InNamespace(b.o.Namespace), client.MatchingLabels{LabelInstance: b.o.Instance, LabelRuntime: b.o.Name}}
	seen := map[string]bool{}
	var ids []string
	add := func(labels map[string]string) {
		if id := labels[LabelSandbox]; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var sbs sandboxv1.SandboxList
	if err := b.o.Client.List(ctx, &sbs, sel...); err != nil {
		return nil, fmt.Errorf("list Sandboxes: %w", apiErr(err))
	}
	for _, o := range sbs.Items {
		add(o.Labels)
	}
	var claims extv1.SandboxClaimList
	if err := b.o.Client.List(ctx, &claims, sel...); err != nil {
		return nil, fmt.Errorf("list SandboxClaims: %w", apiErr(err))
	}
	for _, o := range claims.Items {
		add(o.Labels)
	}
	var secs corev1.SecretList
	if err := b.o.Client.List(ctx, &secs, sel...); err != nil {
		return nil, fmt.Errorf("list Secrets: %w", apiErr(err))
	}
	for _, o := range secs.Items {
		add(o.Labels)
	}
	var nps networkingv1.NetworkPolicyList
	if err := b.o.Client.List(ctx, &nps, sel...); err != nil {
		return nil, fmt.Errorf("list NetworkPolicies: %w", apiErr(err))
	}
	for _, o := range nps.Items {
		add(o.Labels)
	}
	return ids, nil
}

// apiErr maps the API server's answers to Paddock's error vocabulary.
func apiErr(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrConflict)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("the cluster refused: %v: %w", err, errdefs.ErrFailedPrecondition)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("the cluster found the object invalid: %v: %w", err, errdefs.ErrInvalidArgument)
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrResourceExhausted)
	case isTimeout(err):
		return fmt.Errorf("the cluster's API server did not answer in time (down, overloaded or cut off): %v: %w", err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("the cluster's API: %v: %w", err, errdefs.ErrUnavailable)
}

// isTimeout says whether a call to the API server ended for want of an
// answer: the client's deadline, a network timeout, or the server's own.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

var _ runtime.Watcher = (*Backend)(nil)
