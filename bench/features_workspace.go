package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ItemWorkspace measures the shell executor of workspaces against the
// same commands through exec in a warm sandbox holding the same files.
const ItemWorkspace = "workspace"

// Goals from the workspaces issue.
const (
	// WorkspaceRatioGoal: a shell-executor command at most this fraction
	// of the same command through exec in a warm sandbox.
	WorkspaceRatioGoal = 0.1
	// WorkspaceSmallGoalMs: p50 of a small command in the shell executor.
	WorkspaceSmallGoalMs = 1.0
)

// workspaceFiles is how many files the measured workspace holds.
const workspaceFiles = 2000

// workspaceSeed makes workspaceFiles files of a few lines under 20
// directories, one of which holds the word the grep looks for. It runs as
// it is in the workspace's shell and in the sandbox's /bin/sh.
var workspaceSeed = fmt.Sprintf(`i=0
while [ $i -lt %d ]; do
  d=d$((i / 100))
  [ -d $d ] || mkdir $d
  printf 'file %%d\nthe quick brown fox\njumps over the lazy dog\nlorem ipsum dolor sit amet\n' $i > $d/f$i.txt
  i=$((i + 1))
done
echo 'a needle in the haystack' >> d7/f777.txt`, workspaceFiles)

// workspaceCommands are the measured commands: shell text run from the
// workspace's root (or the sandbox's copy of it).
var workspaceCommands = []struct{ id, title, script string }{
	{"workspace-grep", "grep -r over 2,000 files", "grep -r needle ."},
	{"workspace-sed", "sed -i on one file of 2,000 (a change: a new version each round)", "sed -i 's/$/./' d3/f300.txt"},
	{"workspace-cat-wc", "cat | wc -l of one file", "cat d1/f100.txt | wc -l"},
	{"workspace-small", "a small command: echo", "echo hi"},
}

// measureWorkspace runs each workspace command through the shell
// executor and through exec in a warm base sandbox (runc) that holds the
// same files, interleaved; and records the shell executor's own time for
// the small command.
func (s *Suite) measureWorkspace(ctx context.Context) ([]Comparison, []Figure) {
	names := []string{"workspace run, shell executor (SDK)", "exec in a warm sandbox (SDK)"}
	fail := func(err error) ([]Comparison, []Figure) {
		var cs []Comparison
		for _, c := range workspaceCommands {
			cs = append(cs, failedComparison(c.id, "Workspace: "+c.title, err, names...))
		}
		return cs, nil
	}
	ws, err := s.c.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "bench-" + s.label})
	if err != nil {
		return fail(err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = s.c.DeleteWorkspace(dctx, ws.ID)
	}()
	seedStart := time.Now()
	res, err := s.c.RunInWorkspace(ctx, ws.ID, api.WorkspaceRunRequest{Script: workspaceSeed, Executor: api.ExecutorShell, TimeoutMs: 120_000})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("seeding the workspace exited %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return fail(err)
	}
	seed := time.Since(seedStart)
	sb, err := s.create(ctx, "base", api.RuntimeRunc)
	if err != nil {
		return fail(err)
	}
	defer s.destroy(ctx, sb.ID)
	if _, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "mkdir -p ws && cd ws && " + workspaceSeed}}); err != nil {
		return fail(err)
	}

	var cs []Comparison
	var smallShell []time.Duration
	for _, c := range workspaceCommands {
		series := s.interleaveN(ctx, ItemWorkspace, []Variant{
			{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
				var res *api.WorkspaceRunResult
				d, err := Timed(func() error {
					var err error
					res, err = s.c.RunInWorkspace(ctx, ws.ID, api.WorkspaceRunRequest{Script: c.script, Executor: api.ExecutorShell})
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("%s exited %d: %s", c.script, res.ExitCode, res.Stderr)
					}
					return err
				})
				if err == nil && c.id == "workspace-small" {
					smallShell = append(smallShell, time.Duration(res.DurationMs*float64(time.Millisecond)))
				}
				return d, err
			}},
			{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
				return Timed(func() error {
					_, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "cd ws && " + c.script}})
					return err
				})
			}},
		})
		note := fmt.Sprintf("The workspace and the sandbox hold the same %d files (%d directories). The workspace run goes over the daemon's socket like the exec; it reads the version, interprets the command in the daemon and lands what it changed as a new version in SQLite. The exec forks /bin/sh (dash) and the tool in a warm runc sandbox of the base image.",
			workspaceFiles, workspaceFiles/100)
		cs = append(cs, NewComparison(c.id, "Workspace: "+c.title, note, series))
	}
	cs = append(cs, s.measureWorkspaceContainer(ctx, ws.ID, sb.ID))
	cs = append(cs, s.measureWorkspaceFUSE(ctx)...)
	figs := []Figure{{
		ID: "workspace-seed", Name: fmt.Sprintf("Seeding the workspace with %d files in one shell-executor command (one version)", workspaceFiles),
		Value: float64(seed.Microseconds()) / 1000, Unit: "ms",
	}}
	if len(smallShell) > 0 {
		figs = append(figs, Figure{
			ID: "workspace-small-executor", Name: "The shell executor's own time for `echo hi`, p50 (no API round trip)",
			Value: Summarize(smallShell, 0).P50ms, Unit: "ms",
			Note: fmt.Sprintf("goal: p50 under %.0f ms for a small command", WorkspaceSmallGoalMs),
		})
	}
	return cs, append(figs, workspaceFUSEFigures(cs)...)
}

