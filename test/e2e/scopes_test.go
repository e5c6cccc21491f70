package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// tenant is one API key of a scope test, with an SDK client and a raw one.
type tenant struct {
	key *api.CreatedKey
	sdk *paddock.Client
	raw keyClient
}

func newTenant(t *testing.T, d *daemon, name, scope string) tenant {
	t.Helper()
	tn := testdaemon.NewTenant(t, d.client, d.listen, name, scope)
	return tenant{key: tn.Key, sdk: tn.SDK, raw: keyClient{t: t, base: tn.Raw.Base, key: tn.Raw.Key}}
}

func sandboxIDs(list []api.Sandbox) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestScopesIsolateKeys runs one daemon with two API keys of scope own and
// one of scope all, each with its sandboxes, snapshots, backups, secrets
// and ledgers: an own key sees only its own, every route to another's is
// the same 404 as to nothing at all, sandbox and snapshot names are per
// owner, and so are secret names, injection rules
// never name another owner's secret, shared resources are only read, and
// the all key and the unix socket see everything.
func TestScopesIsolateKeys(t *testing.T) {
	requireHost(t)
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables: secrets live only on a daemon with egress networking")
	}
	plan := newNetPlan(t, 3)
	d := startDaemon(t, daemonOpts{listen: true, env: []string{"PADDOCK_NETWORK_RANGE=" + plan.Range}})
	ctx := ctxT(t, 10*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	all := newTenant(t, d, "ops", api.KeyScopeAll)

	// What each own key makes.
	type holdings struct {
		sb, name, snap, snapName, bk, sec, gone string
	}
	setup := func(tn tenant, tag string) holdings {
		t.Helper()
		h := holdings{name: tag + "-box", snapName: tag + "-snap", sec: tag + "-tok"}
		sb, err := tn.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Name: h.name})
		if err != nil {
			t.Fatal(err)
		}
		h.sb = sb.ID
		if sb.CreatedBy != tn.key.ID {
			t.Fatalf("%s's sandbox created_by %q", tag, sb.CreatedBy)
		}
		if _, err := tn.sdk.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo " + tag + " > /tmp/mark"}}); err != nil {
			t.Fatal(err)
		}
		snap, err := tn.sdk.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{Name: h.snapName})
		if err != nil {
			t.Fatal(err)
		}
		h.snap = snap.ID
		bk, err := tn.sdk.CreateBackup(ctx, sb.ID, api.CreateBackupRequest{Path: "/tmp", User: "root"})
		if err != nil {
			t.Fatal(err)
		}
		h.bk = bk.ID
		sec, err := tn.sdk.SetSecret(ctx, h.sec, []byte("value-of-"+tag))
		if err != nil {
			t.Fatal(err)
		}
		if snap.CreatedBy != tn.key.ID || bk.CreatedBy != tn.key.ID || sec.CreatedBy != tn.key.ID {
			t.Fatalf("%s's owners: snapshot %q backup %q secret %q", tag, snap.CreatedBy, bk.CreatedBy, sec.CreatedBy)
		}
		gone, err := tn.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if err := tn.sdk.Delete(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		h.gone = gone.ID
		return h
	}
	ha, hb := setup(a, "a"), setup(b, "b")
	local, err := d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Name: "local-box"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("lists", func(t *testing.T) {
		for _, c := range []struct {
			who      string
			cl       *paddock.Client
			sbs      []string
			snaps    []string
			backups  []string
			secrets  []string
			seeLocal bool
		}{
			{"a", a.sdk, []string{ha.sb}, []string{ha.snap}, []string{ha.bk}, []string{ha.sec}, false},
			{"b", b.sdk, []string{hb.sb}, []string{hb.snap}, []string{hb.bk}, []string{hb.sec}, false},
			{"all", all.sdk, []string{ha.sb, hb.sb, local.ID}, []string{ha.snap, hb.snap}, []string{ha.bk, hb.bk}, []string{ha.sec, hb.sec}, true},
			{"socket", d.client, []string{ha.sb, hb.sb, local.ID}, []string{ha.snap, hb.snap}, []string{ha.bk, hb.bk}, []string{ha.sec, hb.sec}, true},
		} {
			sbs, err := c.cl.List(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := sandboxIDs(sbs); !slices.Equal(got, sorted(c.sbs...)) {
				t.Errorf("%s lists sandboxes %v, want %v", c.who, got, sorted(c.sbs...))
			}
			snaps, err := c.cl.ListSnapshots(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var sn []string
			for _, s := range snaps {
				sn = append(sn, s.ID)
			}
			if slices.Sort(sn); !slices.Equal(sn, sorted(c.snaps...)) {
				t.Errorf("%s lists snapshots %v, want %v", c.who, sn, sorted(c.snaps...))
			}
			bks, err := c.cl.ListBackups(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			var bn []string
			for _, x := range bks {
				bn = append(bn, x.ID)
			}
			if slices.Sort(bn); !slices.Equal(bn, sorted(c.backups...)) {
				t.Errorf("%s lists backups %v, want %v", c.who, bn, sorted(c.backups...))
			}
			secs, err := c.cl.ListSecrets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var sc []string
			for _, x := range secs {
				sc = append(sc, x.Name)
			}
			if slices.Sort(sc); !slices.Equal(sc, sorted(c.secrets...)) {
				t.Errorf("%s lists secrets %v, want %v", c.who, sc, sorted(c.secrets...))
			}
			// Backups of another's sandbox, asked for by its id: none.
			other := hb.sb
			if c.who == "b" {
				other = ha.sb
			}
			if bks, err := c.cl.ListBackups(ctx, other); err != nil || (c.seeLocal != (len(bks) == 1)) {
				t.Errorf("%s lists %d backups of %s (%v)", c.who, len(bks), other, err)
			}
			// The ledger of a destroyed sandbox: the owner's and the all
			// callers' to read.
			for _, g := range []struct {
				id   string
				mine bool
			}{{ha.gone, c.who == "a"}, {hb.gone, c.who == "b"}} {
				_, err := c.cl.Ledger(ctx, g.id)
				if want := g.mine || c.seeLocal; (err == nil) != want {
					t.Errorf("%s reads the ledger of destroyed %s: %v, want readable %v", c.who, g.id, err, want)
				}
			}
		}
	})

	// Every route, as b, to a's objects and to objects that do not exist.
	t.Run("sandbox routes by id", func(t *testing.T) {
		checkNotFound(t, b.raw, sandboxRoutes, ha.sb, strings.Repeat("z", len(ha.sb)), hb.sb, hb.bk)
	})
	t.Run("sandbox routes by name", func(t *testing.T) {
		checkNotFound(t, b.raw, sandboxRoutes, ha.name, "no-such-box", hb.sb, hb.bk)
	})
	t.Run("the local caller's sandbox", func(t *testing.T) {
		checkNotFound(t, b.raw, sandboxRoutes[:8], local.ID, strings.Repeat("y", len(local.ID)), hb.sb, hb.bk)
	})
	t.Run("snapshot routes by id", func(t *testing.T) {
		checkNotFound(t, b.raw, snapshotRoutes, ha.snap, strings.Repeat("z", len(ha.snap)), hb.sb, hb.bk)
	})
	t.Run("snapshot routes by name", func(t *testing.T) {
		checkNotFound(t, b.raw, snapshotRoutes, ha.snapName, "no-such-snap", hb.sb, hb.bk)
	})
	t.Run("backup routes", func(t *testing.T) {
		checkNotFound(t, b.raw, backupRoutes, ha.bk, "bk"+strings.Repeat("z", 20), hb.sb, hb.bk)
	})
	t.Run("ledger of a destroyed sandbox", func(t *testing.T) {
		checkNotFound(t, b.raw, ledgerRoutes, ha.gone, strings.Repeat("z", len(ha.gone)), hb.sb, hb.bk)
	})
	t.Run("secret routes", func(t *testing.T) {
		checkNotFound(t, b.raw, secretRoutes, ha.sec, "no-such-tok", hb.sb, hb.bk)
	})

	// None of that touched a's things.
	sb, err := a.sdk.Get(ctx, ha.sb)
	if err != nil || sb.State != api.StateRunning {
		t.Fatalf("a's sandbox after b's attempts: %+v %v", sb, err)
	}
	if _, err := a.sdk.GetSnapshot(ctx, ha.snap); err != nil {
		t.Fatalf("a's snapshot after b's attempts: %v", err)
	}
	if _, err := a.sdk.GetBackup(ctx, ha.bk); err != nil {
		t.Fatalf("a's backup after b's attempts: %v", err)
	}
	if l, err := a.sdk.Ledger(ctx, ha.sb); err != nil || slices.ContainsFunc(l.Entries, func(e api.LedgerEntry) bool { return e.Kind == "payment.sent" }) {
		t.Fatalf("a's ledger after b's attempts: %v", err)
	}

	t.Run("names", func(t *testing.T) {
		// Sandbox and snapshot names are per owner: b takes a's names
		// without learning that a holds them.
		sb := b.raw.do("POST", "/v1/sandboxes", `{"image":"busybox","name":"`+ha.name+`"}`)
		if sb.status != http.StatusCreated {
			t.Errorf("b's sandbox named as a's: %d %s, want 201", sb.status, sb.body)
		}
		sn := b.raw.do("POST", "/v1/sandboxes/"+hb.sb+"/snapshots", `{"name":"`+ha.snapName+`"}`)
		if sn.status != http.StatusCreated {
			t.Errorf("b's snapshot named as a's: %d %s, want 201", sn.status, sn.body)
		}
		var made api.Sandbox
		if json.Unmarshal(sb.body, &made) == nil && made.ID != "" {
			if err := b.sdk.Delete(ctx, made.ID); err != nil {
				t.Error(err)
			}
		}
		// Secret names are per owner too: b's secret named as a's is
		// b's own, and a's is untouched.
		r := b.raw.do("PUT", "/v1/secrets/"+ha.sec, `{"value":"b-has-its-own"}`)
		var mine api.Secret
		if r.status != http.StatusCreated || json.Unmarshal(r.body, &mine) != nil || mine.CreatedBy != b.key.ID {
			t.Errorf("b's secret named as a's: %d %s, want 201 owned by b", r.status, r.body)
		}
		secs, _ := all.sdk.ListSecrets(ctx)
		for _, s := range secs {
			if s.Name == ha.sec && s.CreatedBy == a.key.ID && !s.UpdatedAt.Equal(s.CreatedAt) {
				t.Errorf("a's secret after b's set: %+v", s)
			}
		}
		if err := b.sdk.DeleteSecret(ctx, ha.sec); err != nil {
			t.Errorf("b deletes its secret named as a's: %v", err)
		}
		if s, err := a.sdk.GetSecret(ctx, ha.sec); err != nil || s.CreatedBy != a.key.ID {
			t.Errorf("a's secret after b's delete of its own: %+v %v", s, err)
		}
	})

	t.Run("injection rules", func(t *testing.T) {
		box, err := b.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: []string{"a.test"}}})
		if err != nil {
			t.Fatal(err)
		}
		inject := func(c keyClient, secret string) keyResp {
			return c.do("POST", "/v1/sandboxes/"+box.ID+"/network/injections",
				`{"host":"a.test","header":"X-Key","value":"k={{secret:`+secret+`}}"}`)
		}
		theirs, missing := inject(b.raw, ha.sec), inject(b.raw, "no-such-tok")
		if theirs.status != http.StatusBadRequest || !strings.Contains(theirs.err.Message, `secret "`+ha.sec+`" does not exist`) ||
			strings.ReplaceAll(theirs.err.Message, ha.sec, "X") != strings.ReplaceAll(missing.err.Message, "no-such-tok", "X") {
			t.Errorf("b's rule naming a's secret: %d %s; a missing one: %s", theirs.status, theirs.body, missing.body)
		}
		if r := inject(b.raw, hb.sec); r.status != http.StatusOK {
			t.Errorf("b's rule naming its own secret: %d %s", r.status, r.body)
		}
		// In create's network body, the same.
		_, err = b.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{
			Mode: api.NetworkEgress, AllowHosts: []string{"a.test"},
			Inject: []api.Injection{{Host: "a.test", Header: "X-Key", Value: "{{secret:" + ha.sec + "}}"}},
		}})
		if !errors.Is(err, paddock.ErrInvalidArgument) || !strings.Contains(err.Error(), `secret "`+ha.sec+`" does not exist`) {
			t.Errorf("b's create naming a's secret: %v", err)
		}
		// Not even the all key may: a rule's secret is its sandbox's
		// owner's, and b keeps none of that name.
		if r := inject(all.raw, ha.sec); r.status != http.StatusBadRequest || !strings.Contains(r.err.Message, `secret "`+ha.sec+`" does not exist`) {
			t.Fatalf("the all key's rule on b's sandbox naming a's secret: %d %s, want 400", r.status, r.body)
		}
		secs, err := a.sdk.ListSecrets(ctx)
		if err != nil || len(secs) != 1 || len(secs[0].UsedBy) != 0 {
			t.Errorf("a's secrets: %+v %v, want one, unused", secs, err)
		}
		if secs, _ := all.sdk.ListSecrets(ctx); !slices.ContainsFunc(secs, func(s api.Secret) bool { return s.Name == hb.sec && slices.Contains(s.UsedBy, box.ID) }) {
			t.Errorf("the all key does not see who uses b's secret: %+v", secs)
		}
		if _, err := all.sdk.RemoveInjection(ctx, box.ID, "a.test", ""); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("e2b secrets, snapshots and transforms", func(t *testing.T) {
		ek, err := d.client.CreateKeyWith(ctx, api.CreateKeyRequest{Name: "e2b-c", Format: api.KeyFormatE2B, Scope: api.KeyScopeOwn})
		if err != nil {
			t.Fatal(err)
		}
		ec := &e2bClient{t: t, base: "http://" + d.listen, key: ek.Secret}
		var secs []struct {
			Name string `json:"name"`
		}
		r := ec.do("GET", "/secrets", nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /secrets: %d %s", r.status, r.body)
		}
		if r.json(t, &secs); len(secs) != 0 {
			t.Errorf("an own E2B key lists others' secrets: %+v", secs)
		}
		ec.do("GET", "/secrets/"+ha.sec, nil, nil).errCode(t, http.StatusNotFound)
		ec.do("GET", "/secrets/sec_"+ha.sec, nil, nil).errCode(t, http.StatusNotFound)
		ec.do("DELETE", "/secrets/"+ha.sec, nil, nil).errCode(t, http.StatusNotFound)
		ec.do("POST", "/secrets/"+ha.sec, map[string]any{"value": "overwritten"}, nil).errCode(t, http.StatusNotFound)
		var snaps []struct {
			SnapshotID string `json:"snapshotID"`
		}
		r = ec.do("GET", "/snapshots", nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /snapshots: %d %s", r.status, r.body)
		}
		if r.json(t, &snaps); len(snaps) != 0 {
			t.Errorf("an own E2B key lists others' snapshots: %+v", snaps)
		}
		ec.do("DELETE", "/templates/"+ha.snap, nil, nil).errCode(t, http.StatusNotFound)
		theirs := ec.do("POST", "/v2/sandboxes", map[string]any{"templateID": ha.snap}, nil)
		missing := ec.do("POST", "/v2/sandboxes", map[string]any{"templateID": strings.Repeat("z", len(ha.snap))}, nil)
		if theirs.status < 400 || theirs.status != missing.status {
			t.Errorf("create from another key's snapshot: %d %s; from a missing one: %d %s", theirs.status, theirs.body, missing.status, missing.body)
		}

		rules := func(secret string) map[string]any {
			return map[string]any{"a.test": []any{map[string]any{"transform": map[string]any{
				"headers": map[string]string{"X-Key": "${e2b.secrets." + secret + "}"}}}}}
		}
		r = ec.do("POST", "/v2/sandboxes", map[string]any{"templateID": "busybox",
			"network": map[string]any{"allowOut": []string{"a.test"}, "rules": rules(ha.sec)}}, nil)
		if r.errCode(t, http.StatusBadRequest); !strings.Contains(string(r.body), "does not exist") {
			t.Errorf("create with a transform naming another key's secret: %s", r.body)
		}
		box := ec.create(map[string]any{"templateID": "busybox", "network": map[string]any{"allowOut": []string{"a.test"}}})
		r = ec.do("PUT", "/sandboxes/"+box.SandboxID+"/network", map[string]any{"allowOut": []string{"a.test"}, "rules": rules(ha.sec)}, nil)
		if r.errCode(t, http.StatusBadRequest); !strings.Contains(string(r.body), "does not exist") {
			t.Errorf("network update naming another key's secret: %s", r.body)
		}
		if r := ec.do("POST", "/secrets", map[string]any{"name": "c-tok", "value": "value-of-c"}, nil); r.status != http.StatusCreated {
			t.Fatalf("create an own secret: %d %s", r.status, r.body)
		}
		if r := ec.do("PUT", "/sandboxes/"+box.SandboxID+"/network", map[string]any{"allowOut": []string{"a.test"}, "rules": rules("c-tok")}, nil); r.status != http.StatusNoContent {
			t.Errorf("network update naming its own secret: %d %s", r.status, r.body)
		}
		// The same rules again are kept, not checked anew.
		if r := ec.do("PUT", "/sandboxes/"+box.SandboxID+"/network", map[string]any{"allowOut": []string{"a.test", "b.test"}, "rules": rules("c-tok")}, nil); r.status != http.StatusNoContent {
			t.Errorf("network update keeping its rules: %d %s", r.status, r.body)
		}
		if secs, err := a.sdk.ListSecrets(ctx); err != nil || len(secs) != 1 || secs[0].Name != ha.sec {
			t.Errorf("a's secrets after the E2B key's: %+v %v", secs, err)
		}
	})

	t.Run("shared resources", func(t *testing.T) {
		for _, r := range []route{
			{"DELETE", "/v1/images/busybox", ""},
			{"POST", "/v1/images/gc", ""},
			{"DELETE", "/v1/templates/no-such-template", ""},
			{"PUT", "/v1/pools/no-such-pool", `{"template":"no-such-template","min_ready":1}`},
			{"DELETE", "/v1/pools/no-such-pool", ""},
		} {
			got := a.raw.do(r.method, r.path, r.body)
			if got.status != http.StatusForbidden || !strings.Contains(got.err.Message, "scope all") {
				t.Errorf("own key %s %s: %d %s, want 403 naming scope all", r.method, r.path, got.status, got.body)
			}
		}
		// The all key passes the check (and finds nothing to delete).
		if got := all.raw.do("DELETE", "/v1/templates/no-such-template", ""); got.status != http.StatusNotFound {
			t.Errorf("all key deletes a missing template: %d %s", got.status, got.body)
		}
		// Reading shared things works.
		for _, p := range []string{"/v1/images", "/v1/templates", "/v1/pools", "/v1/policy", "/v1/info"} {
			if got := a.raw.do("GET", p, ""); got.status != http.StatusOK {
				t.Errorf("own key GET %s: %d %s", p, got.status, got.body)
			}
		}
	})

	t.Run("keys", func(t *testing.T) {
		if _, err := a.sdk.CreateKeyWith(ctx, api.CreateKeyRequest{Name: "escalate", Scope: api.KeyScopeAll}); !errors.Is(err, paddock.ErrPermissionDenied) {
			t.Errorf("own key creates a key of scope all: %v", err)
		}
		k, err := a.sdk.CreateKey(ctx, "child")
		if err != nil || k.Scope != api.KeyScopeOwn {
			t.Fatalf("own key creates a key: %+v %v", k, err)
		}
		child := &paddock.Client{URL: "http://" + d.listen, APIKey: k.Secret}
		if list, err := child.List(ctx, nil); err != nil || len(list) != 0 {
			t.Errorf("a key made by a sees a's sandboxes: %v %v", sandboxIDs(list), err)
		}
		if _, err := all.sdk.CreateKeyWith(ctx, api.CreateKeyRequest{Name: "ops-2", Scope: api.KeyScopeAll}); err != nil {
			t.Errorf("all key creates a key of scope all: %v", err)
		}
		out := d.must("keys", "ls")
		if !strings.Contains(out, "SCOPE") || !strings.Contains(out, "tenant-a") {
			t.Errorf("keys ls:\n%s", out)
		}
	})
}

