package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// forkCount is how many sandboxes one fork makes.
const forkCount = 10

// interleaveCount is interleave with an explicit number of rounds.
func (s *Suite) interleaveCount(ctx context.Context, n int, variants []Variant) []Series {
	return Interleave(ctx, InterleaveOptions{
		Iterations: max(1, min(s.o.Iterations, n)), Warmup: min(s.o.Warmup, 1), Timeout: 5 * time.Minute, Logger: s.log,
	}, variants)
}

// measureSnapshots measures snapshot time and size, restore, fork and
// pause/resume, each against its baseline.
func (s *Suite) measureSnapshots(ctx context.Context) ([]Comparison, []Figure) {
	var cs []Comparison
	var figs []Figure
	sb, err := s.create(ctx, "busybox", api.RuntimeRunc)
	if err != nil {
		return []Comparison{failedComparison("snapshot", "Snapshots", err, "paddock")}, nil
	}
	defer s.destroy(ctx, sb.ID)
	sizes := []int64{10 << 20, 100 << 20}
	if s.o.SnapshotGiB {
		sizes = append(sizes, 1<<30)
	}
	for _, size := range sizes {
		c, f := s.measureSnapshotSize(ctx, sb.ID, size)
		cs, figs = append(cs, c), append(figs, f)
	}
	c, f := s.measureSecondSnapshot(ctx, sb.ID)
	cs, figs = append(cs, c), append(figs, f)
	cs = append(cs, s.measureRestore(ctx, sb.ID), s.measureFork(ctx, sb.ID))
	cs = append(cs, s.measurePause(ctx)...)
	return cs, figs
}

func sizeLabel(size int64) string {
	if size >= 1<<30 {
		return fmt.Sprintf("%d GiB", size>>30)
	}
	return fmt.Sprintf("%d MiB", size>>20)
}

// measureSnapshotSize writes size random bytes into the sandbox before each
// round (untimed) and times the snapshot; the baseline copies as many bytes
// with fsync on the host.
func (s *Suite) measureSnapshotSize(ctx context.Context, sbID string, size int64) (Comparison, Figure) {
	id := "snapshot-" + Slug(sizeLabel(size))
	title := fmt.Sprintf("Snapshot of %s of changes (busybox, runc)", sizeLabel(size))
	names := []string{"paddock snapshot", "host copy + fsync of the same bytes"}
	fig := Figure{ID: id + "-size", Name: fmt.Sprintf("Snapshot size for %s of changes", sizeLabel(size)), Unit: "MiB",
		Baseline: "bytes changed", BaseVal: float64(size >> 20)}
	dir := filepath.Join(s.o.WorkDir, "snapcopy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fig.Error = err.Error()
		return failedComparison(id, title, err, names...), fig
	}
	defer os.RemoveAll(dir)
	copyRun, err := hostCopy(ctx, dir, size)
	if err != nil {
		fig.Error = err.Error()
		return failedComparison(id, title, err, names...), fig
	}
	write := fmt.Sprintf("mkdir -p /benchdata && head -c %d /dev/urandom > /benchdata/f && sync", size)
	var lastSize int64
	series := s.interleaveCount(ctx, featureIterations[ItemSnapshot], []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			if _, err := s.execOut(ctx, sbID, paddock.ExecOptions{Cmd: []string{"sh", "-c", write}, User: "root"}); err != nil {
				return 0, err
			}
			var snap *api.Snapshot
			d, err := Timed(func() error {
				var err error
				snap, err = s.c.CreateSnapshot(ctx, sbID, api.CreateSnapshotRequest{TTL: "1h"})
				return err
			})
			if err != nil {
				return d, err
			}
			lastSize = snap.Size
			if derr := s.c.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID); derr != nil {
				s.log.Warn("delete snapshot", "snapshot", snap.ID, "err", derr)
			}
			return d, nil
		}},
		{Name: names[1], Run: copyRun},
	})
	if lastSize > 0 {
		fig.Value = float64(int64(float64(lastSize)/(1<<20)*10)) / 10
		fig.Ratio = Ratio(fig.Value, fig.BaseVal)
		fig.Note = "Size of the last snapshot taken (Snapshot.size: its own layer); the data is random, so nothing compresses."
	} else {
		fig.Error = "no snapshot succeeded"
	}
	note := "Before each round the sandbox rewrites a file of random bytes (not timed), so every snapshot carries that much change. The baseline is the floor for persisting those bytes: copying a file of the same size on the host's disk and fsyncing it."
	return NewComparison(id, title, note, series), fig
}

