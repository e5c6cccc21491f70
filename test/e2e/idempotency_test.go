package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

type rawResp struct {
	status int
	replay string
	body   []byte
}

// rawDo sends one request with an Idempotency-Key ("" for none) over the
// daemon's socket.
func rawDo(t *testing.T, d *daemon, method, path, key string, body []byte) rawResp {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	req, err := http.NewRequestWithContext(ctxT(t, 3*time.Minute), method, "http://paddock"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(api.IdempotencyKeyHeader, key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return rawResp{resp.StatusCode, resp.Header.Get(api.IdempotentReplayHeader), b.Bytes()}
}

// TestIdempotencyKeyRoutes: on every mutating route whose side effect a
// retry would repeat, the same key twice returns the first response
// (status and body) and the side effect happens once; the same key with
// another body is refused, saying so.
func TestIdempotencyKeyRoutes(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 10*time.Minute)
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	life := create(t, d, api.CreateSandboxRequest{Image: "busybox"}) // for stop, start, pause, resume
	kinds := func(id, kind string) func(t *testing.T) int {
		return func(t *testing.T) int { return len(ledgerEntries(t, d, id, kind)) }
	}
	cases := []struct {
		name         string
		method, path string
		body, other  string
		count        func(t *testing.T) int
	}{
		{"process start", "POST", "/v1/sandboxes/" + sb.ID + "/processes", `{"cmd":["sleep","600"]}`, `{"cmd":["sleep","601"]}`,
			func(t *testing.T) int {
				ps, err := d.client.ListProcesses(ctx, sb.ID)
				if err != nil {
					t.Fatal(err)
				}
				return len(ps)
			}},
		{"session create", "POST", "/v1/sandboxes/" + sb.ID + "/sessions", `{"name":"idem-s"}`, `{"name":"idem-t"}`,
			func(t *testing.T) int {
				ss, err := d.client.ListSessions(ctx, sb.ID)
				if err != nil {
					t.Fatal(err)
				}
				return len(ss)
			}},
		{"session exec", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"cmd":["echo x >> /home/user/sess"],"session":"default"}`, `{"cmd":["true"],"session":"default"}`,
			func(t *testing.T) int {
				out, _ := execOut(t, d, sb.ID, "sh", "-c", "cat /home/user/sess 2>/dev/null | wc -l")
				n, _ := strconv.Atoi(strings.TrimSpace(out))
				return n
			}},
		{"snapshot create", "POST", "/v1/sandboxes/" + sb.ID + "/snapshots", `{}`, `{"name":"other"}`,
			func(t *testing.T) int {
				list, err := d.client.ListSnapshots(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, s := range list {
					if s.Sandbox == sb.ID {
						n++
					}
				}
				return n
			}},
		{"fork", "POST", "/v1/sandboxes/" + sb.ID + "/fork", `{"count":1}`, `{"count":2}`,
			func(t *testing.T) int {
				list, err := d.client.List(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				return len(list)
			}},
		{"backup create", "POST", "/v1/sandboxes/" + sb.ID + "/backups", `{"path":"/home/user"}`, `{"path":"/tmp"}`,
			func(t *testing.T) int {
				list, err := d.client.ListBackups(ctx, sb.ID)
				if err != nil {
					t.Fatal(err)
				}
				return len(list)
			}},
		{"file write", "PUT", "/v1/sandboxes/" + sb.ID + "/files?path=/home/user/w.txt", "hello", "bye", kinds(sb.ID, api.LedgerFileWrite)},
		{"ledger add", "POST", "/v1/sandboxes/" + sb.ID + "/ledger", `{"kind":"idem.test"}`, `{"kind":"idem.other"}`, kinds(sb.ID, "idem.test")},
		{"stop", "POST", "/v1/sandboxes/" + life.ID + "/stop", ``, `{}`, kinds(life.ID, api.LedgerStop)},
		{"start", "POST", "/v1/sandboxes/" + life.ID + "/start", ``, `{}`, kinds(life.ID, api.LedgerStart)},
		{"pause", "POST", "/v1/sandboxes/" + life.ID + "/pause", ``, `{}`, kinds(life.ID, api.LedgerPause)},
		{"resume", "POST", "/v1/sandboxes/" + life.ID + "/resume", ``, `{}`, kinds(life.ID, api.LedgerResume)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "route-" + strconv.Itoa(i) + "-" + uniqueName("k")
			before := tc.count(t)
			first := rawDo(t, d, tc.method, tc.path, key, []byte(tc.body))
			if first.status < 200 || first.status > 299 || first.replay != "" {
				t.Fatalf("first call: %d %q %s", first.status, first.replay, first.body)
			}
			again := rawDo(t, d, tc.method, tc.path, key, []byte(tc.body))
			if again.status != first.status || !bytes.Equal(again.body, first.body) || again.replay != "true" {
				t.Fatalf("retry: %d %q %s\nfirst: %d %s", again.status, again.replay, again.body, first.status, first.body)
			}
			if n := tc.count(t) - before; n != 1 {
				t.Fatalf("the side effect happened %d times, want once", n)
			}
			other := rawDo(t, d, tc.method, tc.path, key, []byte(tc.other))
			if other.status != http.StatusConflict || !strings.Contains(string(other.body), "different request") || !strings.Contains(string(other.body), "new key") {
				t.Fatalf("same key, another body: %d %s; want 409 saying it is a different request", other.status, other.body)
			}
			if n := tc.count(t) - before; n != 1 {
				t.Fatalf("after the refused reuse the side effect happened %d times, want once", n)
			}
		})
	}

	t.Run("a failure is not kept", func(t *testing.T) {
		// No S3 storage is configured: 503, and a retry runs again (it is
		// not a replay) instead of being pinned to the failure.
		for range 2 {
			r := rawDo(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/backups", "s3-key", []byte(`{"path":"/home/user","store":"s3"}`))
			if r.status != http.StatusServiceUnavailable || r.replay != "" || !strings.Contains(string(r.body), "S3") {
				t.Fatalf("backup to unconfigured S3: %d %q %s; want a 503 that is not a replay", r.status, r.replay, r.body)
			}
		}
	})

	t.Run("bodies over 8 MiB are refused with a key", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), 9<<20)
		path := "/v1/sandboxes/" + sb.ID + "/files?path=/home/user/big"
		r := rawDo(t, d, "PUT", path, "big-key", big)
		if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "at most 8 MiB") || !strings.Contains(string(r.body), "without the key") {
			t.Fatalf("9 MiB upload with a key: %d %s", r.status, r.body)
		}
		if r := rawDo(t, d, "PUT", path, "", big); r.status != http.StatusOK {
			t.Fatalf("9 MiB upload without a key: %d %s", r.status, r.body)
		}
	})
}

// TestIdempotencyKeyImageBuild: a rebuild of a built-in image with a key
// runs once (on a private image store, since it replaces the image).
func TestIdempotencyKeyImageBuild(t *testing.T) {
	d := startDaemon(t, daemonOpts{imagesDir: t.TempDir()})
	built := func() time.Time {
		imgs, err := d.client.Images(ctxT(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range imgs {
			if i.Name == "busybox" {
				return i.CreatedAt
			}
		}
		return time.Time{}
	}
	path := "/v1/images/busybox/build"
	first := rawDo(t, d, "POST", path, "build-1", nil)
	if first.status != http.StatusOK || !bytes.Contains(first.body, []byte(`"done"`)) {
		t.Fatalf("build: %d %s", first.status, first.body)
	}
	at := built()
	again := rawDo(t, d, "POST", path, "build-1", nil)
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.replay != "true" {
		t.Fatalf("retry of a build: %d %q %s", again.status, again.replay, again.body)
	}
	// Without the key a rebuild makes a new image; with it, none was made.
	if now := built(); at.IsZero() || !now.Equal(at) {
		t.Fatalf("the retry rebuilt the image: built at %v, now %v", at, now)
	}
	if other := rawDo(t, d, "POST", path+"?if_missing=true", "build-1", nil); other.status != http.StatusConflict {
		t.Fatalf("same key, another query: %d %s", other.status, other.body)
	}
}

// TestIdempotencyKeyCLI: --idempotency-key makes a whole command safe to
// retry: create twice prints one id and makes one sandbox; a do (create,
// exec, destroy) run twice runs its command once and prints the same.
func TestIdempotencyKeyCLI(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	label := uniqueName("idem")
	key := "cli-" + label
	first := strings.TrimSpace(d.must("create", "--image", "busybox", "--label", "idem="+label, "--idempotency-key", key))
	again := strings.TrimSpace(d.must("create", "--image", "busybox", "--label", "idem="+label, "--idempotency-key", key))
	if first == "" || again != first {
		t.Fatalf("create with one key printed %q, then %q", first, again)
	}
	list, err := d.client.List(ctx, map[string]string{"idem": label})
	if err != nil || len(list) != 1 {
		t.Fatalf("%d sandboxes after two creates with one key (%v), want 1", len(list), err)
	}
	// The same key on another create is refused, saying why.
	if _, errOut, code := d.run("create", "--image", "busybox", "--name", label, "--idempotency-key", key); code == 0 || !strings.Contains(errOut, "different request") {
		t.Fatalf("another create with the key: exit %d, stderr %q", code, errOut)
	}

	doKey := "do-" + label
	script := "echo ran; date +%s%N"
	out1 := d.must("do", "--image", "busybox", "--idempotency-key", doKey, "--", "sh", "-c", script)
	out2 := d.must("do", "--image", "busybox", "--idempotency-key", doKey, "--", "sh", "-c", script)
	if !strings.HasPrefix(out1, "ran\n") || out2 != out1 {
		t.Fatalf("do run twice with one key printed %q, then %q", out1, out2)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "--idempotency-key", "has space"}, "visible ASCII"},
		{[]string{"ls", "--idempotency-key", strings.Repeat("k", 239)}, "1 to 238"},
		{[]string{"mcp", "--idempotency-key", "k"}, "serves many"},
	} {
		if _, errOut, code := d.run(c.args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("paddock %.40v: exit %d, stderr %q; want an error saying %q", c.args, code, errOut, c.want)
		}
	}
}
