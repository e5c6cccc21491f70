package e2e

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestE2BTemplateBuildPullsPrivateBase builds, through E2B's template
// build API, from an image of a registry that wants a password
// (fromImageRegistry): without credentials, or with wrong ones, the build
// fails saying the registry refused; with the right ones it pulls the
// image for the caller and a sandbox runs from the template. The
// password appears in no build log, status or daemon log line, and
// another key naming the same image without credentials is refused: the
// first key's pull is not its.
func TestE2BTemplateBuildPullsPrivateBase(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true, imagesDir: t.TempDir()})
	c := &e2bClient{t: t, base: "http://" + d.listen, key: strings.TrimSpace(d.must("keys", "create", "--e2b", "pb-a"))}
	other := &e2bClient{t: t, base: c.base, key: strings.TrimSpace(d.must("keys", "create", "--e2b", "pb-b"))}

	const user, pass = "team", "s3cret-Registry-Passw0rd"
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/team/private:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, testImage(t), remote.WithAuth(&authn.Basic{Username: user, Password: pass})); err != nil {
		t.Fatal(err)
	}

	steps := []map[string]any{{"type": "RUN", "args": []string{"echo private > /home/user/from"}}}
	for i, tc := range []struct {
		cl    *e2bClient
		creds any
		ok    bool
	}{
		{c, nil, false},
		{c, map[string]string{"type": "registry", "username": user, "password": "wrong"}, false},
		{c, map[string]string{"type": "registry", "username": user, "password": pass}, true},
		{other, nil, false},
	} {
		tname := "private-" + strconv.Itoa(i)
		body := map[string]any{"fromImage": ref, "steps": steps}
		if tc.creds != nil {
			body["fromImageRegistry"] = tc.creds
		}
		status, text := runE2BBuild(t, tc.cl, tname, body)
		if strings.Contains(text, pass) {
			t.Errorf("build %d: the password is in its log or status:\n%s", i, text)
		}
		if tc.ok != (status == "ready") {
			t.Fatalf("build %d (credentials %v): %s\n%s", i, tc.creds != nil, status, text)
		}
		if !tc.ok && !strings.Contains(text, "401") && !strings.Contains(strings.ToLower(text), "unauthorized") {
			t.Errorf("build %d failed without saying the registry refused:\n%s", i, text)
		}
		if tc.ok {
			sb := tc.cl.create(map[string]any{"templateID": tname})
			t.Cleanup(func() { tc.cl.do("DELETE", "/sandboxes/"+sb.SandboxID, nil, nil) })
			if out := d.must("exec", sb.SandboxID, "--", "cat", "/home/user/from"); out != "private\n" {
				t.Errorf("the sandbox of the private base: %q", out)
			}
		}
	}
	if strings.Contains(d.logs.String(), pass) {
		t.Error("the password is in the daemon's log")
	}
}

// runE2BBuild requests and starts an E2B build of tname with body and
// waits for its end: its status and its status answers (log and reason)
// as text.
func runE2BBuild(t *testing.T, c *e2bClient, tname string, body map[string]any) (string, string) {
	t.Helper()
	buildPath, statusPath := requestE2BBuild(t, c, tname)
	if res := c.do("POST", buildPath, body, nil); res.status != http.StatusAccepted {
		t.Fatalf("start build: %d %s", res.status, res.body)
	}
	return waitE2BBuild(t, c, statusPath)
}

// requestE2BBuild asks for a build of tname (E2B's POST /v3/templates)
// and returns the paths that start it and tell its status.
func requestE2BBuild(t *testing.T, c *e2bClient, tname string) (buildPath, statusPath string) {
	t.Helper()
	var req struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	res := c.do("POST", "/v3/templates", map[string]any{"name": tname, "cpuCount": 1, "memoryMB": 512}, nil)
	if res.status != http.StatusAccepted {
		t.Fatalf("request build: %d %s", res.status, res.body)
	}
	res.json(t, &req)
	if req.TemplateID != tname || req.BuildID == "" {
		t.Fatalf("request build: %s", res.body)
	}
	return "/v2/templates/" + req.TemplateID + "/builds/" + req.BuildID, "/templates/" + req.TemplateID + "/builds/" + req.BuildID + "/status"
}

// waitE2BBuild polls a started build's status until it ends, and returns
// its status and every status answer (log and reason) as text.
func waitE2BBuild(t *testing.T, c *e2bClient, statusPath string) (string, string) {
	t.Helper()
	var text strings.Builder
	deadline := time.Now().Add(3 * time.Minute)
	for offset := 0; ; {
		res := c.do("GET", statusPath+"?logsOffset="+strconv.Itoa(offset), nil, nil)
		if res.status != http.StatusOK {
			t.Fatalf("status: %d %s", res.status, res.body)
		}
		text.Write(res.body)
		text.WriteByte('\n')
		var st struct {
			Status     string            `json:"status"`
			LogEntries []json.RawMessage `json:"logEntries"`
		}
		res.json(t, &st)
		offset += len(st.LogEntries)
		if st.Status == "ready" || st.Status == "error" {
			return st.Status, text.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("build still %s:\n%s", st.Status, text.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
