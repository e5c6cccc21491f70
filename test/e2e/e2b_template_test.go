package e2e

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestE2BTemplateBuildPullsItsBase builds, through E2B's template build
// API, a template from an image the daemon does not have (served by a
// registry of the test's own on loopback): the build pulls it for the
// caller, runs its steps as E2B's default user in a home it makes, and a
// sandbox is created from the result by name. Another key sees nothing of
// the build.
func TestE2BTemplateBuildPullsItsBase(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true, imagesDir: t.TempDir()})
	c := &e2bClient{t: t, base: "http://" + d.listen, key: strings.TrimSpace(d.must("keys", "create", "--e2b", "tb-a"))}
	other := &e2bClient{t: t, base: c.base, key: strings.TrimSpace(d.must("keys", "create", "--e2b", "tb-b"))}

	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/team/base:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, testImage(t)); err != nil {
		t.Fatal(err)
	}

	tname := "pulled-base"
	buildPath, statusPath := requestE2BBuild(t, c, tname)
	// Another key can neither start nor watch this build.
	other.do("POST", buildPath, map[string]any{}, nil).errCode(t, 404)
	other.do("GET", statusPath, nil, nil).errCode(t, 404)

	res := c.do("POST", buildPath, map[string]any{
		"fromImage": ref,
		"steps": []map[string]any{
			{"type": "RUN", "args": []string{"id -u > /home/user/uid && pwd > /home/user/cwd"}},
			{"type": "ENV", "args": []string{"FROM_TEMPLATE", "yes"}},
		},
	}, nil)
	if res.status != http.StatusAccepted {
		t.Fatalf("start build: %d %s", res.status, res.body)
	}
	// Starting it twice is refused.
	c.do("POST", buildPath, map[string]any{"fromImage": ref}, nil).errCode(t, 400)

	status, logs := waitE2BBuild(t, c, statusPath)
	if status != "ready" {
		t.Fatalf("build failed:\n%s", logs)
	}
	if !strings.Contains(logs, "pulling "+ref) || !strings.Contains(logs, "run") {
		t.Fatalf("the log says nothing of the pull or the steps:\n%s", logs)
	}
	if res := c.do("GET", "/templates/aliases/"+tname, nil, nil); res.status != http.StatusOK {
		t.Fatalf("alias of a built template: %d %s", res.status, res.body)
	}
	c.do("GET", "/templates/aliases/no-such-template", nil, nil).errCode(t, 404)

	// Builds outlive a daemon restart as their status reports them: the
	// finished one as it ended, one asked for and not started as an error
	// saying so, which cannot start any more.
	pendingPath, pendingStatus := requestE2BBuild(t, c, tname)
	d.stop()
	d.start()
	if got, logs := waitE2BBuild(t, c, statusPath); got != "ready" {
		t.Fatalf("the finished build after a restart: %s\n%s", got, logs)
	}
	if got, logs := waitE2BBuild(t, c, pendingStatus); got != "error" || !strings.Contains(logs, "daemon restarted") {
		t.Fatalf("a build the restart cut short: %s\n%s", got, logs)
	}
	other.do("GET", pendingStatus, nil, nil).errCode(t, 404)
	if res := c.do("POST", pendingPath, map[string]any{"fromImage": ref}, nil); res.status < 400 || !strings.Contains(string(res.body), "restarted") {
		t.Fatalf("starting a build the restart cut short: %d %s", res.status, res.body)
	}

	// The listing shows a key its own templates; another key's are not
	// there, nor found by id.
	type listed struct {
		TemplateID  string     `json:"templateID"`
		BuildID     string     `json:"buildID"`
		BuildCount  int        `json:"buildCount"`
		BuildStatus string     `json:"buildStatus"`
		SpawnCount  int64      `json:"spawnCount"`
		LastSpawned *time.Time `json:"lastSpawnedAt"`
		Builds      []struct {
			BuildID string `json:"buildID"`
			Status  string `json:"status"`
		} `json:"builds"`
	}
	names := func(cl *e2bClient, path string) []string {
		t.Helper()
		res := cl.do("GET", path, nil, nil)
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, res.status, res.body)
		}
		var ls []listed
		res.json(t, &ls)
		var out []string
		for _, l := range ls {
			if l.BuildStatus != "ready" || l.BuildCount != 1 || l.BuildID == "" {
				t.Errorf("%s: %+v", path, l)
			}
			out = append(out, l.TemplateID)
		}
		return out
	}
	if got := names(c, "/templates"); len(got) != 1 || got[0] != tname {
		t.Errorf("GET /templates for the builder: %q, want [%s]", got, tname)
	}
	if got := names(c, "/v2/templates?limit=1"); len(got) != 1 || got[0] != tname {
		t.Errorf("GET /v2/templates for the builder: %q", got)
	}
	if got := names(other, "/templates"); len(got) != 0 {
		t.Errorf("GET /templates for another key: %q", got)
	}
	if got := names(other, "/v2/templates"); len(got) != 0 {
		t.Errorf("GET /v2/templates for another key: %q", got)
	}
	var one listed
	if res := c.do("GET", "/templates/"+tname, nil, nil); res.status != http.StatusOK {
		t.Fatalf("GET /templates/%s: %d %s", tname, res.status, res.body)
	} else if res.json(t, &one); one.TemplateID != tname || len(one.Builds) != 1 || one.Builds[0].Status != "ready" {
		t.Errorf("GET /templates/%s: %+v", tname, one)
	}
	other.do("GET", "/templates/"+tname, nil, nil).errCode(t, 404)
	c.do("GET", "/v2/templates?limit=0", nil, nil).errCode(t, 400)

	if one.SpawnCount != 0 || one.LastSpawned != nil {
		t.Errorf("a template nothing was created from: spawnCount %d, lastSpawnedAt %v", one.SpawnCount, one.LastSpawned)
	}
	before := time.Now()
	sb := c.create(map[string]any{"templateID": tname})
	t.Cleanup(func() { c.do("DELETE", "/sandboxes/"+sb.SandboxID, nil, nil) })
	// The create counts, in the listing and the template's own.
	for _, path := range []string{"/templates", "/templates/" + tname} {
		res := c.do("GET", path, nil, nil)
		var got []listed
		if path == "/templates" {
			res.json(t, &got)
		} else {
			got = make([]listed, 1)
			res.json(t, &got[0])
		}
		if len(got) != 1 || got[0].SpawnCount != 1 || got[0].LastSpawned == nil || got[0].LastSpawned.Before(before.Add(-time.Second)) {
			t.Errorf("GET %s after a create: %+v", path, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := func(cmd string) string {
		t.Helper()
		var b strings.Builder
		res, err := d.client.Exec(ctx, sb.SandboxID, paddock.ExecOptions{Cmd: []string{"sh", "-c", cmd}, Stdout: &b})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", cmd, err, res)
		}
		return strings.TrimSpace(b.String())
	}
	// The image has no account "user": the steps ran as uid 1000 in the
	// home the build made, and the sandbox's commands start there too.
	if got := out("cat /home/user/uid /home/user/cwd; echo $FROM_TEMPLATE; pwd"); got != "1000\n/home/user\nyes\n/home/user" {
		t.Fatalf("sandbox from the built template: %q", got)
	}

	// Only the key that built it (or one of scope all) rebuilds or deletes
	// it, and a rebuild is refused when it is asked for; the
	// sandbox made from it keeps running.
	other.do("POST", "/v3/templates", map[string]any{"name": tname}, nil).errCode(t, http.StatusForbidden)
	other.do("DELETE", "/templates/"+tname, nil, nil).errCode(t, http.StatusForbidden)
	if res := c.do("DELETE", "/templates/"+tname, nil, nil); res.status != http.StatusNoContent {
		t.Fatalf("delete the template: %d %s", res.status, res.body)
	}
	c.do("GET", "/templates/aliases/"+tname, nil, nil).errCode(t, 404)
	c.do("DELETE", "/templates/"+tname, nil, nil).errCode(t, 404)
	if got := out("echo still here"); got != "still here" {
		t.Fatalf("the sandbox after its template's delete: %q", got)
	}
}
