package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ItemMemory measures what keeps a gVisor sandbox's memory: hibernation,
// memory snapshots and live forks, each against its baseline.
const ItemMemory = "memory"

// memoryResident is what a sandbox holds in memory before a checkpoint:
// random bytes in /dev/shm (64 MiB at most) and /tmp, both tmpfs that
// gVisor keeps in the sandbox's memory (nothing compresses them).
const memoryResident = 100 << 20

// memoryInShm is the part of memoryResident kept in /dev/shm.
const memoryInShm = 48 << 20

// measureMemory runs the memory item's measurements.
func (s *Suite) measureMemory(ctx context.Context) ([]Comparison, []Figure) {
	var cs []Comparison
	var figs []Figure
	c, f := s.measureHibernate(ctx)
	cs, figs = append(cs, c...), append(figs, f...)
	c2, f2 := s.measureMemoryFork(ctx)
	cs, figs = append(cs, c2), append(figs, f2)
	cs = append(cs, s.measureMemoryPython(ctx))
	return cs, figs
}

// createGVisor makes a labelled gVisor sandbox with room for the resident
// bytes, and runs its first exec.
func (s *Suite) createGVisor(ctx context.Context, image string) (*api.Sandbox, error) {
	sb, err := s.c.Create(ctx, api.CreateSandboxRequest{
		Image: image, Runtime: api.RuntimeGVisor, KeepAlive: true,
		Resources: api.Resources{MemoryMB: 1024},
		Labels:    map[string]string{runLabel: s.label},
	})
	if err != nil {
		return nil, err
	}
	if err := s.execTrue(ctx, sb.ID); err != nil {
		_ = s.destroy(ctx, sb.ID)
		return nil, err
	}
	return sb, nil
}

// fillMemory makes a running sandbox hold memoryResident fresh random bytes.
func (s *Suite) fillMemory(ctx context.Context, id string) error {
	_, err := s.execOut(ctx, id, paddock.ExecOptions{Cmd: []string{"sh", "-c",
		fmt.Sprintf("head -c %d /dev/urandom > /dev/shm/bench && head -c %d /dev/urandom > /tmp/bench", memoryInShm, memoryResident-memoryInShm)}, User: "root"})
	return err
}

