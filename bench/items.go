package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func (s *Suite) interleave(ctx context.Context, variants []Variant) []Series {
	return Interleave(ctx, InterleaveOptions{
		Iterations: s.o.Iterations, Warmup: s.o.Warmup, Timeout: 2 * time.Minute, Logger: s.log,
	}, variants)
}

// failedComparison records a comparison that could not be set up.
func failedComparison(id, title string, err error, names ...string) Comparison {
	var series []Series
	for _, n := range names {
		series = append(series, Series{Name: n, Disabled: "set-up failed: " + err.Error()})
	}
	return NewComparison(id, title, "", series)
}

// measureDo compares a whole `paddock do` (create, run, destroy) with a
// foreground `runc run` and `podman run --rm` of the same command on the
// same image layer.
func (s *Suite) measureDo(ctx context.Context, id, image string, doArgs, rootArgs []string) Comparison {
	title := fmt.Sprintf("One-shot command: paddock do --image %s -- %s", image, strings.Join(doArgs, " "))
	names := []string{"paddock do", "runc run", "podman run", "SDK create+exec+delete"}
	b, err := s.bundle(ctx, image, rootArgs...)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	do := append([]string{"do", "--image", image, "--label", runLabel + "=" + s.label, "--"}, doArgs...)
	variants := []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.paddockCLI(ctx, do...) })
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.runc.Run(ctx, b, s.id("run")) })
		}},
	}
	if _, err := exec.LookPath("podman"); err == nil {
		variants = append(variants, Variant{Name: names[2], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.podman.Run(ctx, s.images[image], rootArgs...) })
		}})
	}
	// Not a baseline but a breakdown: the same cycle without the CLI
	// process, so the report shows how much of `paddock do` is the CLI.
	variants = append(variants, Variant{Name: names[3], Run: func(ctx context.Context) (time.Duration, error) {
		return Timed(func() error { return s.sdkCycle(ctx, image, doArgs) })
	}})
	series := s.interleave(ctx, variants)
	if _, err := exec.LookPath("podman"); err != nil {
		series = append(series, Series{Name: names[2], Disabled: "podman is not installed"})
	}
	note := "Each variant creates a container on the image's read-only layer, runs the command, and removes the container. " +
		"paddock do also goes through the CLI, the API, the daemon's bookkeeping, the overlay and size-capped disk, and waits for the in-sandbox agent. " +
		"\"SDK create+exec+delete\" is not a baseline: it is the same cycle through the Go SDK without the CLI process, to show where paddock do's time goes."
	return NewComparison(id, title, note, series)
}

// sdkCycle does through the SDK what `paddock do` does: create, run one
// command, destroy.
func (s *Suite) sdkCycle(ctx context.Context, image string, args []string) error {
	sb, err := s.create(ctx, image, api.RuntimeRunc)
	if err != nil {
		return err
	}
	res, err := s.c.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: args})
	derr := s.destroy(ctx, sb.ID)
	switch {
	case err != nil:
		return err
	case res.ExitCode != 0:
		return fmt.Errorf("%s exited %d", args[0], res.ExitCode)
	}
	return derr
}

// paddockCLI runs the paddock executable against the daemon.
func (s *Suite) paddockCLI(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, s.o.Paddock, args...)
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+s.o.Socket)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("paddock %s: %v: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

// measureExec compares the API's exec round trip with `runc exec` into the
// very same container.
func (s *Suite) measureExec(ctx context.Context) Comparison {
	const id, title = "exec", "Exec round trip on a running sandbox: exec of `true` (busybox, runc)"
	names := []string{"paddock exec (SDK)", "runc exec"}
	sb, err := s.create(ctx, "busybox", api.RuntimeRunc)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.destroy(ctx, sb.ID)
	if err := s.execTrue(ctx, sb.ID); err != nil {
		return failedComparison(id, title, err, names...)
	}
	series := s.interleave(ctx, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.execTrue(ctx, sb.ID) })
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.prunc.Exec(ctx, sb.ID, "true") })
		}},
	})
	note := "Both run `true` in the same sandbox's container, one after the other; the SDK call goes through the daemon to the in-sandbox agent over its unix socket."
	return NewComparison(id, title, note, series)
}

// measureFirstExec times create plus the first exec, the latency a caller
// sees before its first command has run. The baseline is a detached
// `runc run` followed by `runc exec`.
func (s *Suite) measureFirstExec(ctx context.Context, id, image string) Comparison {
	title := fmt.Sprintf("Create to first exec (%s, runc)", image)
	names := []string{"paddock create + exec", "runc run -d + runc exec"}
	b, err := s.bundle(ctx, image, "sleep", "3600")
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	series := s.interleave(ctx, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			var sbID string
			d, err := Timed(func() error {
				sb, err := s.create(ctx, image, api.RuntimeRunc)
				if err != nil {
					return err
				}
				sbID = sb.ID
				return s.execTrue(ctx, sb.ID)
			})
			if sbID != "" {
				if derr := s.destroy(ctx, sbID); derr != nil && err == nil {
					err = fmt.Errorf("destroy: %w", derr)
				}
			}
			return d, err
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			cid := s.id("first")
			d, err := Timed(func() error {
				if err := s.runc.RunDetached(ctx, b, cid); err != nil {
					return err
				}
				return s.runc.Exec(ctx, cid, "true")
			})
			if derr := s.runc.Delete(context.WithoutCancel(ctx), cid); derr != nil && err == nil {
				err = fmt.Errorf("delete: %w", derr)
			}
			return d, err
		}},
	})
	note := "Timed from the create request until the first `true` has exited; removal is not timed."
	return NewComparison(id, title, note, series)
}

