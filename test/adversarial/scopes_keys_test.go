package adversarial

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// keyIDs lists the ids of GET /v1/keys as c sees them, sorted.
func keyIDs(t *testing.T, c keyClient) []string {
	t.Helper()
	var list api.KeyList
	r := c.do("GET", "/v1/keys", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/keys: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range list.Keys {
		out = append(out, k.ID)
	}
	slices.Sort(out)
	return out
}

// TestScopesKeys: a key of scope own lists and deletes only the keys it
// created; every other key (another tenant's, an operator's key of scope
// all, its own creator, itself) is not found word for word as a key that
// does not exist, and stays usable. It never mints a key of scope all.
// Keys of scope all and the unix socket manage every key, and the CLI's
// keys ls and rm work for both.
func TestScopesKeys(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	ops := newTenant(t, d, "ops", api.KeyScopeAll)
	base := "http://" + d.listen

	// a mints a key of its own; never one of scope all, whatever it asks.
	r := a.raw.do("POST", "/v1/keys", `{"name":"a-child"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("own key creates a key: %d %s", r.status, r.body)
	}
	var child api.CreatedKey
	if err := json.Unmarshal(r.body, &child); err != nil {
		t.Fatal(err)
	}
	if child.Scope != api.KeyScopeOwn || child.CreatedBy != a.key.ID {
		t.Errorf("a's key: scope %q created_by %q, want own by %s", child.Scope, child.CreatedBy, a.key.ID)
	}
	for _, body := range []string{`{"name":"escalate","scope":"all"}`, `{"name":"escalate","scope":"all","format":"e2b"}`} {
		if r := a.raw.do("POST", "/v1/keys", body); r.status != http.StatusForbidden || r.err.Code != "permission_denied" {
			t.Errorf("own key creates %s: %d %s, want 403", body, r.status, r.body)
		}
	}
	ch := keyClient{t: t, base: base, key: child.Secret}
	if r := ch.do("POST", "/v1/keys", `{"name":"grandchild-all","scope":"all"}`); r.status != http.StatusForbidden {
		t.Errorf("a key made by an own key creates a key of scope all: %d %s", r.status, r.body)
	}

	everyone := sorted(a.key.ID, b.key.ID, ops.key.ID, child.ID)
	for _, c := range []struct {
		who  string
		cl   keyClient
		want []string
	}{
		{"a", a.raw, []string{child.ID}},
		{"b", b.raw, nil},
		{"a's child", ch, nil},
		{"ops", ops.raw, everyone},
	} {
		if got := keyIDs(t, c.cl); !slices.Equal(got, c.want) {
			t.Errorf("%s lists keys %v, want %v", c.who, got, c.want)
		}
	}
	if list, err := d.client.ListKeys(ctx); err != nil || len(list) != len(everyone) {
		t.Errorf("the socket lists %d keys (%v), want %d", len(list), err, len(everyone))
	}

	// Deleting what it did not create: the same 404 as a key nobody holds.
	missing := strings.Repeat("0", len(a.key.ID))
	want := a.raw.do("DELETE", "/v1/keys/"+missing, "")
	if want.status != http.StatusNotFound {
		t.Fatalf("delete a missing key: %d %s", want.status, want.body)
	}
	for _, c := range []struct {
		who string
		cl  keyClient
		id  string
	}{
		{"a deletes b", a.raw, b.key.ID},
		{"a deletes ops", a.raw, ops.key.ID},
		{"a deletes itself", a.raw, a.key.ID},
		{"a's child deletes a", ch, a.key.ID},
		{"b deletes a's child", b.raw, child.ID},
	} {
		got := c.cl.do("DELETE", "/v1/keys/"+c.id, "")
		if got.status != want.status || got.err.Code != want.err.Code ||
			strings.ReplaceAll(got.err.Message, c.id, "X") != strings.ReplaceAll(want.err.Message, missing, "X") {
			t.Errorf("%s: %d %s; a missing key: %d %s", c.who, got.status, got.body, want.status, want.body)
		}
	}
	for _, c := range []struct {
		who string
		cl  keyClient
	}{{"a", a.raw}, {"b", b.raw}, {"ops", ops.raw}, {"a's child", ch}} {
		if r := c.cl.do("GET", "/v1/sandboxes", ""); r.status != http.StatusOK {
			t.Errorf("%s's key after the deletes: %d %s", c.who, r.status, r.body)
		}
	}

	// The CLI with a's key sees and revokes its child, and nothing else.
	cli := func(key string, args ...string) (string, string, int) {
		return d.run(append([]string{"--url", base, "--api-key", key}, args...)...)
	}
	if out, errOut, code := cli(a.key.Secret, "keys", "ls"); code != 0 || !strings.Contains(out, "a-child") ||
		strings.Contains(out, "tenant-b") || strings.Contains(out, "ops") {
		t.Errorf("keys ls as a: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(a.key.Secret, "keys", "rm", b.key.ID); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("keys rm of b's key as a: exit %d %s", code, errOut)
	}
	if out, errOut, code := cli(a.key.Secret, "keys", "rm", child.ID); code != 0 {
		t.Errorf("keys rm of its own child as a: exit %d\n%s%s", code, out, errOut)
	}
	if r := ch.do("GET", "/v1/sandboxes", ""); r.status != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d %s", r.status, r.body)
	}

	// The key of scope all and the socket manage every key, as before.
	if r := ops.raw.do("DELETE", "/v1/keys/"+b.key.ID, ""); r.status != http.StatusNoContent {
		t.Errorf("ops deletes b: %d %s", r.status, r.body)
	}
	if r := b.raw.do("GET", "/v1/sandboxes", ""); r.status != http.StatusUnauthorized {
		t.Errorf("b after ops revoked it: %d %s", r.status, r.body)
	}
	out := d.must("keys", "ls")
	if !strings.Contains(out, "tenant-a") || !strings.Contains(out, "ops") || strings.Contains(out, "tenant-b") {
		t.Errorf("keys ls over the socket:\n%s", out)
	}
	d.must("keys", "rm", a.key.ID)
	if r := a.raw.do("GET", "/v1/sandboxes", ""); r.status != http.StatusUnauthorized {
		t.Errorf("a after the socket revoked it: %d %s", r.status, r.body)
	}
}