// measureHibernate times hibernating a sandbox that holds 100 MiB against
// writing as many bytes to the host's disk with fsync, and the first exec
// after it (the restore) against a cold gVisor create to first exec; it
// reports the host memory the sandbox keeps running and hibernated, and
// the memory image's size.
func (s *Suite) measureHibernate(ctx context.Context) ([]Comparison, []Figure) {
	const hid, htitle = "hibernate-100-mib", "Hibernate a gVisor sandbox holding 100 MiB vs host write + fsync of 100 MiB (busybox)"
	const rid, rtitle = "hibernate-restore-first-exec", "First exec of a hibernated sandbox (its restore) vs cold gVisor create to first exec (busybox)"
	hnames := []string{"paddock hibernate (SDK)", "host copy + fsync of 100 MiB"}
	rnames := []string{"exec in a hibernated sandbox", "cold gVisor create + exec"}
	memFig := Figure{ID: "hibernated-host-memory", Name: "Host memory (RSS) of a hibernated sandbox", Unit: "KiB", Baseline: "the same sandbox running"}
	sizeFig := Figure{ID: "memory-image-size", Name: "Memory image on disk for a sandbox holding 100 MiB", Unit: "MiB", Baseline: "bytes held", BaseVal: memoryResident >> 20}
	fail := func(err error) ([]Comparison, []Figure) {
		memFig.Error, sizeFig.Error = err.Error(), err.Error()
		return []Comparison{failedComparison(hid, htitle, err, hnames...), failedComparison(rid, rtitle, err, rnames...)}, []Figure{memFig, sizeFig}
	}
	dir := filepath.Join(s.o.WorkDir, "memcopy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	copyRun, err := hostCopy(ctx, dir, memoryResident)
	if err != nil {
		return fail(err)
	}
	sb, err := s.createGVisor(ctx, "busybox")
	if err != nil {
		return fail(err)
	}
	defer s.destroy(ctx, sb.ID)
	if err := s.fillMemory(ctx, sb.ID); err != nil {
		return fail(err)
	}
	if pids, err := s.sandboxPids(ctx, api.RuntimeGVisor, sb.ID); err == nil {
		rss, _, _ := SumMem(pids)
		memFig.BaseVal = float64(rss)
	} else {
		memFig.Error = "running: " + err.Error()
	}
	if snap, err := s.c.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{TTL: "1h", Memory: true}); err == nil {
		sizeFig.Value = float64(int64(float64(snap.MemorySize)/(1<<20)*10)) / 10
		sizeFig.Ratio = Ratio(sizeFig.Value, sizeFig.BaseVal)
		sizeFig.Note = "Snapshot.memory_size of a memory snapshot of the sandbox: gVisor's checkpoint image with the zero pages left out."
		_ = s.c.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID)
	} else {
		sizeFig.Error = err.Error()
	}
	hseries := s.interleaveN(ctx, ItemMemory, []Variant{
		{Name: hnames[0], Run: func(ctx context.Context) (time.Duration, error) {
			// Each round rewrites the bytes (which also restores the
			// sandbox hibernated by the round before); not timed.
			if err := s.fillMemory(ctx, sb.ID); err != nil {
				return 0, err
			}
			return Timed(func() error { _, err := s.c.Hibernate(ctx, sb.ID); return err })
		}},
		{Name: hnames[1], Run: copyRun},
	})
	if err := s.hibernated(ctx, sb.ID); err != nil {
		memFig.Error = err.Error()
	} else if pids, err := s.sandboxPids(ctx, api.RuntimeGVisor, sb.ID); err == nil || strings.Contains(err.Error(), "no runsc process") {
		rss, _, _ := SumMem(pids)
		memFig.Value = float64(rss)
		memFig.Note = "The sandbox's runsc processes summed; a hibernated sandbox has none."
	} else {
		memFig.Error = err.Error()
	}
	rseries := s.interleaveN(ctx, ItemMemory, []Variant{
		{Name: rnames[0], Run: func(ctx context.Context) (time.Duration, error) {
			if _, err := s.c.Hibernate(ctx, sb.ID); err != nil && s.hibernated(ctx, sb.ID) != nil {
				return 0, err
			}
			return Timed(func() error { return s.execTrue(ctx, sb.ID) })
		}},
		{Name: rnames[1], Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExecOn(ctx, api.RuntimeGVisor, api.CreateSandboxRequest{Image: "busybox"})
		}},
	})
	hnote := "Before each round the sandbox writes 100 MiB of random bytes to /dev/shm and /tmp (gVisor keeps both in the sandbox's memory), untimed. " +
		"Hibernate checkpoints the sandbox's memory and processes to disk (runsc checkpoint), seals the image (its manifest with hashes, fsynced) and stops the sandbox. The baseline is the floor for writing as many bytes: a copy with fsync on the host's disk."
	rnote := "Before each round the sandbox is hibernated, untimed; the exec restores it (runsc restore, the agent attached again) and runs `true`. The baseline creates a fresh gVisor sandbox and runs `true` in it; its removal is not timed."
	return []Comparison{NewComparison(hid, htitle, hnote, hseries), NewComparison(rid, rtitle, rnote, rseries)}, []Figure{memFig, sizeFig}
}

// hibernated insists that a sandbox is hibernated.
func (s *Suite) hibernated(ctx context.Context, id string) error {
	sb, err := s.c.Get(ctx, id)
	if err != nil {
		return err
	}
	if sb.State != api.StateHibernated {
		return fmt.Errorf("sandbox is %s, want %s", sb.State, api.StateHibernated)
	}
	return nil
}