// measureBurst starts Concurrency creates at once, then deletes them all.
func (s *Suite) measureBurst(ctx context.Context) Burst {
	n := s.o.Concurrency
	req := api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeRunc, KeepAlive: true, Labels: map[string]string{runLabel: s.label}}
	return s.createBurst(ctx, "burst-paddock", fmt.Sprintf("paddock: %d concurrent creates (busybox, runc)", n), n, req, nil)
}

// measureRuncBurst is the baseline burst: Concurrency detached `runc run`s.
func (s *Suite) measureRuncBurst(ctx context.Context) Burst {
	n := s.o.Concurrency
	b := Burst{ID: "burst-runc", Title: fmt.Sprintf("runc: %d concurrent runc run -d (busybox)", n), Concurrency: n}
	bundle, err := s.bundle(ctx, "busybox", "sleep", "3600")
	if err != nil {
		b.FirstError = err.Error()
		return b
	}
	ids := make([]string, n)
	durs := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		ids[i] = s.id("burst")
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			durs[i], errs[i] = Timed(func() error { return s.runc.RunDetached(cctx, bundle, ids[i]) })
		}()
	}
	wg.Wait()
	b.WallMs = ms(time.Since(start))
	b.Summary, b.FirstError = burstSummary(durs, errs)
	failed := 0
	for _, id := range ids {
		if err := s.runc.Delete(context.WithoutCancel(ctx), id); err != nil {
			failed++
		}
	}
	b.Cleanup = fmt.Sprintf("runc delete --force of each; %d failed (containers that never started fail here too)", failed)
	return b
}

func burstSummary(durs []time.Duration, errs []error) (Summary, string) {
	var ok []time.Duration
	var first string
	nerr := 0
	for i, err := range errs {
		if err != nil {
			nerr++
			if first == "" {
				first = err.Error()
			}
			continue
		}
		ok = append(ok, durs[i])
	}
	return Summarize(ok, nerr), first
}

// measureIdle creates IdleSamples sandboxes on a runtime, lets them settle,
// and sums the host memory of each one's processes.
func (s *Suite) measureIdle(ctx context.Context, rt string) Idle {
	out := Idle{Runtime: rt, Image: "busybox"}
	var sums []Idle
	var ids []string
	defer func() {
		for _, id := range ids {
			if err := s.destroy(ctx, id); err != nil {
				s.log.Error("destroy idle sandbox", "sandbox", id, "err", err)
			}
		}
	}()
	for i := 0; i < s.o.IdleSamples; i++ {
		sb, err := s.create(ctx, "busybox", rt)
		if err != nil {
			out.Error = err.Error()
			return out
		}
		ids = append(ids, sb.ID)
		if err := s.execTrue(ctx, sb.ID); err != nil {
			out.Error = "first exec: " + err.Error()
			return out
		}
	}
	// Let exec'd processes go and the agent reach its idle state.
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		out.Error = ctx.Err().Error()
		return out
	}
	for _, id := range ids {
		pids, err := s.sandboxPids(ctx, rt, id)
		if err != nil {
			out.Error = err.Error()
			return out
		}
		rss, pss, procs := SumMem(pids)
		if rt == api.RuntimeGVisor {
			for i := range procs {
				if procs[i].Comm == "exe" {
					procs[i].Comm = stubName
				}
			}
		}
		sums = append(sums, Idle{RSSKiB: rss, PSSKiB: pss, Procs: procs})
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i].RSSKiB < sums[j].RSSKiB })
	med := sums[len(sums)/2]
	out.Samples, out.RSSKiB, out.PSSKiB, out.Procs = len(sums), med.RSSKiB, med.PSSKiB, med.Procs
	return out
}

// sandboxPids lists the host processes a sandbox keeps: for runc, those in
// its container's memory cgroup (there is no shim); for gVisor, the runsc
// sandbox and gofer processes and their children.
func (s *Suite) sandboxPids(ctx context.Context, rt, id string) ([]int, error) {
	switch rt {
	case api.RuntimeRunc:
		pid, err := s.prunc.State(ctx, id)
		if err != nil {
			return nil, err
		}
		pids, err := CgroupProcs(pid)
		if err != nil || len(pids) == 0 {
			return Descendants(pid)
		}
		return pids, nil
	case api.RuntimeGVisor:
		pid, err := s.prunsc.State(ctx, id)
		if err != nil {
			s.log.Warn("runsc state", "sandbox", id, "err", err)
			pid = 0
		}
		pids, err := RunscProcs(id, pid)
		if err != nil {
			return nil, err
		}
		if len(pids) == 0 {
			return nil, errors.New("no runsc process found for the sandbox")
		}
		return pids, nil
	}
	return nil, fmt.Errorf("unknown runtime %q", rt)
}
