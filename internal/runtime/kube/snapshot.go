package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentclient "github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// agentUser is the user the backend's own requests to a sandbox's agent
// run as: root, so a tar keeps every file's owner both ways.
const agentUser = "root"

// SnapshotLayer implements runtime.LayerSnapshotter: it asks the running
// sandbox's agent for a tar of the home directory and extracts it into
// dst as an overlay-format layer (homeLayer). The sandbox keeps running
// during the copy (runtime.LiveLayerSnapshotter). A stopped sandbox has
// no agent to ask: the caller is told to start it first.
func (b *Backend) SnapshotLayer(ctx context.Context, id, dst string) error {
	st, err := b.Status(ctx, id)
	if err != nil {
		return err
	}
	if st != runtime.StatusRunning {
		return fmt.Errorf("sandbox %s is stopped: on the kubernetes backend a snapshot is copied through the running sandbox's agent; start it first (paddock start %s): %w", id, id, errdefs.ErrFailedPrecondition)
	}
	lim, err := b.snapshotLimits(ctx, id)
	if err != nil {
		return err
	}
	info, err := b.Info(ctx, id)
	if err != nil {
		return err
	}
	ag := agentclient.NewTCP(info.AgentAddr, info.AgentToken)
	defer ag.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ag.TarOut(ctx, homePath, agentUser, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	err = homeLayer(ctx, pr, dst, lim)
	pr.CloseWithError(errLayerDone) // the agent's stream stops if the layer did first
	terr := <-done
	if terr != nil && !errors.Is(terr, errLayerDone) && (err == nil || errors.Is(err, errdefs.ErrUnavailable)) {
		return fmt.Errorf("sandbox %s: copy %s: %w", id, homePath, terr)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: snapshot of %s: %w", id, homePath, err)
	}
	b.o.Logger.Info("home directory copied for a snapshot", "sandbox", id, "max_bytes", lim.MaxBytes)
	return nil
}

// SnapshotsLive implements runtime.LiveLayerSnapshotter: a pod cannot be
// frozen through the cluster's API, so the copy is taken while the
// sandbox runs.
func (b *Backend) SnapshotsLive() {}

// snapshotLimits bounds a snapshot of id's home directory: no more bytes
// than its claim holds (or its container's ephemeral storage, without a
// home volume), no more entries than maxSnapshotEntries.
func (b *Backend) snapshotLimits(ctx context.Context, id string) (snapshot.Limits, error) {
	lim := snapshot.Limits{MaxEntries: maxSnapshotEntries}
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return lim, err
	}
	var sb sandboxv1.Sandbox
	if err := b.o.Client.Get(ctx, b.nsName(name), &sb); err != nil {
		if apierrors.IsNotFound(err) {
			return lim, fmt.Errorf("sandbox %s: %w", id, runtime.ErrNotFound)
		}
		return lim, fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	for _, c := range sb.Spec.VolumeClaimTemplates {
		if c.Name == homeVolume {
			if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok && q.Value() > 0 {
				lim.MaxBytes = q.Value()
				return lim, nil
			}
		}
	}
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && q.Value() > 0 {
			lim.MaxBytes = q.Value()
		}
	}
	return lim, nil
}

// annotationRestore, on a Sandbox, says its snapshot layers are still to
// be written into its home directory: set when the Sandbox is created
// from a snapshot, removed once the layers are in. A start after a stop
// finds it gone and leaves the home (newer than the snapshot) alone; a
// start after a failed restore finds it and restores again.
const annotationRestore = "paddock.dev/restore"