// TestScopesFrontEnds: MCP over TCP with an own key lists only its
// sandboxes, and so does E2B's control plane with an own E2B key; another
// key's sandbox is not found there either.
func TestScopesFrontEnds(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	ek, err := d.client.CreateKeyWith(ctx, api.CreateKeyRequest{Name: "e2b-b", Format: api.KeyFormatE2B, Scope: api.KeyScopeOwn})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Name: "a-box"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox"}); err != nil {
		t.Fatal(err)
	}

	t.Run("mcp", func(t *testing.T) {
		cs := connectMCP(t, d, "http", a.key.Secret)
		var list struct {
			Sandboxes []struct{ ID string }
		}
		call(t, cs, "sandbox_list", nil, &list)
		if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sa.ID {
			t.Fatalf("sandbox_list with a's key: %+v, want only %s", list, sa.ID)
		}
		other := connectMCP(t, d, "http", ek.Secret)
		callErr(t, other, "exec", map[string]any{"sandbox": sa.ID, "command": "true"}, "not found")
		call(t, other, "sandbox_list", nil, &list)
		if len(list.Sandboxes) != 0 {
			t.Fatalf("sandbox_list with another own key: %+v, want none", list)
		}
	})

	t.Run("e2b", func(t *testing.T) {
		eb := &e2bClient{t: t, base: "http://" + d.listen, key: ek.Secret}
		ea := &e2bClient{t: t, base: "http://" + d.listen, key: a.key.Secret}
		mine := eb.create(map[string]any{"templateID": "busybox"})
		theirs := ea.create(map[string]any{"templateID": "busybox"})
		for _, path := range []string{"/sandboxes", "/v2/sandboxes"} {
			var listed []struct {
				SandboxID string `json:"sandboxID"`
			}
			r := eb.do("GET", path, nil, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			r.json(t, &listed)
			if len(listed) != 1 || listed[0].SandboxID != mine.SandboxID {
				t.Errorf("GET %s with b's E2B key: %+v, want only %s", path, listed, mine.SandboxID)
			}
		}
		for _, c := range []struct{ method, path string }{
			{"GET", "/sandboxes/" + theirs.SandboxID},
			{"POST", "/sandboxes/" + theirs.SandboxID + "/pause"},
			{"POST", "/v2/sandboxes/" + theirs.SandboxID + "/connect"},
			{"GET", "/sandboxes/" + theirs.SandboxID + "/metrics"},
			{"DELETE", "/sandboxes/" + theirs.SandboxID},
		} {
			var body any
			if c.method == "POST" {
				body = map[string]any{"timeout": 60}
			}
			eb.do(c.method, c.path, body, nil).errCode(t, http.StatusNotFound)
		}
		if r := ea.do("GET", "/sandboxes/"+theirs.SandboxID, nil, nil); r.status != http.StatusOK {
			t.Errorf("a gets its own E2B sandbox: %d %s", r.status, r.body)
		}
	})
}

