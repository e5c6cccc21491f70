package kube

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// TestSeedHomePod: a pod of a template's stacked image (ImageLayers) with
// a home volume first runs the image's agent to copy the image's home
// into the volume, mounted beside it, with the agent container's limits;
// the agent is then given only the layers above the image's. Without a
// home volume, or for a plain image, there is no seed container and the
// layers are written as before. seeded takes the seed container out of
// the Sandbox once its pod ran, and a later call changes nothing.
func TestSeedHomePod(t *testing.T) {
	ctx := context.Background()
	b, cl := fakeBackend(t, "runc", "pd-a")
	layers := []string{"/l/1", "/l/2", "/l/3"}
	spec := runtime.Spec{ID: "s7", Image: busybox, ImageLayers: 2, SnapshotLayers: layers, Resources: runtime.Resources{CPUMillis: 500, MemoryBytes: 256 << 20}}

	if pod, _ := b.podSpec(spec, corev1.EnvVar{Name: "T"}); len(pod.InitContainers) != 0 {
		t.Errorf("a pod without a home volume seeds it: %+v", pod.InitContainers)
	}
	if got, n := b.layersToWrite(spec); !slices.Equal(got, layers) || n != 2 {
		t.Errorf("without a home volume the agent writes %v (%d in the image); want all", got, n)
	}

	b.o.HomeVolume = true
	sb := b.sandboxObject(spec)
	pod := sb.Spec.PodTemplate.Spec
	if len(pod.InitContainers) != 1 {
		t.Fatalf("init containers %+v; want the seed container", pod.InitContainers)
	}
	seed, agent := pod.InitContainers[0], pod.Containers[0]
	if seed.Image != agent.Image || !slices.Equal(seed.Command, []string{"/.paddock/bin/paddock", "agent", "--seed-home", "/home/user:/.paddock/home-volume"}) {
		t.Errorf("seed container runs %s %v", seed.Image, seed.Command)
	}
	if len(seed.VolumeMounts) != 1 || seed.VolumeMounts[0].Name != homeVolume || seed.VolumeMounts[0].MountPath != seedMount {
		t.Errorf("seed container mounts %+v", seed.VolumeMounts)
	}
	if !seed.Resources.Limits.Cpu().Equal(*agent.Resources.Limits.Cpu()) || !seed.Resources.Limits.Memory().Equal(*agent.Resources.Limits.Memory()) ||
		seed.SecurityContext == nil || *seed.SecurityContext.Privileged {
		t.Errorf("seed container resources %+v, security %+v", seed.Resources, seed.SecurityContext)
	}
	if got, n := b.layersToWrite(spec); !slices.Equal(got, layers[2:]) || n != 0 {
		t.Errorf("with the home seeded the agent writes %v (%d in the image); want the layer above the image's", got, n)
	}
	plain := spec
	plain.ImageLayers = 0
	if pod, _ := b.podSpec(plain, corev1.EnvVar{Name: "T"}); len(pod.InitContainers) != 0 {
		t.Errorf("a plain image's pod seeds its home: %+v", pod.InitContainers)
	}

	if err := cl.Create(ctx, &sb); err != nil {
		t.Fatal(err)
	}
	if err := b.seeded(ctx, spec.ID, &sb); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, b.key(spec.ID), &sb); err != nil {
		t.Fatal(err)
	}
	if len(sb.Spec.PodTemplate.Spec.InitContainers) != 0 {
		t.Errorf("the seed container stayed in the Sandbox: %+v", sb.Spec.PodTemplate.Spec.InitContainers)
	}
	rv := sb.ResourceVersion
	if err := b.seeded(ctx, spec.ID, &sb); err != nil || sb.ResourceVersion != rv {
		t.Errorf("a second seeded: %v, resource version %s -> %s", err, rv, sb.ResourceVersion)
	}
}

// TestPodReasonInitContainer: a pod whose seed container failed says so,
// with the container's message; one still initialising says nothing of
// its init containers.
func TestPodReasonInitContainer(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: seedName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 1, Message: "paddock-agent: seed home: no space left on device\n"}}}}}}
	if got, want := podReason(pod), "seed-home: Error (exit 1): paddock-agent: seed home: no space left on device"; got != want {
		t.Errorf("podReason = %q, want %q", got, want)
	}
	pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	if got := podReason(pod); got != "ContainerCreating: " {
		t.Errorf("podReason after the seed = %q", got)
	}
}
