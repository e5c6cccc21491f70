package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
)

// keyClient makes raw HTTP calls to a daemon's TCP listener with one API
// key, so a test sees statuses and error bodies exactly as sent.
type keyClient struct {
	t    *testing.T
	base string
	key  string
}

type keyResp struct {
	status int
	err    api.Error // the error body, when there is one
	body   []byte
}

func (c keyClient) do(method, path, body string) keyResp {
	c.t.Helper()
	r := testdaemon.KeyClient{T: c.t, Base: c.base, Key: c.key}.Do(method, path, body)
	return keyResp{status: r.Status, err: r.Err, body: r.Body}
}

// route is one API call with placeholders: {ref} is the object under test
// (another owner's, or one that does not exist), {mine} the caller's own
// sandbox, {mybk} the caller's own backup.
type route struct {
	method, path, body string
}

func (r route) fill(ref, mine, mybk string) (string, string) {
	rep := strings.NewReplacer("{ref}", ref, "{mine}", mine, "{mybk}", mybk)
	return rep.Replace(r.path), rep.Replace(r.body)
}

// sandboxRoutes is every route that addresses a sandbox by id or name.
var sandboxRoutes = []route{
	{"GET", "/v1/sandboxes/{ref}", ""},
	{"POST", "/v1/sandboxes/{ref}/stop", ""},
	{"POST", "/v1/sandboxes/{ref}/start", ""},
	{"POST", "/v1/sandboxes/{ref}/pause", ""},
	{"POST", "/v1/sandboxes/{ref}/resume", ""},
	{"GET", "/v1/sandboxes/{ref}/history", ""},
	{"POST", "/v1/sandboxes/{ref}/exec", `{"cmd":["true"]}`},
	{"GET", "/v1/sandboxes/{ref}/files?path=/etc/hostname", ""},
	{"PUT", "/v1/sandboxes/{ref}/files?path=/tmp/x", "x"},
	{"DELETE", "/v1/sandboxes/{ref}/files?path=/tmp/x", ""},
	{"GET", "/v1/sandboxes/{ref}/files/list?path=/", ""},
	{"GET", "/v1/sandboxes/{ref}/files/stat?path=/", ""},
	{"POST", "/v1/sandboxes/{ref}/files/mkdir", `{"path":"/tmp/d"}`},
	{"POST", "/v1/sandboxes/{ref}/files/move", `{"source":"/tmp/a","destination":"/tmp/b"}`},
	{"GET", "/v1/sandboxes/{ref}/tar?path=/tmp", ""},
	{"PUT", "/v1/sandboxes/{ref}/tar?path=/tmp", ""},
	{"GET", "/v1/sandboxes/{ref}/layer", ""},
	{"POST", "/v1/sandboxes/{ref}/snapshots", ""},
	{"POST", "/v1/sandboxes/{ref}/fork", ""},
	{"GET", "/v1/sandboxes/{ref}/ledger", ""},
	{"POST", "/v1/sandboxes/{ref}/ledger", `{"kind":"payment.sent"}`},
	{"POST", "/v1/sandboxes/{ref}/backups", `{"path":"/tmp"}`},
	{"GET", "/v1/sandboxes/{ref}/network", ""},
	{"PUT", "/v1/sandboxes/{ref}/network", `{"allow_hosts":["a.test"]}`},
	{"POST", "/v1/sandboxes/{ref}/network/injections", `{"host":"a.test","header":"X-Key","value":"v"}`},
	{"DELETE", "/v1/sandboxes/{ref}/network/injections?host=a.test", ""},
	{"GET", "/v1/sandboxes/{ref}/pty", ""},
	{"GET", "/v1/sandboxes/{ref}/pty?terminal=t1", ""},
	{"GET", "/v1/sandboxes/{ref}/terminals", ""},
	{"DELETE", "/v1/sandboxes/{ref}/terminals/t1", ""},
	{"GET", "/v1/sandboxes/{ref}/watch?path=/tmp", ""},
	{"POST", "/v1/sandboxes/{ref}/previews", `{"port":8080}`},
	{"GET", "/v1/sandboxes/{ref}/previews", ""},
	{"DELETE", "/v1/sandboxes/{ref}/previews/8080", ""},
	{"POST", "/v1/sandboxes/{ref}/sessions", `{"name":"s1"}`},
	{"GET", "/v1/sandboxes/{ref}/sessions", ""},
	{"DELETE", "/v1/sandboxes/{ref}/sessions/s1", ""},
	{"POST", "/v1/sandboxes/{ref}/processes", `{"cmd":["true"]}`},
	{"GET", "/v1/sandboxes/{ref}/processes", ""},
	{"GET", "/v1/sandboxes/{ref}/processes/p1", ""},
	{"GET", "/v1/sandboxes/{ref}/processes/p1/logs", ""},
	{"POST", "/v1/sandboxes/{ref}/processes/p1/kill", `{}`},
	{"POST", "/v1/sandboxes/{ref}/processes/p1/wait", `{"for":"exit"}`},
	{"GET", "/v1/sandboxes/{ref}/procs", ""},
	{"POST", "/v1/sandboxes/{ref}/procs/kill-all", ""},
	{"POST", "/v1/sandboxes/{ref}/procs/kill-all", `{"grace":"1s"}`},
	{"POST", "/v1/sandboxes/{ref}/contexts", `{}`},
	{"GET", "/v1/sandboxes/{ref}/contexts", ""},
	{"DELETE", "/v1/sandboxes/{ref}/contexts/c1", ""},
	{"POST", "/v1/sandboxes/{ref}/contexts/c1/run", `{"code":"1"}`},
	// Into another owner's sandbox, with the caller's own backup.
	{"POST", "/v1/backups/{mybk}/restore", `{"sandbox":"{ref}"}`},
	{"DELETE", "/v1/sandboxes/{ref}", ""},
}

