package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// A pod's home volume is mounted over the image's home directory and
// hides what the image holds there: the home files of a template's build
// layers, which its stacked image carries (runtime.Spec.ImageLayers). A
// pod of such an image first runs the seed container, the image's own
// agent with the volume mounted beside the home, which copies the image's
// home into the volume while the volume is fresh (agent.SeedHome). The
// agent's container then starts with the files in place, before its start
// command runs: so a warm pool's pods of such a template are ready as a
// cold create's sandbox is, and a cold create need not write those files
// through the agent. Once a pod of the Sandbox ran, the seed container is
// taken out of its pod template (seeded, adopt): the home is the
// sandbox's, and later pods start without it.

// seedName is the seed container's name; seedMount is where it mounts the
// home volume.
const (
	seedName  = "seed-home"
	seedMount = "/.paddock/home-volume"
)

// seedsHome says whether spec's pod seeds its home volume from its image.
func (b *Backend) seedsHome(spec runtime.Spec) bool {
	return b.o.HomeVolume && spec.ImageLayers > 0
}

// seedContainer is the seed container of a pod of the image ref, with
// the agent container's resources and security context.
func seedContainer(ref string, res corev1.ResourceRequirements, sec *corev1.SecurityContext) corev1.Container {
	return corev1.Container{
		Name:            seedName,
		Image:           ref,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{image.AgentPathInImage, "agent", "--seed-home", homePath + ":" + seedMount},
		Resources:       res,
		SecurityContext: sec,
		VolumeMounts:    []corev1.VolumeMount{{Name: homeVolume, MountPath: seedMount}},
		// Its error, if it fails, says why the pod did not start.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// layersToWrite is which of spec's snapshot layers the agent is given
// after the pod starts, and how many of the lowest of those the image
// holds: all but the image's when the pod seeds its home.
func (b *Backend) layersToWrite(spec runtime.Spec) ([]string, int) {
	if b.seedsHome(spec) && spec.ImageLayers <= len(spec.SnapshotLayers) {
		return spec.SnapshotLayers[spec.ImageLayers:], 0
	}
	return spec.SnapshotLayers, spec.ImageLayers
}

// withoutSeed is cs without the seed container, and whether it had one.
func withoutSeed(cs []corev1.Container) ([]corev1.Container, bool) {
	out := slices.DeleteFunc(slices.Clone(cs), func(c corev1.Container) bool { return c.Name == seedName })
	return out, len(out) != len(cs)
}

// seeded takes the seed container out of sb's pod template, once a pod of
// it runs.
func (b *Backend) seeded(ctx context.Context, id string, sb *sandboxv1.Sandbox) error {
	rest, had := withoutSeed(sb.Spec.PodTemplate.Spec.InitContainers)
	if !had {
		return nil
	}
	patch := client.MergeFrom(sb.DeepCopy())
	sb.Spec.PodTemplate.Spec.InitContainers = rest
	if err := b.o.Client.Patch(ctx, sb, patch); err != nil {
		return fmt.Errorf("sandbox %s: its home is seeded: %w", id, apiErr(err))
	}
	return nil
}
