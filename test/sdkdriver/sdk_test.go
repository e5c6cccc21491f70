//go:build sdkdriver

// Package sdkdriver drives the Go SDK against a daemon something else
// started: the Kubernetes suite (test/kubernetes) runs it against a daemon
// on its test cluster, with PADDOCK_SOCKET naming that daemon. It needs
// the build tag sdkdriver, so `go test ./...` leaves it out.
package sdkdriver_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// image is what the sandboxes run ($PADDOCK_SDK_IMAGE, default busybox).
func image() string {
	if v := os.Getenv("PADDOCK_SDK_IMAGE"); v != "" {
		return v
	}
	return "busybox"
}

func run(ctx context.Context, t *testing.T, c *paddock.Client, id string, opts paddock.ExecOptions) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Stdout, opts.Stderr = &out, &errOut
	res, err := c.Exec(ctx, id, opts)
	if err != nil {
		t.Fatalf("exec %q: %v", opts.Cmd, err)
	}
	return out.String(), errOut.String(), res.ExitCode
}

// TestGoSDKAgainstDaemon: create, exec (output, exit codes, stdin, env),
// files (write, read, stat, list, mkdir, move, remove, tar both ways), a
// shell session, a background process, stop and start keeping the home,
// a snapshot restored into a new sandbox, and delete.
func TestGoSDKAgainstDaemon(t *testing.T) {
	if os.Getenv(paddock.EnvSocket) == "" && os.Getenv(paddock.EnvURL) == "" {
		t.Fatalf("set %s (or %s) to the daemon to drive", paddock.EnvSocket, paddock.EnvURL)
	}
	c := &paddock.Client{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: image(), Env: map[string]string{"GREETING": "hello"}, Labels: map[string]string{"suite": "sdk"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sb.ID) })
	if sb.State != api.StateRunning {
		t.Fatalf("created sandbox is %s", sb.State)
	}
	id := sb.ID

	// Exec.
	if out, _, code := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"sh", "-c", `echo "$GREETING $EXTRA"`}, Env: map[string]string{"EXTRA": "there"}}); out != "hello there\n" || code != 0 {
		t.Errorf("exec with env: %q, exit %d", out, code)
	}
	if _, errOut, code := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo oops >&2; exit 3"}}); code != 3 || errOut != "oops\n" {
		t.Errorf("exec exit: %d, stderr %q", code, errOut)
	}
	if out, _, _ := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"cat"}, Stdin: strings.NewReader("piped")}); out != "piped" {
		t.Errorf("exec stdin: %q", out)
	}
	if _, _, code := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"no-such-command"}}); code != 127 {
		t.Errorf("a missing command exits %d, want 127", code)
	}

	// Files.
	home := "/home/user"
	if _, err := c.WriteFile(ctx, id, home+"/a.txt", strings.NewReader("alpha"), 0o640); err != nil {
		t.Fatalf("write: %v", err)
	}
	var got bytes.Buffer
	if err := c.ReadFile(ctx, id, home+"/a.txt", &got); err != nil || got.String() != "alpha" {
		t.Fatalf("read: %q, %v", got.String(), err)
	}
	if fi, err := c.Stat(ctx, id, home+"/a.txt"); err != nil || fi.Size != 5 {
		t.Errorf("stat: %+v, %v", fi, err)
	}
	if _, err := c.MakeDir(ctx, id, home+"/d"); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	if _, err := c.Move(ctx, id, home+"/a.txt", home+"/d/b.txt"); err != nil {
		t.Fatalf("move: %v", err)
	}
	list, err := c.ListDir(ctx, id, home+"/d")
	if err != nil || len(list) != 1 || list[0].Name != "b.txt" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	var tb bytes.Buffer
	if err := c.TarOut(ctx, id, home+"/d", &tb); err != nil {
		t.Fatalf("tar out: %v", err)
	}
	names := tarNames(t, tb.Bytes())
	if !strings.Contains(strings.Join(names, " "), "b.txt") {
		t.Errorf("tar out holds %v", names)
	}
	if err := c.TarIn(ctx, id, home+"/copy", bytes.NewReader(tb.Bytes())); err != nil {
		t.Fatalf("tar in: %v", err)
	}
	if out, _, _ := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"cat", home + "/copy/b.txt"}}); out != "alpha" {
		t.Errorf("a file through tar out and in: %q", out)
	}
	if err := c.Remove(ctx, id, home+"/copy"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := c.Stat(ctx, id, home+"/copy"); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("stat after remove: %v", err)
	}

	// A session keeps its directory; a process runs in the background.
	if _, err := c.CreateSession(ctx, id, api.CreateSessionRequest{Name: "work"}); err != nil {
		t.Fatalf("session: %v", err)
	}
	run(ctx, t, c, id, paddock.ExecOptions{Session: "work", Cmd: []string{"cd /tmp && export KEPT=yes"}})
	if out, _, _ := run(ctx, t, c, id, paddock.ExecOptions{Session: "work", Cmd: []string{"echo $(pwd) $KEPT"}}); out != "/tmp yes\n" {
		t.Errorf("session state: %q", out)
	}
	p, err := c.StartProcess(ctx, id, api.StartProcessRequest{ID: "sleeper", Cmd: []string{"sleep", "300"}})
	if err != nil {
		t.Fatalf("start process: %v", err)
	}
	if ps, err := c.ListProcesses(ctx, id); err != nil || len(ps) == 0 {
		t.Errorf("processes: %+v, %v", ps, err)
	}
	if _, err := c.KillProcess(ctx, id, p.ID, api.KillProcessRequest{Grace: "1s"}); err != nil {
		t.Errorf("kill process: %v", err)
	}

	// Stop and start keep the home.
	if sb, err = c.Stop(ctx, id); err != nil || sb.State != api.StateStopped {
		t.Fatalf("stop: %+v, %v", sb, err)
	}
	if sb, err = c.Start(ctx, id); err != nil || sb.State != api.StateRunning {
		t.Fatalf("start: %+v, %v", sb, err)
	}
	if out, _, _ := run(ctx, t, c, id, paddock.ExecOptions{Cmd: []string{"cat", home + "/d/b.txt"}}); out != "alpha" {
		t.Errorf("a home file after stop and start: %q", out)
	}

	// A snapshot restored into a new sandbox.
	snap, err := c.CreateSnapshot(ctx, id, api.CreateSnapshotRequest{TTL: "1h"})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSnapshot(context.Background(), snap.ID) })
	restored, err := c.Create(ctx, api.CreateSandboxRequest{FromSnapshot: snap.ID})
	if err != nil {
		t.Fatalf("create from the snapshot: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), restored.ID) })
	if out, _, _ := run(ctx, t, c, restored.ID, paddock.ExecOptions{Cmd: []string{"cat", home + "/d/b.txt"}}); out != "alpha" {
		t.Errorf("a home file in the restored sandbox: %q", out)
	}

	// Listing by label, then delete.
	if l, err := c.List(ctx, map[string]string{"suite": "sdk"}); err != nil || len(l) != 1 || l[0].ID != id {
		t.Errorf("list by label: %+v, %v", l, err)
	}
	for _, x := range []string{restored.ID, id} {
		if err := c.Delete(ctx, x); err != nil {
			t.Fatalf("delete %s: %v", x, err)
		}
		if _, err := c.Get(ctx, x); !errors.Is(err, paddock.ErrNotFound) {
			t.Errorf("get after delete: %v", err)
		}
	}
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		names = append(names, h.Name)
	}
}
