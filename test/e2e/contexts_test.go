package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// signalWriter records output and closes seen once want has appeared.
type signalWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestCodeContexts drives code contexts through the CLI and SDK on runc
// and gVisor: state kept between runs, an exception with its traceback
// (the context still works), a run that never ends (interrupted, the
// context still works), output streamed before the run ends, an
// interpreter that dies (reported, recreatable), and a stop that ends
// every context.
func TestCodeContexts(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			name := uniqueName("ctx")
			d.must("create", "--name", name, "--runtime", rt)
			py := func(code string, extra ...string) (string, string, int) {
				t.Helper()
				args := append([]string{"run-code", name, "--context", "c1", "--lang", "python"}, extra...)
				return d.run(append(args, code)...)
			}
			if out := d.must("run-code", name, "--context", "c1", "--lang", "python", "x = 41"); out != "" {
				t.Fatalf("assignment printed %q", out)
			}
			if out := d.must("run-code", name, "--context", "c1", "--lang", "python", "x + 1"); out != "42\n" {
				t.Fatalf("x + 1 printed %q, want 42", out)
			}

			out, errOut, code := py("def f():\n    raise ValueError('boom')\nprint('before')\nf()")
			if code != 1 || out != "before\n" || !strings.Contains(errOut, "Traceback") ||
				!strings.Contains(errOut, "in f") || !strings.Contains(errOut, "ValueError: boom") {
				t.Fatalf("exception: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			if out := d.must("run-code", name, "--context", "c1", "x"); out != "41\n" {
				t.Fatalf("after the exception x is %q", out)
			}

			// A run that never ends is interrupted at its timeout; the
			// interpreter survives with its state.
			_, errOut, code = py("while True: pass", "--timeout", "1s")
			if code != 124 || !strings.Contains(errOut, "timed out") || !strings.Contains(errOut, "KeyboardInterrupt") {
				t.Fatalf("never-ending run: exit %d, stderr %q", code, errOut)
			}
			if out := d.must("run-code", name, "--context", "c1", "x * 2"); out != "82\n" {
				t.Fatalf("after the timeout x * 2 is %q", out)
			}

			// A run's own variables reach it and are gone after it.
			if out := d.must("run-code", name, "--context", "c1", "-e", "RUN_VAR=v1", "import os\nos.environ['RUN_VAR']"); out != "'v1'\n" {
				t.Fatalf("run variable: %q", out)
			}
			if out := d.must("run-code", name, "--context", "c1", "'RUN_VAR' in os.environ"); out != "False\n" {
				t.Fatalf("run variable after its run: %q", out)
			}

			// Output reaches the caller while the run is still going: the
			// code waits for a file the test creates only after seeing it.
			w := &signalWriter{want: "first", seen: make(chan struct{})}
			done := make(chan error, 1)
			var res *paddock.RunCodeResult
			go func() {
				var err error
				res, err = d.client.RunCode(ctxT(t, 2*time.Minute), name, "c1",
					"import os, time\nprint('first')\nwhile not os.path.exists('/tmp/go'): time.sleep(0.05)\n{'a': [1, 2]}",
					paddock.RunCodeOptions{Stdout: w, Timeout: time.Minute})
				done <- err
			}()
			select {
			case <-w.seen:
			case err := <-done:
				t.Fatalf("run ended before its output was seen: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("output was not streamed before the run's end")
			}
			d.must("exec", name, "--", "touch", "/tmp/go")
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if m, ok := res.Main(); !ok || m.Data["application/json"] != `{"a": [1, 2]}` || res.Status != api.RunOK {
				t.Fatalf("streamed run: %+v", res)
			}

			list, err := d.client.ListContexts(ctxT(t, time.Minute), name)
			if err != nil || len(list) != 1 || list[0].ID != "c1" || list[0].State != "idle" || list[0].Language != api.LanguagePython {
				t.Fatalf("contexts: %+v, %v", list, err)
			}

			// An interpreter that dies is reported dead, refuses runs with a
			// clear message, and comes back after rm.
			_, errOut, code = py("import os; os._exit(3)")
			if code != 1 || !strings.Contains(errOut, "dead") {
				t.Fatalf("dying run: exit %d, stderr %q", code, errOut)
			}
			_, errOut, code = py("1")
			if code == 0 || !strings.Contains(errOut, "delete it and create it again") {
				t.Fatalf("run in a dead context: exit %d, stderr %q", code, errOut)
			}
			d.must("context", "rm", name, "c1")
			_, errOut, code = py("x")
			if code != 1 || !strings.Contains(errOut, "NameError") {
				t.Fatalf("recreated context still has x: exit %d, stderr %q", code, errOut)
			}

			// The base image has no node: a clear error, nothing installed.
			_, errOut, code = d.run("run-code", name, "--context", "js", "--lang", "javascript", "1 + 1")
			if code == 0 || !strings.Contains(errOut, "node not found in this image") {
				t.Fatalf("javascript without node: exit %d, stderr %q", code, errOut)
			}

			if rt == api.RuntimeRunc {
				// Contexts live in the sandbox's memory: a stop ends them.
				d.must("stop", name)
				d.must("start", name)
				if out := d.must("--json", "context", "ls", name); !strings.Contains(out, `"contexts": []`) && !strings.Contains(out, `"contexts":[]`) {
					t.Fatalf("contexts after a restart: %s", out)
				}
			}
			d.must("rm", name)
		})
	}

	t.Run("busybox", func(t *testing.T) {
		name := uniqueName("ctxbb")
		d.must("create", "--name", name, "--image", "busybox")
		_, errOut, code := d.run("run-code", name, "print(1)")
		if code == 0 || !strings.Contains(errOut, "python3 not found in this image") {
			t.Fatalf("busybox: exit %d, stderr %q", code, errOut)
		}
		d.must("rm", name)
	})
}
