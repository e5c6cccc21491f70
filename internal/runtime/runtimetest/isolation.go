package runtimetest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// result is what one command run through the agent did.
type result struct {
	stdout, stderr string
	exitCode       int
	// killed is set when a signal ended the process.
	killed bool
}

func (r result) String() string {
	return fmt.Sprintf("exit %d (killed %v), stdout %q, stderr %q", r.exitCode, r.killed, truncate(r.stdout), truncate(r.stderr))
}

func truncate(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// ok runs cmd and fails the test unless it exits 0; it returns stdout.
func (e *execer) ok(ctx context.Context, t *testing.T, user string, cmd ...string) string {
	t.Helper()
	res, err := e.run(ctx, user, cmd...)
	if err != nil {
		t.Fatalf("exec %q as %s: %v", cmd, user, err)
	}
	if res.exitCode != 0 || res.killed {
		t.Fatalf("exec %q as %s: %s", cmd, user, res)
	}
	return res.stdout
}

func (s *suite) testIsolation(t *testing.T) {
	b := s.newBackend(t)
	ctx := ctxFor(t, 3*time.Minute)
	id := NewID(t)
	info := s.start(ctx, t, b, s.spec(id))
	ex := newExecer(t, info.AgentSocket)
	run := func(t *testing.T, user string, cmd ...string) result {
		t.Helper()
		res, err := ex.run(ctx, user, cmd...)
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return res
	}

	t.Run("DefaultUser", func(t *testing.T) {
		if out := ex.ok(ctx, t, "", "id", "-u"); strings.TrimSpace(out) != "1000" {
			t.Errorf("default uid = %q, want 1000", out)
		}
	})
	t.Run("UserNamespace", func(t *testing.T) {
		out := strings.Fields(ex.ok(ctx, t, "root", "cat", "/proc/self/uid_map"))
		mapped := len(out) == 3 && out[0] == "0" && out[1] != "0" && out[2] == "65536"
		if !s.opts.UserNamespace {
			// Without one, root is the host's (or gVisor's own kernel's)
			// and no range is set.
			mapped = !mapped
		}
		if !mapped {
			t.Errorf("uid_map %q, user namespace expected: %v", out, s.opts.UserNamespace)
		}
	})
	t.Run("LoopbackOnly", func(t *testing.T) {
		out := ex.ok(ctx, t, "user", "cat", "/proc/net/dev")
		for _, line := range strings.Split(out, "\n") {
			name, _, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if name = strings.TrimSpace(name); name != "lo" {
				t.Errorf("network interface %q present; want only lo\n%s", name, out)
			}
		}
	})
	t.Run("MaskedPaths", func(t *testing.T) {
		// Masked files read as /dev/null and masked dirs are empty;
		// paths this kernel (or gVisor) lacks are skipped by the script.
		script := `for f in /proc/kcore /proc/timer_list /proc/keys; do
  [ -e $f ] && echo "$f=$(cat $f 2>/dev/null | wc -c)"
done
for d in /sys/firmware /proc/scsi /proc/acpi; do
  [ -d $d ] && echo "$d=$(ls -A $d | wc -l)"
done; true`
		out := ex.ok(ctx, t, "root", "sh", "-c", script)
		for _, line := range strings.Fields(out) {
			if !strings.HasSuffix(line, "=0") {
				t.Errorf("%s: want it masked (empty)", line)
			}
		}
		t.Logf("masked paths seen: %q", out)
	})
	t.Run("SeccompAndRlimits", func(t *testing.T) {
		out := ex.ok(ctx, t, "user", "sh", "-c", "grep '^Seccomp:' /proc/self/status; ulimit -c; ulimit -n")
		f := strings.Fields(out)
		if len(f) != 4 || f[1] != "2" {
			t.Fatalf("want a seccomp filter (mode 2), core and nofile limits; got %q", out)
		}
		if f[2] != "0" {
			t.Errorf("core dump limit %s, want 0", f[2])
		}
		var nofile int
		fmt.Sscan(f[3], &nofile)
		if nofile <= 0 || nofile > 65536 {
			t.Errorf("open files limit %s, want 1..65536", f[3])
		}
	})
	t.Run("SandboxEnv", func(t *testing.T) {
		if out := ex.ok(ctx, t, "user", "sh", "-c", "echo $PADDOCK_TEST"); strings.TrimSpace(out) != "1" {
			t.Errorf("PADDOCK_TEST from Spec.Env reads %q inside, want 1", out)
		}
	})
	t.Run("CannotMount", func(t *testing.T) {
		res := run(t, "root", "sh", "-c", "mkdir -p /mnt/x && mount -t tmpfs none /mnt/x")
		if res.exitCode == 0 && !res.killed {
			t.Errorf("root in the sandbox mounted a tmpfs: %s", res)
			run(t, "root", "umount", "/mnt/x")
		}
	})
	t.Run("NoNewNamespaces", func(t *testing.T) {
		// A user namespace needs no capability, so only the seccomp
		// filter stands in the way here.
		res := run(t, "user", "unshare", "-U", "-r", "true")
		if res.exitCode == 0 && !res.killed {
			t.Errorf("an unprivileged user created a user namespace: %s", res)
		}
	})
	t.Run("DiskFull", func(t *testing.T) {
		res := run(t, "user", "dd", "if=/dev/zero", "of=/home/user/fill", "bs=1M")
		if res.exitCode == 0 || !strings.Contains(res.stderr, "No space left on device") {
			t.Fatalf("filling the disk: %s; want a failure with ENOSPC", res)
		}
		out := ex.ok(ctx, t, "user", "sh", "-c", "wc -c < /home/user/fill")
		var n int64
		fmt.Sscan(strings.TrimSpace(out), &n)
		if n <= 0 || n > s.opts.Resources.DiskBytes {
			t.Errorf("wrote %d bytes before ENOSPC; want 0 < n <= %d", n, s.opts.Resources.DiskBytes)
		}
		ex.ok(ctx, t, "user", "rm", "/home/user/fill")
		ex.ok(ctx, t, "user", "sh", "-c", "echo after > /home/user/after")
		s.waitHealthy(ctx, t, info.AgentSocket)
	})
	t.Run("PidsLimit", func(t *testing.T) {
		if s.opts.Resources.Pids < 4 {
			t.Fatalf("suite needs a pids limit of at least 4, have %d", s.opts.Resources.Pids)
		}
		// The loop is bounded, and ash gives up at the first failed
		// fork, so the pids go to a file as they start, from an inner
		// shell. The children sleep long enough to be alive together
		// even on a loaded machine (with 2 s, 256 slow forks outlived the
		// first children and no fork failed); the outer shell then ends
		// them with builtins only, which need no fork at the limit.
		spawn := func(n int64) (started int64, res result) {
			t.Helper()
			script := fmt.Sprintf(`rm -f /tmp/spawned
sh -c 'i=0; while [ $i -lt %d ]; do sleep 120 & echo $! >> /tmp/spawned; i=$((i+1)); done'
rc=$?; while read p; do kill $p; done < /tmp/spawned; exit $rc`, n)
			res = run(t, "user", "sh", "-c", script)
			time.Sleep(time.Second) // the killed children are reaped
			out := ex.ok(ctx, t, "user", "sh", "-c", "wc -l < /tmp/spawned; rm /tmp/spawned")
			fmt.Sscan(strings.TrimSpace(out), &started)
			return started, res
		}
		// Within the limit everything starts and the sandbox lives on.
		half := s.opts.Resources.Pids / 2
		if started, res := spawn(half); started != half || res.exitCode != 0 {
			t.Fatalf("started %d of %d processes under a limit of %d: %s", started, half, s.opts.Resources.Pids, res)
		}
		s.waitHealthy(ctx, t, info.AgentSocket)
		if s.opts.SandboxWideLimits && !s.opts.TasksLimitInside {
			t.Log("process limit is a host-side backstop for the whole sandbox; not checked from inside")
			return
		}
		// Twice the limit: forks must fail.
		n := s.opts.Resources.Pids * 2
		started, res := spawn(n)
		if started <= 0 || started >= n || !strings.Contains(res.stderr, "fork") {
			t.Errorf("started %d of %d processes with a pids limit of %d: %s", started, n, s.opts.Resources.Pids, res)
		}
		s.waitHealthy(ctx, t, info.AgentSocket)
	})
	t.Run("MemoryLimit", func(t *testing.T) {
		s.testMemoryHog(ctx, t, b)
	})
}

// checkLayer exports a stopped sandbox's writable layer, which must hold
// a file written by the user and a whiteout for a file deleted from the
// image.
func checkLayer(ctx context.Context, t *testing.T, le runtime.LayerExporter, id string) {
	t.Helper()
	var buf bytes.Buffer
	if err := le.ExportLayer(ctx, id, &buf); err != nil {
		t.Fatalf("ExportLayer: %v", err)
	}
	tr := tar.NewReader(&buf)
	names := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ExportLayer wrote a bad tar: %v", err)
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "..") {
			t.Errorf("unsafe name in layer tar: %q", h.Name)
		}
		names[h.Name] = h
	}
	if h := names["home/user/keep"]; h == nil || h.Size != int64(len("kept\n")) || h.Uid != 1000 {
		t.Errorf("layer lacks home/user/keep owned by 1000 (got %+v); entries: %v", h, keys(names))
	}
	if names["etc/.wh.hostname"] == nil {
		t.Errorf("layer lacks the whiteout etc/.wh.hostname; entries: %v", keys(names))
	}
}