// snapshotRoutes address a snapshot by id or name.
var snapshotRoutes = []route{
	{"GET", "/v1/snapshots/{ref}", ""},
	{"PATCH", "/v1/snapshots/{ref}", `{"ttl":"1h"}`},
	{"GET", "/v1/snapshots/{ref}/export", ""},
	{"POST", "/v1/sandboxes", `{"from_snapshot":"{ref}"}`},
	{"DELETE", "/v1/snapshots/{ref}", ""},
}

// backupRoutes address a backup by id.
var backupRoutes = []route{
	{"GET", "/v1/backups/{ref}", ""},
	{"POST", "/v1/backups/{ref}/restore", `{"sandbox":"{mine}"}`},
	{"DELETE", "/v1/backups/{ref}", ""},
}

// ledgerRoutes address the ledger of a destroyed sandbox.
var ledgerRoutes = []route{
	{"GET", "/v1/sandboxes/{ref}/ledger", ""},
	{"POST", "/v1/sandboxes/{ref}/ledger", `{"kind":"payment.sent"}`},
}

// secretRoutes address a secret by name.
var secretRoutes = []route{
	{"GET", "/v1/secrets/{ref}", ""},
	{"DELETE", "/v1/secrets/{ref}", ""},
}

// checkNotFound calls every route as c on other (an object another owner
// holds) and on missing (one that does not exist): both must be the same
// not_found, word for word once the reference is taken out, so nothing
// tells the two apart.
func checkNotFound(t *testing.T, c keyClient, routes []route, other, missing, mine, mybk string) {
	t.Helper()
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			p, b := r.fill(other, mine, mybk)
			got := c.do(r.method, p, b)
			mp, mb := r.fill(missing, mine, mybk)
			ref := c.do(r.method, mp, mb)
			if got.status != http.StatusNotFound || got.err.Code != api.CodeNotFound {
				t.Fatalf("%s %s: %d %s, want 404 not_found", r.method, p, got.status, got.body)
			}
			gotMsg := strings.ReplaceAll(got.err.Message, other, "{ref}")
			refMsg := strings.ReplaceAll(ref.err.Message, missing, "{ref}")
			if ref.status != got.status || ref.err.Code != got.err.Code || gotMsg != refMsg {
				t.Errorf("another owner's object and a missing one answer differently:\n %d %s\n %d %s", got.status, gotMsg, ref.status, refMsg)
			}
		})
	}
}
