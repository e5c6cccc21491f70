package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// workspaceFUSENames are the two variants of the workspace-fuse figures.
var workspaceFUSENames = []string{"through a FUSE loopback mount", "the host's own directory"}

// measureWorkspaceFUSE measures what serving a workspace to a container
// through FUSE would cost a command, the alternative to the container
// executor's copy: the workspace commands over the same files on the
// host's own filesystem and through a FUSE loopback mount of them
// (go-fuse's passthrough to that directory, entry and attribute caches of
// 1 s, its server in a process of its own), each a process started for
// the command as a sandbox's command is. A loopback is about the
// cheapest FUSE server there is (its answers come from the host's page
// cache), so its cost over the plain directory is a floor for a FUSE
// projection of a workspace. A container adds nothing to it on runc (the
// same kernel mount); gVisor reaches a host mount through its gofer.
func (s *Suite) measureWorkspaceFUSE(ctx context.Context) []Comparison {
	const id, title = "workspace-fuse", "Workspace: the FUSE alternative, through a FUSE loopback vs the host's own files"
	var commands []struct{ id, title, script string }
	for _, c := range workspaceCommands {
		if c.id != "workspace-small" {
			commands = append(commands, c)
		}
	}
	fail := func(err error) []Comparison {
		var cs []Comparison
		for _, c := range commands {
			cs = append(cs, failedComparison(id+"-"+c.id[len("workspace-"):], title+": "+c.script, err, workspaceFUSENames...))
		}
		return cs
	}
	tmp, err := os.MkdirTemp("", "paddock-bench-fuse-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	native, mnt := filepath.Join(tmp, "files"), filepath.Join(tmp, "mnt")
	for _, d := range []string{native, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	seed := exec.CommandContext(ctx, "/bin/sh", "-c", workspaceSeed)
	seed.Dir = native
	if out, err := seed.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("seed the files: %v: %s", err, out))
	}
	server, err := startFUSELoopback(ctx, native, mnt)
	if err != nil {
		return fail(err)
	}
	defer server.stop()

	var out []Comparison
	for _, c := range commands {
		in := func(dir string) func(ctx context.Context) (time.Duration, error) {
			return func(ctx context.Context) (time.Duration, error) {
				return Timed(func() error {
					cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.script)
					cmd.Dir = dir
					if b, err := cmd.CombinedOutput(); err != nil {
						return fmt.Errorf("%s: %v: %s", c.script, err, b)
					}
					return nil
				})
			}
		}
		series := s.interleaveN(ctx, ItemWorkspace, []Variant{
			{Name: workspaceFUSENames[0], Run: in(mnt)},
			{Name: workspaceFUSENames[1], Run: in(native)},
		})
		note := fmt.Sprintf("`%s` over the %d files of the other workspace figures, on the host, through /bin/sh as a sandbox's command runs. The FUSE server is go-fuse's loopback in a process of its own, the files in the host's page cache; a FUSE projection of a workspace would answer the same lookups, opens and reads from the daemon's index and content cache instead, and would land a command's writes in the database besides.", c.script, workspaceFiles)
		out = append(out, NewComparison(id+"-"+c.id[len("workspace-"):], title+": "+c.script, note, series))
	}
	return out
}

// workspaceFUSEFigures set what a command pays for the container
// executor's copy (its p50 over an exec's, both in the sandbox) beside
// what FUSE adds to the same command (its p50 over the host's own
// directory), from the same run.
func workspaceFUSEFigures(cs []Comparison) []Figure {
	p50 := func(id, name string) (float64, bool) {
		for _, c := range cs {
			if c.ID != id {
				continue
			}
			for _, s := range c.Series {
				if s.Name == name && s.Summary.N > 0 {
					return s.Summary.P50ms, true
				}
			}
		}
		return 0, false
	}
	copyRun, ok1 := p50("workspace-container", "workspace run, container executor (SDK)")
	copyExec, ok2 := p50("workspace-container", "exec in a warm sandbox (SDK)")
	if !ok1 || !ok2 {
		return nil
	}
	copyCost := copyRun - copyExec
	var out []Figure
	for _, c := range []struct{ id, what string }{{"workspace-fuse-cat-wc", "cat | wc -l"}, {"workspace-fuse-grep", "grep -r"}, {"workspace-fuse-sed", "sed -i"}} {
		f, ok1 := p50(c.id, workspaceFUSENames[0])
		n, ok2 := p50(c.id, workspaceFUSENames[1])
		if !ok1 || !ok2 {
			continue
		}
		fig := Figure{
			ID: c.id + "-cost", Name: fmt.Sprintf("What FUSE adds to `%s` (p50 through the loopback less p50 on the host's directory)", c.what),
			Value: f - n, Unit: "ms", Baseline: "what the copy adds to a command (container executor p50 less exec p50, `cat | wc -l`)", BaseVal: copyCost,
		}
		if copyCost > 0 {
			fig.Ratio = (f - n) / copyCost
		}
		out = append(out, fig)
	}
	return out
}