// measureSecondSnapshot times a second snapshot of 100 MiB of changes (100
// files of 1 MiB, snapshotted once already, untimed) after one file (1 MiB)
// is rewritten before each round (untimed), and reports the bytes it newly
// stored; the baseline copies the whole 100 MiB with fsync on the host,
// the floor for storing the layer again in full.
func (s *Suite) measureSecondSnapshot(ctx context.Context, sbID string) (Comparison, Figure) {
	const id = "snapshot-second-1-of-100-mib"
	const title = "Second snapshot after changing 1 MiB of a 100 MiB layer (100 files of 1 MiB; busybox, runc)"
	names := []string{"paddock second snapshot", "host copy + fsync of 100 MiB"}
	fig := Figure{ID: id + "-stored", Name: "Bytes newly stored by a second snapshot after changing 1 MiB of 100 MiB", Unit: "MiB",
		Baseline: "layer size", BaseVal: 100}
	fail := func(err error) (Comparison, Figure) {
		fig.Error = err.Error()
		return failedComparison(id, title, err, names...), fig
	}
	dir := filepath.Join(s.o.WorkDir, "snapcopy-second")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	copyRun, err := hostCopy(ctx, dir, 100<<20)
	if err != nil {
		return fail(err)
	}
	root := []string{"sh", "-c"}
	setup := "rm -rf /benchdata && mkdir -p /benchdata2 && for i in $(seq 1 100); do head -c 1048576 /dev/urandom > /benchdata2/f$i; done && sync"
	if _, err := s.execOut(ctx, sbID, paddock.ExecOptions{Cmd: append(root, setup), User: "root"}); err != nil {
		return fail(err)
	}
	// The later items expect the sandbox without these files.
	defer s.execOut(context.WithoutCancel(ctx), sbID, paddock.ExecOptions{Cmd: append(root, "rm -rf /benchdata2"), User: "root"})
	first, err := s.c.CreateSnapshot(ctx, sbID, api.CreateSnapshotRequest{TTL: "1h"})
	if err != nil {
		return fail(err)
	}
	defer s.c.DeleteSnapshot(context.WithoutCancel(ctx), first.ID)
	rewrite := "head -c 1048576 /dev/urandom > /benchdata2/f1 && sync"
	added := int64(-1)
	series := s.interleaveCount(ctx, featureIterations[ItemSnapshot], []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			if _, err := s.execOut(ctx, sbID, paddock.ExecOptions{Cmd: append(root, rewrite), User: "root"}); err != nil {
				return 0, err
			}
			var snap *api.Snapshot
			d, err := Timed(func() error {
				var err error
				snap, err = s.c.CreateSnapshot(ctx, sbID, api.CreateSnapshotRequest{TTL: "1h"})
				return err
			})
			if err != nil {
				return d, err
			}
			added = snap.SizeAdded
			if derr := s.c.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID); derr != nil {
				s.log.Warn("delete snapshot", "snapshot", snap.ID, "err", derr)
			}
			return d, nil
		}},
		{Name: names[1], Run: copyRun},
	})
	if added >= 0 {
		fig.Value = float64(int64(float64(added)/(1<<20)*10)) / 10
		fig.Ratio = Ratio(fig.Value, fig.BaseVal)
		fig.Note = "Snapshot.size_added of the last second snapshot: the files it did not find stored already (the rewritten one) plus its directories. Its size (the layer's logical size) stays 100 MiB."
	} else {
		fig.Error = "no second snapshot succeeded"
	}
	note := "A first snapshot of the 100 files is taken once, untimed. Before each round one file is rewritten with random bytes (untimed); the snapshot still copies and hashes all 100 MiB while the sandbox is frozen, but stores only the changed file. The baseline copies and fsyncs 100 MiB on the host's disk."
	return NewComparison(id, title, note, series), fig
}

// measureRestore compares a create from a snapshot with a cold create, each
// to its first exec.
func (s *Suite) measureRestore(ctx context.Context, sbID string) Comparison {
	const id, title = "restore-first-exec", "Restore a snapshot (10 MiB of changes) to first exec vs cold create (busybox, runc)"
	names := []string{"create from snapshot + exec", "cold create + exec"}
	if _, err := s.execOut(ctx, sbID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "mkdir -p /benchdata && head -c 10485760 /dev/urandom > /benchdata/f"}, User: "root"}); err != nil {
		return failedComparison(id, title, err, names...)
	}
	snap, err := s.c.CreateSnapshot(ctx, sbID, api.CreateSnapshotRequest{TTL: "1h"})
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.c.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID)
	series := s.interleaveCount(ctx, 10, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExec(ctx, api.CreateSandboxRequest{FromSnapshot: snap.ID})
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExec(ctx, api.CreateSandboxRequest{Image: "busybox"})
		}},
	})
	return NewComparison(id, title, "Removal is not timed.", series)
}

