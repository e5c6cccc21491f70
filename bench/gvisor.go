package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/config"
)

// ItemGVisor compares gVisor builds and platforms on raw runsc: Paddock's
// pinned build on systrap and on ptrace, and Debian's runsc (ptrace, the
// only platform it has without KVM), in the same run.
const ItemGVisor = "gvisor"

// gvisorVariant is one runsc build and platform.
type gvisorVariant struct {
	name string
	rt   Runc
}

// gvisorVariants are the builds and platforms to compare; one that is not
// installed is reported as such.
func (s *Suite) gvisorVariants() ([]gvisorVariant, []Series) {
	pinned := config.RunscFromEnv(os.Getenv)
	flags := func(platform string) []string {
		// What Paddock passes that matters for speed; the network is none
		// so the bundle needs no namespace prepared.
		return []string{"--platform=" + platform, "--network=none", "--overlay2=none"}
	}
	all := []gvisorVariant{
		{"pinned runsc, systrap", Runc{Binary: pinned, Flags: flags("systrap")}},
		{"pinned runsc, ptrace", Runc{Binary: pinned, Flags: flags("ptrace")}},
		{"Debian runsc, ptrace", Runc{Binary: "runsc", Flags: flags("ptrace")}},
	}
	var out []gvisorVariant
	var missing []Series
	for i, v := range all {
		p, err := exec.LookPath(v.rt.Binary)
		if err != nil {
			missing = append(missing, Series{Name: v.name, Disabled: v.rt.Binary + " is not installed"})
			continue
		}
		v.rt.Binary = p
		v.rt.Root = filepath.Join(s.o.WorkDir, "gvisor", fmt.Sprint(i))
		out = append(out, v)
	}
	if len(out) > 2 && out[0].rt.Binary == out[2].rt.Binary {
		// The pinned build is not installed: $PADDOCK_RUNSC fell back to
		// Debian's, which has no systrap.
		return out[2:], append(missing, Series{Name: all[0].name, Disabled: "the pinned runsc is not installed"})
	}
	return out, missing
}

// gvisorForkLoop starts 100 processes inside the sandbox, one after the
// other: what an agent's shell commands cost, where the platform (how
// the sentry intercepts system calls) weighs most.
const gvisorForkLoop = "i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done"

// measureGVisor times create-to-first-exec (`runsc run --detach` of a
// sleeping busybox, then `runsc exec true`), the exec round trip in a
// running container, and a loop of 100 processes inside one exec, for
// every variant.
func (s *Suite) measureGVisor(ctx context.Context) []Comparison {
	const firstID, firstTitle = "gvisor-first-exec", "gVisor create to first exec: runsc run --detach, then exec of `true` (busybox, raw runsc)"
	const execID, execTitle = "gvisor-exec", "gVisor exec round trip: runsc exec of `true` in a running busybox (raw runsc)"
	const loopID, loopTitle = "gvisor-fork-loop", "gVisor in-sandbox process loop: one runsc exec of sh running `/bin/true` 100 times (busybox, raw runsc)"
	vs, missing := s.gvisorVariants()
	defer func() {
		// runsc pins an empty network namespace under each root
		// (internal/runtime/oci/runsc_netns.go); the work dir must not
		// stay mounted.
		for _, v := range vs {
			unpinRunscNetNS(v.rt.Root)
		}
	}()
	b, err := s.bundle(ctx, "busybox", "/bin/sleep", "3600")
	if err != nil {
		var names []string
		for _, v := range vs {
			names = append(names, v.name)
		}
		return []Comparison{failedComparison(firstID, firstTitle, err, names...), failedComparison(execID, execTitle, err, names...)}
	}
	var first, exec1, loop []Variant
	for _, v := range vs {
		if err := os.MkdirAll(v.rt.Root, 0o700); err != nil {
			missing = append(missing, Series{Name: v.name, Disabled: err.Error()})
			continue
		}
		first = append(first, Variant{Name: v.name, Run: func(ctx context.Context) (time.Duration, error) {
			id := s.id("gvisor")
			defer func() { _ = v.rt.Delete(context.WithoutCancel(ctx), id) }()
			return Timed(func() error {
				if err := v.rt.RunDetached(ctx, b, id); err != nil {
					return err
				}
				return v.rt.Exec(ctx, id, "/bin/true")
			})
		}})
		id := s.id("gvisor")
		if err := v.rt.RunDetached(ctx, b, id); err != nil {
			missing = append(missing, Series{Name: v.name + " (exec)", Disabled: err.Error()})
			continue
		}
		defer func() { _ = v.rt.Delete(context.WithoutCancel(ctx), id) }()
		exec1 = append(exec1, Variant{Name: v.name, Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return v.rt.Exec(ctx, id, "/bin/true") })
		}})
		loop = append(loop, Variant{Name: v.name, Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return v.rt.Exec(ctx, id, "/bin/sh", "-c", gvisorForkLoop) })
		}})
	}
	note := "Raw runsc on the busybox layer (read-only root, --network=none, --overlay2=none), so the figures are gVisor's own, without Paddock. " +
		"The pinned runsc is the build Paddock makes (internal/config/runsc.version); Debian's is 0.0~20221219, which has no systrap platform."
	return []Comparison{
		NewComparison(firstID, firstTitle, note, append(s.interleaveN(ctx, ItemGVisor, first), missing...)),
		NewComparison(execID, execTitle, note, append(s.interleave(ctx, exec1), missing...)),
		NewComparison(loopID, loopTitle, note, append(s.interleaveN(ctx, ItemGVisor, loop), missing...)),
	}
}

// unpinRunscNetNS unmounts what runsc pinned at <root>/null-netns.
func unpinRunscNetNS(root string) {
	p := filepath.Join(root, "null-netns")
	for i := 0; i < 64 && unix.Unmount(p, unix.MNT_DETACH) == nil; i++ {
	}
}