// measureMemoryFork times a live fork into forkCount copies against as many
// concurrent cold gVisor creates, and reports the p50 of the first exec in
// each copy once the fork returned.
func (s *Suite) measureMemoryFork(ctx context.Context) (Comparison, Figure) {
	id, title := "memory-fork-10", fmt.Sprintf("Live fork (memory) of a gVisor sandbox into %d vs %d concurrent cold gVisor creates (busybox)", forkCount, forkCount)
	names := []string{fmt.Sprintf("fork --memory x%d", forkCount), fmt.Sprintf("%d concurrent gVisor creates", forkCount)}
	fig := Figure{ID: "memory-fork-first-exec", Name: "First exec in a live copy after the fork returned, p50", Unit: "ms"}
	sb, err := s.createGVisor(ctx, "busybox")
	if err != nil {
		fig.Error = err.Error()
		return failedComparison(id, title, err, names...), fig
	}
	defer s.destroy(ctx, sb.ID)
	// A background job the copies carry on.
	if _, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "(i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 1; done) > /dev/null 2>&1 &"}}); err != nil {
		fig.Error = err.Error()
		return failedComparison(id, title, err, names...), fig
	}
	labels := map[string]string{runLabel: s.label}
	var mu sync.Mutex
	var firsts []time.Duration
	series := s.interleaveCount(ctx, featureIterations[ItemMemory], []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			var res *api.ForkResult
			d, err := Timed(func() error {
				var err error
				res, err = s.c.Fork(ctx, sb.ID, api.ForkRequest{Count: forkCount, Labels: labels, Memory: true})
				return err
			})
			if res == nil {
				return d, err
			}
			var wg sync.WaitGroup
			errs := make([]error, len(res.Sandboxes))
			for i, x := range res.Sandboxes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e, err := Timed(func() error { return s.execTrue(ctx, x.ID) })
					errs[i] = err
					if err == nil {
						mu.Lock()
						firsts = append(firsts, e)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for _, x := range res.Sandboxes {
				_ = s.destroy(ctx, x.ID)
			}
			_ = s.c.DeleteSnapshot(context.WithoutCancel(ctx), res.Snapshot.ID)
			if err == nil && len(res.Sandboxes) != forkCount {
				err = fmt.Errorf("fork made %d sandboxes, want %d", len(res.Sandboxes), forkCount)
			}
			for _, e := range errs {
				if err == nil && e != nil {
					err = fmt.Errorf("first exec in a copy: %w", e)
				}
			}
			return d, err
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return s.concurrentCreates(ctx, forkCount, api.RuntimeGVisor)
		}},
	})
	if len(firsts) > 0 {
		sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
		fig.Value = ms(Percentile(firsts, 0.5))
		fig.Note = fmt.Sprintf("%d first execs (ten concurrent per fork, the warm-up's included); p90 %.0f ms.", len(firsts), ms(Percentile(firsts, 0.9)))
	} else {
		fig.Error = "no copy ran an exec"
	}
	note := "The fork checkpoints the running sandbox (a shell loop counting in the background), keeps the image as a memory snapshot and restores it into each copy under its own id and hostname; it ends when every copy runs. " +
		"The baseline creates as many fresh gVisor sandboxes at once, with no processes to carry. Removal is not timed."
	return NewComparison(id, title, note, series), fig
}

// concurrentCreates times n creates of busybox sandboxes on rt started at
// once, until all of them run; they are removed untimed.
func (s *Suite) concurrentCreates(ctx context.Context, n int, rt string) (time.Duration, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	d, _ := Timed(func() error {
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := s.create(ctx, "busybox", rt)
				if err == nil {
					ids[i] = sb.ID
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		return nil
	})
	for _, x := range ids {
		if x != "" {
			_ = s.destroy(ctx, x)
		}
	}
	for _, err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// pythonImports is what the Python measurement's interpreter has done
// before its first answer.
const pythonImports = "import numpy, pandas\nframe = pandas.DataFrame({'x': numpy.arange(1000)})"

// measureMemoryPython compares restoring a memory snapshot of a sandbox
// whose Python context has imported numpy and pandas, to its first answer,
// with a cold create that starts the context and does the imports.
func (s *Suite) measureMemoryPython(ctx context.Context) Comparison {
	const id, title = "memory-restore-python", "Memory snapshot restore to a Python answer vs cold create + numpy and pandas imports (code-interpreter, gVisor)"
	names := []string{"create from memory snapshot + run", "cold create + context + imports + run"}
	const image = "code-interpreter"
	if _, err := s.layer(ctx, image); err != nil {
		return failedComparison(id, title, err, names...)
	}
	sb, err := s.createGVisor(ctx, image)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.destroy(ctx, sb.ID)
	if _, err := s.runPython(ctx, sb.ID, true, pythonImports); err != nil {
		return failedComparison(id, title, err, names...)
	}
	snap, err := s.c.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{TTL: "1h", Memory: true})
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.c.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID)
	const question = "int(frame['x'].sum())"
	answer := func(ctx context.Context, sbID string, setup string) error {
		code := question
		if setup != "" {
			code = setup + "\n" + question
		}
		got, err := s.runPython(ctx, sbID, setup != "", code)
		if err == nil && got != "499500" {
			err = fmt.Errorf("the sum is %q, want 499500", got)
		}
		return err
	}
	run := func(ctx context.Context, req api.CreateSandboxRequest, setup string) (time.Duration, error) {
		req.Runtime, req.KeepAlive = api.RuntimeGVisor, true
		req.Labels = map[string]string{runLabel: s.label}
		var sbID string
		d, err := Timed(func() error {
			x, err := s.c.Create(ctx, req)
			if err != nil {
				return err
			}
			sbID = x.ID
			return answer(ctx, sbID, setup)
		})
		if sbID != "" {
			_ = s.destroy(ctx, sbID)
		}
		return d, err
	}
	series := s.interleaveN(ctx, ItemMemory, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return run(ctx, api.CreateSandboxRequest{FromSnapshot: snap.ID}, "")
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return run(ctx, api.CreateSandboxRequest{Image: image, Resources: api.Resources{MemoryMB: 1024}}, pythonImports)
		}},
	})
	note := "The snapshot is taken of a sandbox whose Python code context has imported numpy and pandas and built a DataFrame; the restored sandbox answers from that context at once. " +
		"The baseline creates a sandbox on the same image, starts the context and does the same imports before the same question. Removal is not timed."
	return NewComparison(id, title, note, series)
}

