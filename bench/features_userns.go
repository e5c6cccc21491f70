package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/oci"
)

// ItemUserns measures what a user namespace adds to a runc sandbox's start
// and stop: Paddock's runc backend with user namespaces (a range claimed,
// the image's layer and the writable disk mounted idmapped, the overlay on
// them) against the same backend with them off, and raw `runc run -d` plus
// `runc delete` of the same layer as the floor. The backends are driven
// directly, in this process, so the figure is the runtime's alone (no API,
// no agent readiness).
const ItemUserns = "userns"

func (s *Suite) measureUserns(ctx context.Context) Comparison {
	const id = "userns-start-stop"
	title := "runc sandbox start + stop (busybox): with user namespaces vs without vs raw runc"
	names := []string{"start + stop, user namespace", "start + stop, no user namespace", "runc run -d + runc delete"}
	// A state root every directory above which a sandbox's root may pass.
	dir, err := os.MkdirTemp("/tmp", "pdu")
	if err == nil {
		defer os.RemoveAll(dir)
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	var backends [2]*oci.Runtime
	for i, setting := range []string{oci.UsernsAuto, oci.UsernsOff} {
		r, err := oci.New(oci.Options{Runtime: oci.KindRunc, Root: filepath.Join(dir, fmt.Sprint(i)), CgroupParent: "paddock-bench-" + s.label, UserNamespaces: setting})
		if err != nil {
			return failedComparison(id, title, err, names...)
		}
		backends[i] = r
	}
	if on, why := backends[0].UserNamespaces(); !on {
		return failedComparison(id, title, errors.New("user namespaces are off on this host: "+why), names...)
	}
	b, err := s.bundle(ctx, "busybox", "sleep", "3600")
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	startStop := func(r *oci.Runtime) func(ctx context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			sid := fmt.Sprintf("pu%d%d", os.Getpid()%10000, s.seq.Add(1))
			spec := runtime.Spec{
				ID: sid, Layers: []string{s.images["busybox"]}, AgentBinary: s.o.Paddock,
				Resources: runtime.Resources{CPUMillis: 1000, MemoryBytes: 256 << 20, DiskBytes: 256 << 20, Pids: 256},
			}
			d, err := Timed(func() error {
				if _, err := r.Start(ctx, spec); err != nil {
					return err
				}
				return r.Stop(ctx, sid)
			})
			if derr := r.Destroy(context.WithoutCancel(ctx), sid); derr != nil && err == nil {
				err = derr
			}
			return d, err
		}
	}
	series := s.interleaveN(ctx, ItemUserns, []Variant{
		{Name: names[0], Run: startStop(backends[0])},
		{Name: names[1], Run: startStop(backends[1])},
		{Name: names[2], Run: func(ctx context.Context) (time.Duration, error) {
			cid := s.id("userns")
			d, err := Timed(func() error {
				if err := s.runc.RunDetached(ctx, b, cid); err != nil {
					return err
				}
				return s.runc.Delete(ctx, cid)
			})
			return d, err
		}},
	})
	return NewComparison(id, title, "Paddock's figure includes what raw runc does not do: a fresh ext4 disk (from the formatted-disk pool when one is ready), its loop mount, the overlay, the agent as init, and unmounting all of it. The first two rows differ only in the user namespace.", series)
}