func keys(m map[string]*tar.Header) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// testMemoryHog runs a process that needs twice the memory limit in a
// sandbox of its own: it must not succeed. Where limits are per process
// the sandbox lives on; where they are sandbox-wide it may end.
func (s *suite) testMemoryHog(ctx context.Context, t *testing.T, b runtime.Backend) {
	id := NewID(t)
	info := s.start(ctx, t, b, s.spec(id))
	ex := newExecer(t, info.AgentSocket)
	// dd fills a buffer of bs bytes: twice the limit cannot fit.
	bs := fmt.Sprintf("bs=%d", s.opts.Resources.MemoryBytes*2)
	hctx, cancel := context.WithTimeout(ctx, Scaled(60*time.Second))
	defer cancel()
	res, err := ex.run(hctx, "user", "dd", "if=/dev/zero", "of=/dev/null", bs, "count=1")
	if err == nil && res.exitCode == 0 && !res.killed {
		t.Fatalf("allocating twice the memory limit succeeded: %s", res)
	}
	st, serr := b.Status(ctx, id)
	if s.opts.SandboxWideLimits {
		t.Logf("memory hog: %v, %v; sandbox afterwards: %s, %v", res, err, st, serr)
		return
	}
	if err != nil {
		t.Fatalf("memory hog: the exec itself failed (%v): the limit should kill the process, not the sandbox", err)
	}
	if !res.killed {
		t.Errorf("memory hog ended with %s; want it killed", res)
	}
	if st != runtime.StatusRunning {
		t.Fatalf("sandbox is %s after its memory hog was killed; want running (%v)", st, serr)
	}
	s.waitHealthy(ctx, t, info.AgentSocket)
}