// runPython runs code in the sandbox's "bench" Python context (made when
// create is set) and returns its main result's text.
func (s *Suite) runPython(ctx context.Context, id string, create bool, code string) (string, error) {
	r, err := s.c.RunCode(ctx, id, "bench", code, paddock.RunCodeOptions{Create: create, Language: "python"})
	if err != nil {
		return "", err
	}
	if r.Status != api.RunOK {
		return "", fmt.Errorf("run status %s: %v", r.Status, r.Error)
	}
	m, _ := r.Main()
	return strings.TrimSpace(m.Text()), nil
}

// Goals from the memory issue.
const (
	// MemoryPythonRatioGoal: restore of a Python context with numpy and
	// pandas imported, to its first answer, against a cold create.
	MemoryPythonRatioGoal = 0.3
	// HibernateGoalMs: checkpoint of 100 MiB of resident memory.
	HibernateGoalMs = 1000.0
	// ForkFirstExecGoalMs: a live copy's first exec, p50.
	ForkFirstExecGoalMs = 150.0
)

// memoryTargets checks the memory item's figures against its goals.
func memoryTargets(r *Report) []Target {
	py := ratioTarget(r, "memory-restore-python", "cold create + context + imports + run",
		"Memory snapshot restore to a Python answer (numpy, pandas imported)",
		fmt.Sprintf("p50 <= %.1fx cold create + imports", MemoryPythonRatioGoal), MemoryPythonRatioGoal)
	hib := Target{Name: "Hibernate 100 MiB of resident memory", Goal: fmt.Sprintf("p50 <= %.0f ms", HibernateGoalMs), Status: NotMeasured}
	if c := r.Comparison("hibernate-100-mib"); c != nil && len(c.Series) > 0 {
		if p := c.Series[0]; p.Summary.N > 0 {
			hib.Status = Met
			if p.Summary.P50ms > HibernateGoalMs {
				hib.Status = Missed
			}
			hib.Detail = fmt.Sprintf("p50 %.0f ms, p99 %.0f ms.", p.Summary.P50ms, p.Summary.P99ms)
		} else {
			hib.Detail = "no hibernate succeeded: " + cell(firstNonEmpty(p.Disabled, p.FirstError))
		}
	}
	figTarget := func(id, name, goal string, ok func(v float64) bool, detail func(f Figure) string) Target {
		t := Target{Name: name, Goal: goal, Status: NotMeasured}
		for _, f := range r.Figures {
			if f.ID != id {
				continue
			}
			if f.Error != "" {
				t.Detail = "could not measure: " + cell(f.Error)
				return t
			}
			t.Status = Met
			if !ok(f.Value) {
				t.Status = Missed
			}
			t.Detail = detail(f)
		}
		return t
	}
	fork := figTarget("memory-fork-first-exec", "First exec in a live copy", fmt.Sprintf("p50 <= %.0f ms", ForkFirstExecGoalMs),
		func(v float64) bool { return v <= ForkFirstExecGoalMs },
		func(f Figure) string { return fmt.Sprintf("p50 %.0f ms. %s", f.Value, f.Note) })
	mem := figTarget("hibernated-host-memory", "Host memory of a hibernated sandbox", "0 bytes resident",
		func(v float64) bool { return v == 0 },
		func(f Figure) string {
			return fmt.Sprintf("%.0f KiB hibernated, %.0f KiB running.", f.Value, f.BaseVal)
		})
	return []Target{py, hib, fork, mem}
}
