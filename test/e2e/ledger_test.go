package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ledgerKinds lists the kinds of a sandbox's ledger in order.
func ledgerKinds(t *testing.T, d *daemon, ref string) ([]string, *api.Ledger) {
	t.Helper()
	out := d.must("ledger", ref, "--json")
	var l api.Ledger
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("ledger --json: %v\n%s", err, out)
	}
	var kinds []string
	for _, e := range l.Entries {
		kinds = append(kinds, e.Kind)
	}
	return kinds, &l
}

// TestLedger: what is done to a sandbox is recorded in order, with exec
// details and callers' entries, and the ledger outlives the sandbox.
func TestLedger(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	name := uniqueName("ledger")
	id := strings.TrimSpace(d.must("create", "--image", "busybox", "--name", name))
	if _, _, code := d.run("exec", name, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("exec exit code %d, want 3", code)
	}
	local := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(local, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("cp", local, name+":/home/user/f.txt")
	seq := strings.TrimSpace(d.must("ledger", "add", name, "--kind", "payment.sent", "--note", "charged card", "--data", "amount=12.50"))
	d.must("stop", name)
	d.must("start", name)
	d.must("rm", name)

	// Read by name and by id after the destroy.
	for _, ref := range []string{name, id} {
		kinds, l := ledgerKinds(t, d, ref)
		want := []string{"create", "exec", "file_write", "payment.sent", "stop", "start", "destroy"}
		if !slices.Equal(kinds, want) {
			t.Fatalf("ledger %s kinds = %v, want %v", ref, kinds, want)
		}
		if l.SandboxID != id {
			t.Fatalf("ledger %s is of %s, want %s", ref, l.SandboxID, id)
		}
		ex := l.Entries[1]
		if ex.ExitCode == nil || *ex.ExitCode != 3 || !slices.Equal(ex.Command, []string{"sh", "-c", "exit 3"}) || ex.Source != "paddock" {
			t.Fatalf("exec entry = %+v", ex)
		}
		if fw := l.Entries[2]; fw.Path != "/home/user/f.txt" || fw.Data["size_bytes"] != "5" {
			t.Fatalf("file_write entry = %+v", fw)
		}
		if c := l.Entries[3]; c.Source != "caller" || c.Note != "charged card" || c.Data["amount"] != "12.50" || fmt.Sprint(c.Seq) != seq {
			t.Fatalf("caller entry = %+v (add printed %s)", c, seq)
		}
		for i := 1; i < len(l.Entries); i++ {
			if l.Entries[i].Seq <= l.Entries[i-1].Seq || l.Entries[i].At.Before(l.Entries[i-1].At) {
				t.Fatalf("entries out of order: %+v", l.Entries)
			}
		}
	}
	// Callers may still record cleanup of external effects after a destroy.
	d.must("ledger", "add", id, "--kind", "refund.issued")
	// A new sandbox with the same name gets its own ledger.
	d.must("create", "--image", "busybox", "--name", name)
	if kinds, _ := ledgerKinds(t, d, name); !slices.Equal(kinds, []string{"create"}) {
		t.Fatalf("ledger of the new %s = %v, want [create]", name, kinds)
	}
	if kinds, _ := ledgerKinds(t, d, id); kinds[len(kinds)-1] != "refund.issued" {
		t.Fatalf("ledger of the old id = %v, want refund.issued last", kinds)
	}

	// Bad input.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ledger", "add", name, "--kind", "Bad Kind"}, "kind"},
		{[]string{"ledger", "add", name, "--kind", "exec"}, "recorded by paddock itself"},
		{[]string{"ledger", "add", name, "--kind", "egress_refused"}, "recorded by paddock itself"},
		{[]string{"ledger", "add", name, "--kind", "network_grant"}, "recorded by paddock itself"},
		{[]string{"ledger", "add", name, "--kind", "x", "--note", strings.Repeat("n", 5000)}, "note"},
		{[]string{"ledger", "no-such-sandbox"}, "not found"},
	} {
		_, errOut, code := d.run(c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("paddock %v: exit %d, stderr %q; want an error saying %q", c.args, code, errOut, c.want)
		}
	}
}