// restoreLayers writes layers (host directories in overlay format, lowest
// first) into the sandbox's home directory through its agent, then marks
// the Sandbox restored. Per layer, its deletions (whiteouts, opaque
// directories) go first, then its files, so each layer covers those below
// it as overlayfs would. The lowest inImage of them are in the pod's
// image (a template's build layers): their home part is written too,
// since the home volume hides the image's, and their files outside the
// home are not reported as left out.
func (b *Backend) restoreLayers(ctx context.Context, sb *sandboxv1.Sandbox, info runtime.Info, layers []string, inImage int) error {
	id := sb.Labels[LabelSandbox]
	ag := agentclient.NewTCP(info.AgentAddr, info.AgentToken)
	defer ag.Close()
	rctx, cancel := context.WithTimeout(ctx, b.o.StartTimeout)
	defer cancel()
	if err := ag.WaitReady(rctx); err != nil {
		return fmt.Errorf("sandbox %s: agent did not answer to restore its snapshot: %v: %w", id, err, errdefs.ErrUnavailable)
	}
	splits := make([]homeSplit, len(layers))
	for i, dir := range layers {
		split, err := scanLayer(ctx, dir)
		if err != nil {
			return fmt.Errorf("sandbox %s: snapshot layer %d: %w", id, i+1, err)
		}
		splits[i] = split
	}
	first := firstHomeLayer(splits)
	outside := 0
	for i := first; i < len(layers); i++ {
		if i >= inImage {
			outside += splits[i].Outside
		}
		for _, d := range splits[i].Deletions {
			if err := applyDeletion(ctx, ag, d); err != nil {
				return fmt.Errorf("sandbox %s: snapshot layer %d: %w", id, i+1, err)
			}
		}
		if err := uploadLayer(ctx, ag, layers[i]); err != nil {
			return fmt.Errorf("sandbox %s: snapshot layer %d: %w", id, i+1, err)
		}
	}
	if outside > 0 {
		b.o.Logger.Warn("snapshot files outside the home directory left out: on the kubernetes backend a sandbox keeps only its home directory",
			"sandbox", id, "entries", outside)
	}
	patch := client.MergeFrom(sb.DeepCopy())
	delete(sb.Annotations, annotationRestore)
	if err := b.o.Client.Patch(ctx, sb, patch); err != nil {
		return fmt.Errorf("sandbox %s: mark restored: %w", id, apiErr(err))
	}
	b.o.Logger.Info("snapshot restored into the home directory", "sandbox", id, "layers", len(layers), "written", len(layers)-first)
	return nil
}

// scanLayer reads a layer's deletions.
func scanLayer(ctx context.Context, dir string) (homeSplit, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(snapshot.WriteTree(ctx, dir, pw, snapshot.TreeOptions{})) }()
	split, err := splitHomeLayer(pr, nil)
	pr.CloseWithError(errLayerDone)
	return split, err
}

// uploadLayer sends a layer's files under the home directory to the
// agent, as root, so they keep their owners.
func uploadLayer(ctx context.Context, ag *agentclient.Client, dir string) error {
	tree, treeW := io.Pipe()
	go func() { treeW.CloseWithError(snapshot.WriteTree(ctx, dir, treeW, snapshot.TreeOptions{})) }()
	body, bodyW := io.Pipe()
	split := make(chan error, 1)
	go func() {
		_, err := splitHomeLayer(tree, bodyW)
		tree.CloseWithError(errLayerDone)
		bodyW.CloseWithError(err)
		split <- err
	}()
	err := ag.TarIn(ctx, homePath, agentUser, body)
	body.CloseWithError(errLayerDone)
	// The layer's own failure says more than the upload it cut short.
	if serr := <-split; serr != nil && !errors.Is(serr, errLayerDone) {
		return serr
	}
	return err
}

// applyDeletion removes what a whiteout or an opaque directory hides.
func applyDeletion(ctx context.Context, ag *agentclient.Client, d deletion) error {
	if !d.Contents {
		if err := ag.Remove(ctx, d.Path, agentUser); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("remove %s: %w", d.Path, err)
		}
		return nil
	}
	entries, err := ag.ListDir(ctx, d.Path, agentUser)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", d.Path, err)
	}
	for _, e := range entries {
		n := e.GetName()
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return fmt.Errorf("list %s: the agent named an entry %q: %w", d.Path, truncate(n, 80), errdefs.ErrUnavailable)
		}
		p := d.Path + "/" + n
		if err := ag.Remove(ctx, p, agentUser); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

var (
	_ runtime.LayerSnapshotter     = (*Backend)(nil)
	_ runtime.LiveLayerSnapshotter = (*Backend)(nil)
	_ runtime.RootLayerSnapshotter = (*Backend)(nil)
)