// measureFork times a fork into forkCount sandboxes against as many cold
// creates started at once.
func (s *Suite) measureFork(ctx context.Context, sbID string) Comparison {
	id, title := "fork-10", fmt.Sprintf("Fork a sandbox into %d vs %d concurrent cold creates (busybox, runc)", forkCount, forkCount)
	names := []string{fmt.Sprintf("fork x%d", forkCount), fmt.Sprintf("%d concurrent creates", forkCount)}
	labels := map[string]string{runLabel: s.label}
	series := s.interleaveCount(ctx, featureIterations[ItemSnapshot], []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			var res *api.ForkResult
			d, err := Timed(func() error {
				var err error
				res, err = s.c.Fork(ctx, sbID, api.ForkRequest{Count: forkCount, Labels: labels})
				return err
			})
			if res != nil {
				for _, x := range res.Sandboxes {
					_ = s.destroy(ctx, x.ID)
				}
				_ = s.c.DeleteSnapshot(context.WithoutCancel(ctx), res.Snapshot.ID)
				if err == nil && len(res.Sandboxes) != forkCount {
					err = fmt.Errorf("fork made %d sandboxes, want %d", len(res.Sandboxes), forkCount)
				}
			}
			return d, err
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return s.concurrentCreates(ctx, forkCount, api.RuntimeRunc)
		}},
	})
	note := "The fork snapshots the sandbox (10 MiB of changes) and creates its copies from that snapshot; the baseline creates as many fresh sandboxes at once. Both end when every sandbox is running; removal is not timed."
	return NewComparison(id, title, note, series)
}

// measurePause compares the API's pause and resume with runc pause and
// resume of the very same container.
func (s *Suite) measurePause(ctx context.Context) []Comparison {
	const pid, ptitle = "pause", "Pause latency vs runc pause of the same container (busybox, runc)"
	const rid, rtitle = "resume", "Resume latency vs runc resume of the same container (busybox, runc)"
	pnames := []string{"paddock pause (SDK)", "runc pause"}
	rnames := []string{"paddock resume (SDK)", "runc resume"}
	sb, err := s.create(ctx, "busybox", api.RuntimeRunc)
	if err == nil {
		defer s.destroy(ctx, sb.ID)
		err = s.execTrue(ctx, sb.ID)
	}
	if err != nil {
		return []Comparison{failedComparison(pid, ptitle, err, pnames...), failedComparison(rid, rtitle, err, rnames...)}
	}
	var pres, rres []time.Duration
	series := s.interleaveCount(ctx, 10, []Variant{
		{Name: pnames[0], Run: func(ctx context.Context) (time.Duration, error) {
			d, err := Timed(func() error { _, err := s.c.Pause(ctx, sb.ID); return err })
			if err != nil {
				return d, err
			}
			r, err := Timed(func() error { _, err := s.c.Resume(ctx, sb.ID); return err })
			if err == nil {
				pres = append(pres, r)
			}
			return d, err
		}},
		{Name: pnames[1], Run: func(ctx context.Context) (time.Duration, error) {
			d, err := Timed(func() error { return s.prunc.Cmd(ctx, "pause", sb.ID) })
			if err != nil {
				return d, err
			}
			r, err := Timed(func() error { return s.prunc.Cmd(ctx, "resume", sb.ID) })
			if err == nil {
				rres = append(rres, r)
			}
			return d, err
		}},
	})
	if err := s.execTrue(ctx, sb.ID); err != nil {
		series[0].FirstError = firstNonEmpty(series[0].FirstError, "exec after the last resume failed: "+err.Error())
	}
	note := "Both on one running sandbox; each round pauses then resumes. The API's pause also records the state; runc pause only freezes the cgroup."
	return []Comparison{
		NewComparison(pid, ptitle, note, series),
		NewComparison(rid, rtitle, "The resume half of each recorded round above (warm-up dropped).", []Series{
			callSeries(rnames[0], pres, series[0].Summary.N), callSeries(rnames[1], rres, series[1].Summary.N),
		}),
	}
}

// Cmd runs a runc subcommand with the state root.
func (r Runc) Cmd(ctx context.Context, args ...string) error {
	_, err := runTool(ctx, r.bin(), r.args(args...)...)
	return err
}