// TestBackups: a directory with excludes is archived, restored into the
// same and another sandbox (runc and gVisor), outlives its sandbox, and a
// corrupt archive is refused before anything is written.
func TestBackups(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			src := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: rt})
			if out, code := execOut(t, d, src.ID, "sh", "-c", `set -e; cd /home/user; mkdir -p p/src p/node_modules/dep p/build/cache p/keep/build
				echo one > p/src/a.txt; echo log > p/src/x.log; echo dep > p/node_modules/dep/i.js
				echo c > p/build/cache/c; echo k > p/keep/build/k; ln -s src/a.txt p/link; chmod 0750 p/src`); code != 0 {
				t.Fatalf("setup: %s", out)
			}
			bkID := strings.TrimSpace(d.must("backup", "create", src.ID, "/home/user/p",
				"--exclude", "node_modules", "--exclude", "*.log", "--exclude", "build/cache", "--ttl", "72h"))
			bk, err := d.client.GetBackup(ctx, bkID)
			if err != nil {
				t.Fatal(err)
			}
			if bk.SandboxID != src.ID || bk.Path != "/home/user/p" || bk.SizeBytes <= 0 || len(bk.SHA256) != 64 || bk.Storage != "local" || bk.ExpiresAt == nil {
				t.Fatalf("backup = %+v", bk)
			}
			if !strings.Contains(d.must("backup", "ls", "--sandbox", src.ID), bkID) {
				t.Fatal("backup ls --sandbox does not list the backup")
			}

			// Into another sandbox, at another path.
			dst := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: rt})
			d.must("backup", "restore", bkID, dst.ID, "--path", "/home/user/q")
			listing, _ := execOut(t, d, dst.ID, "sh", "-c", "cd /home/user/q && find . | sort && cat src/a.txt && readlink link && stat -c %a src")
			want := ". ./build ./keep ./keep/build ./keep/build/k ./link ./src ./src/a.txt one src/a.txt 750"
			if got := strings.Join(strings.Fields(listing), " "); got != want {
				t.Fatalf("restored tree:\n%s\nwant %s", got, want)
			}
			// Into the same sandbox, over a damaged tree, after the source is gone.
			execOut(t, d, src.ID, "sh", "-c", "rm -rf /home/user/p/src")
			d.must("backup", "restore", bkID, src.ID)
			if out, _ := execOut(t, d, src.ID, "cat", "/home/user/p/src/a.txt"); out != "one\n" {
				t.Fatalf("restore into the same sandbox: %q", out)
			}
			if kinds, _ := ledgerKinds(t, d, src.ID); !slices.Contains(kinds, "backup") || !slices.Contains(kinds, "backup_restore") {
				t.Fatalf("ledger kinds %v lack backup and backup_restore", kinds)
			}
			d.must("rm", src.ID)
			if !strings.Contains(d.must("backup", "ls"), bkID) {
				t.Fatal("the backup did not outlive its sandbox")
			}

			// A corrupted archive is refused and writes nothing.
			archive := filepath.Join(d.stateDir, "backups", bkID+".tar.gz")
			data, err := os.ReadFile(archive)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xff
			if err := os.WriteFile(archive, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = d.client.RestoreBackup(ctx, bkID, api.RestoreBackupRequest{Sandbox: dst.ID, Path: "/home/user/corrupt"})
			if !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("restore of a corrupt backup: %v, want failed precondition saying corrupt", err)
			}
			if _, code := execOut(t, d, dst.ID, "test", "-e", "/home/user/corrupt"); code == 0 {
				t.Fatal("a corrupt backup wrote files")
			}
			d.must("backup", "rm", bkID)
			if _, err := os.Stat(archive); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("backup rm left the archive: %v", err)
			}
			if _, err := d.client.GetBackup(ctx, bkID); !errors.Is(err, paddock.ErrNotFound) {
				t.Fatalf("get after rm: %v", err)
			}
		})
	}

	t.Run("expiry", func(t *testing.T) {
		sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
		execOut(t, d, sb.ID, "mkdir", "-p", "/home/user/e")
		id := strings.TrimSpace(d.must("backup", "create", sb.ID, "/home/user/e", "--ttl", "1s"))
		time.Sleep(1500 * time.Millisecond)
		if strings.Contains(d.must("backup", "ls"), id) {
			t.Fatal("an expired backup is listed")
		}
		if _, err := os.Stat(filepath.Join(d.stateDir, "backups", id+".tar.gz")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an expired backup's archive is still on disk: %v", err)
		}
		if _, _, code := d.run("backup", "restore", id, sb.ID); code == 0 {
			t.Fatal("an expired backup was restored")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"backup", "create", sb.ID, "/home/user", "--exclude", "[bad"}, "not a valid glob"},
			{[]string{"backup", "create", sb.ID, "/home/user", "--exclude", "/abs"}, "relative"},
			{[]string{"backup", "create", sb.ID, "/home/user", "--ttl", "soon"}, "ttl"},
			{[]string{"backup", "create", sb.ID, "/no/such/dir"}, "no such"},
			{[]string{"backup", "create", "no-such-sandbox", "/home/user"}, "not found"},
			{[]string{"backup", "restore", "bk00000000000000000000", sb.ID}, "not found"},
			{[]string{"backup", "restore", "../../etc", sb.ID}, "not a backup id"},
		} {
			_, errOut, code := d.run(c.args...)
			if code == 0 || !strings.Contains(strings.ToLower(errOut), c.want) {
				t.Errorf("paddock %v: exit %d, stderr %q; want an error saying %q", c.args, code, errOut, c.want)
			}
		}
	})
}