// TestScopesIdentifiers: identifiers are per key. A pool's unclaimed
// sandboxes are no key's to see; the sandbox one key binds to an
// identifier is not found for another, whose use of the same identifier
// binds a sandbox of its own.
func TestScopesIdentifiers(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	d.must("template", "build", "-f", writeTemplate(t, loopTemplate, nil))
	d.must("pool", "set", "pt", "--min-ready", "1")
	waitPoolReady(t, d, "pt", 1)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	if list, err := a.sdk.List(ctx, nil); err != nil || len(list) != 0 {
		t.Fatalf("an own key lists the pool's unclaimed sandboxes: %v %v", sandboxIDs(list), err)
	}
	sa, err := a.sdk.IdentifierSandbox(ctx, "pt", "user-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.sdk.IdentifierSandbox(ctx, "pt", "user-1"); err != nil || again.ID != sa.ID {
		t.Fatalf("a's identifier again: %v %+v, want %s", err, again, sa.ID)
	}
	sb, err := b.sdk.IdentifierSandbox(ctx, "pt", "user-1")
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID == sa.ID || sb.CreatedBy != b.key.ID {
		t.Fatalf("b's user-1 is %s (created by %s); a's is %s", sb.ID, sb.CreatedBy, sa.ID)
	}
	if r := b.raw.do("GET", "/v1/sandboxes/"+sa.ID, ""); r.status != http.StatusNotFound {
		t.Errorf("b gets a's identifier sandbox: %d %s", r.status, r.body)
	}
	// Routes under the identifier reach the caller's own binding.
	r := b.raw.do("POST", "/v1/pools/pt/identifiers/user-1/exec", `{"cmd":["hostname"]}`)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"exit_code":0`) ||
		!strings.Contains(string(r.body), base64.StdEncoding.EncodeToString([]byte(sb.ID+"\n"))) {
		t.Errorf("b's exec under user-1: %d %s, want it to run in %s", r.status, r.body, sb.ID)
	}
	if list, err := b.sdk.List(ctx, nil); err != nil || !slices.Equal(sandboxIDs(list), []string{sb.ID}) {
		t.Errorf("b lists %v (%v), want only %s", sandboxIDs(list), err, sb.ID)
	}
}