// workspaceTargets checks the workspace figures against the goals.
func workspaceTargets(r *Report) []Target {
	var out []Target
	for _, c := range workspaceCommands[:3] {
		out = append(out, ratioTarget(r, c.id, "exec in a warm sandbox (SDK)", "Workspace "+strings.SplitN(c.title, " (", 2)[0],
			fmt.Sprintf("p50 <= %.1fx exec in a warm sandbox", WorkspaceRatioGoal), WorkspaceRatioGoal))
	}
	small := Target{Name: "Workspace small command (shell executor)", Goal: fmt.Sprintf("p50 < %.0f ms", WorkspaceSmallGoalMs), Status: NotMeasured}
	if c := r.Comparison("workspace-small"); c != nil && len(c.Series) > 0 && c.Series[0].Summary.N > 0 {
		p50 := c.Series[0].Summary.P50ms
		small.Status = Met
		if p50 >= WorkspaceSmallGoalMs {
			small.Status = Missed
		}
		small.Detail = fmt.Sprintf("p50 %.2f ms through the API (socket, JSON, version read), the executor's own part in figure workspace-small-executor.", p50)
	}
	return append(out, small)
}

// measureWorkspaceContainer compares a command on the container executor
// (its copy current: a read-only command in a row) with the same command
// through exec in a warm sandbox, and records the first container
// command of a workspace (attach: a sandbox made, the version copied in).
func (s *Suite) measureWorkspaceContainer(ctx context.Context, wsID, sandbox string) Comparison {
	const id, title = "workspace-container", "Workspace: `cat | wc -l` on the container executor (copy current) vs exec"
	const script = "cat d1/f100.txt | wc -l"
	names := []string{"workspace run, container executor (SDK)", "exec in a warm sandbox (SDK)", "first container command of the workspace (attach)",
		"container executor after a shell command changed a file (SDK)"}
	run := func(ctx context.Context) error {
		res, err := s.c.RunInWorkspace(ctx, wsID, api.WorkspaceRunRequest{Script: script, Executor: api.ExecutorContainer, TimeoutMs: 120_000})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("%s exited %d: %s", script, res.ExitCode, res.Stderr)
		}
		return err
	}
	attach := Series{Name: names[2]}
	var attached []time.Duration
	d, err := Timed(func() error { return run(ctx) })
	if err != nil {
		attach.Disabled = "failed: " + err.Error()
	} else {
		attached = append(attached, d)
		attach.Summary = Summarize(attached, 0)
	}
	series := s.interleaveN(ctx, ItemWorkspace, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) { return Timed(func() error { return run(ctx) }) }},
		{Name: names[3], Run: func(ctx context.Context) (time.Duration, error) {
			// Untimed: a change by another executor, which the copy has
			// to be brought up to.
			if _, err := s.c.RunInWorkspace(ctx, wsID, api.WorkspaceRunRequest{Script: "echo more >> d2/f7.txt", Executor: api.ExecutorShell}); err != nil {
				return 0, err
			}
			return Timed(func() error { return run(ctx) })
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error {
				_, err := s.execOut(ctx, sandbox, paddock.ExecOptions{Cmd: []string{"sh", "-c", "cd ws && " + script}})
				return err
			})
		}},
	})
	note := fmt.Sprintf("The container executor's sandbox holds a copy of the %d files; each command is an exec in it plus reading the copy back (every entry's kind, mode, inode and change time, and the content of only the files changed since the last read-back) and comparing it with the version (nothing changes here, so no version is made). The row after a shell command times only the container command, which first brings its copy up to the new version by writing the one changed file. The attach row is one sample: the workspace's first container command, which creates the sandbox and copies the version in.", workspaceFiles)
	return NewComparison(id, title, note, append(series, attach))
}
