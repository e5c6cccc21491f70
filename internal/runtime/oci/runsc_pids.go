package oci

import (
	"context"
	"fmt"
	"strconv"
)

// limitGVisorTasks applies a gVisor sandbox's pids limit inside gVisor.
//
// The host's pids cgroup holds the sentry and gofer, not the sandbox's
// processes (see runscPidsLimit), and runsc does not carry the OCI pids
// limit into the sentry's own cgroups. The sentry does keep a cgroup per
// container, /<id>, and charges its pids controller on fork and clone
// (EAGAIN past pids.max, as runc's host cgroup gives), but only with the
// cgroup v2 tree: with v1's one hierarchy per controller, runsc of 2026-09
// charges whichever of the task's cgroups it meets first, so the limit
// holds only by chance (checked: ten forks under pids.max 5). Hence
// --in-sandbox-cgroup=v2 (globalArgs) and, once the container has started
// (the cgroup is made then) and before the agent reports ready, `runsc
// write-control` from outside. Inside, the file is read-only (the spec
// mounts /sys/fs/cgroup ro; checked: root gets EROFS), so the sandbox
// cannot raise it.
//
// Debian's runsc (20221219) has no --in-sandbox-cgroup; there the host
// limit is all there is and a fork bomb ends the sandbox (docs/admission.md).
// cgroupID names the container's cgroup inside gVisor: its id, or for a
// container restored from a checkpoint, the id it was taken under.
func (r *Runtime) limitGVisorTasks(ctx context.Context, id, cgroupID string, pids int64) error {
	if r.kind != KindRunsc || !r.pidsInside || pids <= 0 {
		return nil
	}
	out, err := r.run(ctx, runOpts{}, "write-control", id, "pids", "/"+cgroupID, "pids.max", strconv.FormatInt(pids, 10))
	if err != nil {
		return fmt.Errorf("oci: set the sandbox's pids limit in gVisor: %w: %s", err, firstLine(out))
	}
	return nil
}