// rawPost sends a POST with an Idempotency-Key over the daemon's socket and
// returns the status, the replay header and the body.
func rawPost(t *testing.T, d *daemon, path, key, body string) (int, string, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	req, _ := http.NewRequestWithContext(ctxT(t, 2*time.Minute), http.MethodPost, "http://paddock"+path, strings.NewReader(body))
	req.Header.Set(api.IdempotencyKeyHeader, key)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get(api.IdempotentReplayHeader), b.Bytes()
}

// TestIdempotencyKey: a retried create with the same key creates one
// sandbox, also when the retries race and after a daemon restart; a key
// reused for another request is refused; an exec runs once and is replayed.
func TestIdempotencyKey(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	key := fmt.Sprintf("create-%d", time.Now().UnixNano())
	kctx := paddock.WithIdempotencyKey(ctx, key)
	req := api.CreateSandboxRequest{Image: "busybox", Labels: map[string]string{"idem": key[7:]}}

	// Three concurrent attempts: one sandbox, the same answer for all.
	var wg sync.WaitGroup
	ids := make([]string, 3)
	errs := make([]error, 3)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := d.client.Create(kctx, req)
			errs[i] = err
			if sb != nil {
				ids[i] = sb.ID
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("concurrent creates with one key: ids %v errs %v", ids, errs)
		}
	}
	count := func() int {
		list, err := d.client.List(ctx, req.Labels)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d sandboxes after three creates with one key, want 1", n)
	}
	// The same key on a different request.
	status, _, body := rawPost(t, d, "/v1/sandboxes", key, `{"image":"busybox","name":"other"}`)
	if status != http.StatusConflict || !strings.Contains(string(body), "different request") {
		t.Fatalf("reused key: %d %s", status, body)
	}
	// After a restart the first answer is still the answer.
	d.stop()
	d.start()
	sb, err := d.client.Create(kctx, req)
	if err != nil || sb.ID != ids[0] {
		t.Fatalf("create after restart: %v, id %v want %s", err, sb, ids[0])
	}
	if n := count(); n != 1 {
		t.Fatalf("%d sandboxes after a retry across a restart, want 1", n)
	}

	// An exec runs once; its retry replays the same stream.
	execBody := `{"cmd":["sh","-c","echo run >> /home/user/runs; wc -l < /home/user/runs"]}`
	path := "/v1/sandboxes/" + ids[0] + "/exec"
	s1, r1, b1 := rawPost(t, d, path, "exec-1", execBody)
	s2, r2, b2 := rawPost(t, d, path, "exec-1", execBody)
	if s1 != 200 || s2 != 200 || r1 != "" || r2 != "true" || !bytes.Equal(b1, b2) {
		t.Fatalf("exec and its retry: %d %q %s / %d %q %s", s1, r1, b1, s2, r2, b2)
	}
	if out, _ := execOut(t, d, ids[0], "cat", "/home/user/runs"); out != "run\n" {
		t.Fatalf("the exec ran %d times, want once", strings.Count(out, "run"))
	}

	// A call cut by a daemon kill: its retry is told the outcome is unknown
	// and does not run it again.
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := d.client.Exec(paddock.WithIdempotencyKey(ctx, "exec-killed"), ids[0], paddock.ExecOptions{
			Cmd:    []string{"sh", "-c", "echo started; echo x >> /home/user/killed; sleep 20"},
			Stdout: writerFunc(func(p []byte) { once.Do(func() { close(started) }) }),
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("exec ended before it started: %v", err)
	}
	d.kill9()
	<-done
	d.start()
	_, err = d.client.Exec(paddock.WithIdempotencyKey(ctx, "exec-killed"), ids[0], paddock.ExecOptions{
		Cmd: []string{"sh", "-c", "echo started; echo x >> /home/user/killed; sleep 20"},
	})
	if !errors.Is(err, paddock.ErrConflict) || !strings.Contains(err.Error(), "outcome is unknown") {
		t.Fatalf("retry of a call cut by a daemon kill: %v, want conflict saying the outcome is unknown", err)
	}
	if out, _ := execOut(t, d, ids[0], "cat", "/home/user/killed"); out != "x\n" {
		t.Fatalf("the cut exec ran again: %q", out)
	}

	// Bad keys and refused routes.
	for _, c := range []struct{ path, key, body, want string }{
		{"/v1/sandboxes", strings.Repeat("k", 256), `{"image":"busybox"}`, "1-255"},
		{"/v1/sandboxes", "has space", `{"image":"busybox"}`, "visible ASCII"},
		{"/v1/keys", "key-1", `{"name":"x"}`, "secret"},
	} {
		status, _, body := rawPost(t, d, c.path, c.key, c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("POST %s with key %.20q: %d %s; want 400 saying %q", c.path, c.key, status, body, c.want)
		}
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
