package workspace

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
)

// TestMain makes the test binary the js executor's child when started as
// one, as the daemon's binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == wjs.ChildArg {
		wjs.ChildMain()
	}
	os.Exit(m.Run())
}

// TestShellAndJSShareFiles: what one executor changes the next command on
// the other sees; each command is a version with its executor in the
// history; a stopped program lands nothing; auto never picks js.
func TestShellAndJSShareFiles(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, "")
	r := newWorkspace(t, s, "mixed", 0, 0)
	timeout := 10 * time.Second
	run := func(executor, script string, argv ...string) *api.WorkspaceRunResult {
		t.Helper()
		rec, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(ctx, RunSpec{Workspace: rec, Caller: "local", Executor: executor, Script: script, Command: script, Argv: argv, Timeout: timeout})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	if _, err := s.Run(ctx, RunSpec{Workspace: r, Executor: api.ExecutorJS, Script: "1", Timeout: time.Second}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("js without its child: %v", err)
	}
	s.JSCommand = []string{"/proc/self/exe", wjs.ChildArg}
	run(api.ExecutorShell, `mkdir conf && echo '{"replicas": 2}' > conf/app.json`)
	res := run(api.ExecutorJS, `const f = 'conf/app.json', c = JSON.parse(fs.readFileSync(f, 'utf8')); c.replicas *= 3; fs.writeFileSync(f, JSON.stringify(c) + '\n'); console.log(c.replicas)`)
	if res.Executor != api.ExecutorJS || res.Stdout != "6\n" || res.Version != 2 || len(res.Changes) != 1 || res.Changes[0].Path != "conf/app.json" {
		t.Fatalf("js: %+v", res)
	}
	if got := run("", "cat conf/app.json"); got.Stdout != "{\"replicas\":6}\n" || got.Executor != api.ExecutorShell {
		t.Fatalf("the shell reads %+v", got)
	}
	run(api.ExecutorShell, `echo 'console.log(process.argv.slice(2).join("+"), require("fs").readdirSync("."))' > main.js`)
	if got := run(api.ExecutorJS, "main.js a b", "main.js", "a", "b"); got.Stdout != "a+b [\"conf\",\"main.js\"]\n" || got.ExitCode != 0 {
		t.Fatalf("a program file: %+v", got)
	}
	rec, _ := s.Get(ctx, r.ID)
	timeout = time.Second
	if got := run(api.ExecutorJS, "fs.writeFileSync('late', 'x'); for (;;) {}"); got.Stopped != "timeout" || got.Version != rec.Head || got.ExitCode != 124 {
		t.Fatalf("a stopped program: %+v", got)
	}
	hist, err := s.Versions(ctx, r.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var executors []string
	for _, v := range hist {
		executors = append(executors, v.Executor)
	}
	if len(hist) != 3 || hist[1].Executor != api.ExecutorJS {
		t.Fatalf("history %v", executors)
	}
}
