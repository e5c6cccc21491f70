package client_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

type runOut struct {
	stdout, stderr string
	results        []*agentv1.RunCodeEvent_Result
	errs           []*agentv1.RunCodeEvent_Error
	end            *agentv1.RunCodeEvent_End
	// outBeforeEnd counts output events seen before the end event.
	outBeforeEnd int
}

func (o runOut) main() string {
	for _, r := range o.results {
		if r.GetIsMain() {
			return r.GetData()["text/plain"]
		}
	}
	return ""
}

func runCode(t *testing.T, e *env, id, code string, timeout time.Duration, vars map[string]string) runOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var o runOut
	end, err := e.c.RunCode(ctx, &agentv1.RunCodeRequest{Context: id, Code: code, TimeoutMs: timeout.Milliseconds(), Env: vars}, func(ev *agentv1.RunCodeEvent) error {
		switch {
		case ev.GetStdout() != nil:
			o.stdout += string(ev.GetStdout())
			o.outBeforeEnd++
		case ev.GetStderr() != nil:
			o.stderr += string(ev.GetStderr())
			o.outBeforeEnd++
		case ev.GetResult() != nil:
			o.results = append(o.results, ev.GetResult())
		case ev.GetError() != nil:
			o.errs = append(o.errs, ev.GetError())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	o.end = end
	return o
}

func TestCodeContexts(t *testing.T) {
	type step struct {
		code    string
		timeout time.Duration
		env     map[string]string // for this run only
		check   func(t *testing.T, o runOut)
	}
	mainIs := func(want string) func(*testing.T, runOut) {
		return func(t *testing.T, o runOut) {
			t.Helper()
			if o.main() != want || o.end.GetStatus() != "ok" {
				t.Fatalf("main result %q status %q (errors %v), want %q", o.main(), o.end.GetStatus(), o.errs, want)
			}
		}
	}
	tests := []struct {
		lang, bin string
		steps     []step
	}{
		{"python", "python3", []step{
			{code: "x = 41", check: func(t *testing.T, o runOut) {
				if len(o.results) != 0 || o.end.GetStatus() != "ok" {
					t.Fatalf("assignment gave %v, %v", o.results, o.end)
				}
			}},
			{code: "x + 1", check: mainIs("42")},
			{code: "import sys\nprint('out'); print('err', file=sys.stderr)\n{'a': [1, 2]}", check: func(t *testing.T, o runOut) {
				if o.stdout != "out\n" || o.stderr != "err\n" {
					t.Fatalf("stdout %q stderr %q", o.stdout, o.stderr)
				}
				var main *agentv1.RunCodeEvent_Result
				for _, r := range o.results {
					if r.GetIsMain() {
						main = r
					}
				}
				if main == nil || main.GetData()["application/json"] != `{"a": [1, 2]}` {
					t.Fatalf("results %v", o.results)
				}
			}},
			// A user printing what looks like a control message changes nothing.
			{code: `print('{"type": "done", "status": "ok"}'); 7`, check: mainIs("7")},
			{code: "def f():\n    raise ValueError('boom')\nf()", check: func(t *testing.T, o runOut) {
				if len(o.errs) != 1 || o.errs[0].GetName() != "ValueError" || o.errs[0].GetValue() != "boom" ||
					!strings.Contains(o.errs[0].GetTraceback(), "in f") || o.end.GetStatus() != "error" {
					t.Fatalf("errors %v end %v", o.errs, o.end)
				}
			}},
			{code: "x", check: mainIs("41")},
			{code: "import os, subprocess\nsubprocess.run(['echo', 'child'])\nNone", check: func(t *testing.T, o runOut) {
				if o.stdout != "child\n" {
					t.Fatalf("child output %q", o.stdout)
				}
			}},
			{code: "while True: pass", timeout: 300 * time.Millisecond, check: func(t *testing.T, o runOut) {
				if !o.end.GetTimedOut() || o.end.GetContextDead() || len(o.errs) != 1 || o.errs[0].GetName() != "KeyboardInterrupt" {
					t.Fatalf("timeout run: errors %v end %v", o.errs, o.end)
				}
			}},
			{code: "x * 2", check: mainIs("82")},
			// A run's variables reach the code and its children, and are
			// gone (or back to their old values) after it.
			{code: "import os\nhome = os.environ['HOME']\nNone", check: mainIs("")},
			{code: "subprocess.run(['sh', '-c', 'echo $RUN_VAR'])\n(os.environ['RUN_VAR'], os.environ['HOME'])",
				env: map[string]string{"RUN_VAR": "v1", "HOME": "/tmp"}, check: func(t *testing.T, o runOut) {
					if o.stdout != "v1\n" || o.main() != "('v1', '/tmp')" {
						t.Fatalf("stdout %q main %q errors %v", o.stdout, o.main(), o.errs)
					}
				}},
			{code: "'RUN_VAR' not in os.environ and os.environ['HOME'] == home", check: mainIs("True")},
			{code: "class P:\n    def _repr_svg_(self): return '<svg/>'\nP()", check: func(t *testing.T, o runOut) {
				if len(o.results) != 1 || o.results[0].GetData()["image/svg+xml"] != "<svg/>" {
					t.Fatalf("results %v", o.results)
				}
			}},
			{code: "1 +", check: func(t *testing.T, o runOut) {
				if len(o.errs) != 1 || o.errs[0].GetName() != "SyntaxError" {
					t.Fatalf("errors %v", o.errs)
				}
			}},
			{code: "import os; os._exit(3)", check: func(t *testing.T, o runOut) {
				if !o.end.GetContextDead() || !strings.Contains(o.end.GetNote(), "exit status 3") {
					t.Fatalf("end %v", o.end)
				}
			}},
		}},
		{"javascript", "node", []step{
			{code: "var x = 41", check: func(t *testing.T, o runOut) {
				if o.end.GetStatus() != "ok" {
					t.Fatalf("end %v errors %v", o.end, o.errs)
				}
			}},
			{code: "x + 1", check: mainIs("42")},
			{code: "console.log('out'); console.error('err'); ({a: [1, 2]})", check: func(t *testing.T, o runOut) {
				if o.stdout != "out\n" || o.stderr != "err\n" || len(o.results) != 1 || o.results[0].GetData()["application/json"] != `{"a":[1,2]}` {
					t.Fatalf("stdout %q stderr %q results %v", o.stdout, o.stderr, o.results)
				}
			}},
			{code: "await new Promise(r => setTimeout(() => r(5), 10))", check: func(t *testing.T, o runOut) {
				// Top-level await is not JavaScript in a script; the error
				// must come back as an error event.
				if len(o.errs) != 1 || o.errs[0].GetName() != "SyntaxError" {
					t.Fatalf("errors %v", o.errs)
				}
			}},
			{code: "new Promise(r => setTimeout(() => r(5), 10))", check: mainIs("5")},
			{code: "function f() { throw new TypeError('boom') }\nf()", check: func(t *testing.T, o runOut) {
				if len(o.errs) != 1 || o.errs[0].GetName() != "TypeError" || !strings.Contains(o.errs[0].GetTraceback(), "at f") {
					t.Fatalf("errors %v", o.errs)
				}
			}},
			{code: "while (true) {}", timeout: 300 * time.Millisecond, check: func(t *testing.T, o runOut) {
				if !o.end.GetTimedOut() || o.end.GetContextDead() || len(o.errs) != 1 {
					t.Fatalf("timeout run: errors %v end %v", o.errs, o.end)
				}
			}},
			{code: "x", check: mainIs("41")},
			{code: "var home = process.env.HOME", check: mainIs("")},
			{code: "[process.env.RUN_VAR, process.env.HOME]", env: map[string]string{"RUN_VAR": "v1", "HOME": "/tmp"}, check: mainIs("[ 'v1', '/tmp' ]")},
			{code: "process.env.RUN_VAR === undefined && process.env.HOME === home", check: mainIs("true")},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.lang, func(t *testing.T) {
			if _, err := exec.LookPath(tc.bin); err != nil {
				t.Skipf("%s is not installed on this host", tc.bin)
			}
			e := newEnv(t)
			ctx := context.Background()
			info, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "c1", Language: tc.lang})
			if err != nil {
				t.Fatal(err)
			}
			if info.GetState() != "idle" || info.GetPid() == 0 {
				t.Fatalf("created %v", info)
			}
			for i, s := range tc.steps {
				o := runCode(t, e, "c1", s.code, s.timeout, s.env)
				t.Logf("step %d %q: %v", i, s.code, o.end)
				s.check(t, o)
			}
		})
	}
}

func TestCodeContextErrors(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "c1"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"duplicate", func() error {
			_, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "c1"})
			return err
		}, errdefs.ErrConflict},
		{"bad id", func() error {
			_, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "../x"})
			return err
		}, errdefs.ErrInvalidArgument},
		{"bad language", func() error {
			_, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "c2", Language: "cobol"})
			return err
		}, errdefs.ErrInvalidArgument},
		{"no interpreter", func() error {
			_, err := e.c.CreateContext(ctx, &agentv1.CreateContextRequest{Id: "c3", Env: map[string]string{"PATH": "/nonexistent"}})
			if err != nil && !strings.Contains(err.Error(), "python3 not found in this image") {
				t.Errorf("message: %v", err)
			}
			return err
		}, errdefs.ErrFailedPrecondition},
		{"missing context", func() error {
			_, err := e.c.RunCode(ctx, &agentv1.RunCodeRequest{Context: "nope", Code: "1"}, func(*agentv1.RunCodeEvent) error { return nil })
			return err
		}, errdefs.ErrNotFound},
		{"code too large", func() error {
			_, err := e.c.RunCode(ctx, &agentv1.RunCodeRequest{Context: "c1", Code: strings.Repeat("#", 2<<20)}, func(*agentv1.RunCodeEvent) error { return nil })
			return err
		}, errdefs.ErrInvalidArgument},
		{"bad run variable", func() error {
			_, err := e.c.RunCode(ctx, &agentv1.RunCodeRequest{Context: "c1", Code: "1", Env: map[string]string{"A=B": "x"}}, func(*agentv1.RunCodeEvent) error { return nil })
			return err
		}, errdefs.ErrInvalidArgument},
		{"delete missing", func() error { return e.c.DeleteContext(ctx, "nope") }, errdefs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if err := e.c.DeleteContext(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if list, err := e.c.ListContexts(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after delete: %v %v", list, err)
	}
}
