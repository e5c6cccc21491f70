package adversarial

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestScopesNamesPerOwner: sandbox and snapshot names are per owner. Two
// own keys each create a sandbox and a snapshot under one name without a
// conflict, and each name means the caller's own; a name only another key
// holds is not found word for word as one nobody holds, and creating under
// it succeeds, so probing names tells a key nothing. A key's own duplicate
// is still a conflict. An all caller's name means its own first, then the
// one owner's that holds it, and is a conflict naming no id when several
// do. The ledger of a destroyed sandbox, by name, is the caller's own.
func TestScopesNamesPerOwner(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 10*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	ops := newTenant(t, d, "ops", api.KeyScopeAll)

	create := func(tn tenant, name string) *api.Sandbox {
		t.Helper()
		sb, err := tn.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Name: name})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() { _ = d.client.Delete(ctxT(t, time.Minute), sb.ID) })
		return sb
	}
	devA, devB := create(a, "dev"), create(b, "dev")
	onlyA := create(a, "only-a")
	if _, err := a.sdk.CreateSnapshot(ctx, "only-a", api.CreateSnapshotRequest{Name: "only-a"}); err != nil {
		t.Fatal(err)
	}
	snapA, err := a.sdk.CreateSnapshot(ctx, "dev", api.CreateSnapshotRequest{Name: "deps"})
	if err != nil {
		t.Fatal(err)
	}
	snapB, err := b.sdk.CreateSnapshot(ctx, "dev", api.CreateSnapshotRequest{Name: "deps"})
	if err != nil {
		t.Fatalf("b's snapshot named as a's: %v", err)
	}
	if snapA.Sandbox != devA.ID || snapB.Sandbox != devB.ID {
		t.Errorf("snapshots of dev: a's of %s (want %s), b's of %s (want %s)", snapA.Sandbox, devA.ID, snapB.Sandbox, devB.ID)
	}

	// Each key's names are its own.
	for _, c := range []struct {
		who        string
		tn         tenant
		sb, snapID string
	}{{"a", a, devA.ID, snapA.ID}, {"b", b, devB.ID, snapB.ID}} {
		if got, err := c.tn.sdk.Get(ctx, "dev"); err != nil || got.ID != c.sb {
			t.Errorf("%s gets dev: %+v %v, want %s", c.who, got, err, c.sb)
		}
		if got, err := c.tn.sdk.GetSnapshot(ctx, "deps"); err != nil || got.ID != c.snapID {
			t.Errorf("%s gets snapshot deps: %+v %v, want %s", c.who, got, err, c.snapID)
		}
		var out strings.Builder
		_, err := c.tn.sdk.Exec(ctx, "dev", paddock.ExecOptions{Cmd: []string{"hostname"}, Stdout: &out})
		if err != nil || !strings.Contains(out.String(), c.sb[:8]) {
			t.Errorf("%s execs in dev: %v, want the hostname of %s", c.who, err, c.sb)
		}
	}

	// A name a key holds is still a conflict for that key, and says only that.
	for _, r := range []keyResp{
		a.raw.do("POST", "/v1/sandboxes", `{"image":"busybox","name":"dev"}`),
		a.raw.do("POST", "/v1/sandboxes/dev/snapshots", `{"name":"deps"}`),
	} {
		if r.status != http.StatusConflict || !strings.Contains(r.err.Message, "you already have") ||
			strings.Contains(r.err.Message, devB.ID) || strings.Contains(r.err.Message, snapB.ID) {
			t.Errorf("a reuses its own name: %d %s, want 409", r.status, r.body)
		}
	}

	// b probing a name only a holds learns nothing: the same 404 as a name
	// nobody holds, and creating under it just works.
	for _, p := range []struct{ path, other, missing string }{
		{"/v1/sandboxes/", "only-a", "no-such-box"},
		{"/v1/snapshots/", "only-a", "no-such-box"},
	} {
		theirs, missing := b.raw.do("GET", p.path+p.other, ""), b.raw.do("GET", p.path+p.missing, "")
		if theirs.status != http.StatusNotFound || theirs.status != missing.status ||
			strings.ReplaceAll(theirs.err.Message, p.other, "X") != strings.ReplaceAll(missing.err.Message, p.missing, "X") {
			t.Errorf("b GET %s%s: %d %s; one nobody holds: %d %s", p.path, p.other, theirs.status, theirs.body, missing.status, missing.body)
		}
	}
	onlyB := create(b, "only-a")
	if _, err := b.sdk.CreateSnapshot(ctx, "only-a", api.CreateSnapshotRequest{Name: "only-a"}); err != nil {
		t.Errorf("b names a snapshot as only a's sandbox is named: %v", err)
	}
	if got, err := a.sdk.Get(ctx, "only-a"); err != nil || got.ID != onlyA.ID {
		t.Errorf("a's only-a after b made one: %+v %v", got, err)
	}

	// An all caller: a name two owners hold asks for an id and names none;
	// a name one owner holds is that owner's; its own name is its own.
	for _, c := range []struct {
		who string
		cl  *paddock.Client
	}{{"ops", ops.sdk}, {"the socket", d.client}} {
		_, err := c.cl.Get(ctx, "dev")
		if !errors.Is(err, paddock.ErrConflict) || !strings.Contains(err.Error(), "by its id") ||
			strings.Contains(err.Error(), devA.ID) || strings.Contains(err.Error(), devB.ID) {
			t.Errorf("%s gets dev that a and b hold: %v, want a conflict asking for an id", c.who, err)
		}
		if _, err := c.cl.GetSnapshot(ctx, "deps"); !errors.Is(err, paddock.ErrConflict) {
			t.Errorf("%s gets snapshot deps that a and b hold: %v, want a conflict", c.who, err)
		}
		if got, err := c.cl.Get(ctx, devA.ID); err != nil || got.ID != devA.ID {
			t.Errorf("%s gets a's dev by id: %+v %v", c.who, got, err)
		}
	}
	if err := b.sdk.Delete(ctx, onlyB.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := ops.sdk.Get(ctx, "only-a"); err != nil || got.ID != onlyA.ID {
		t.Errorf("ops gets only-a, which only a holds: %+v %v", got, err)
	}
	own := create(ops, "dev")
	if got, err := ops.sdk.Get(ctx, "dev"); err != nil || got.ID != own.ID {
		t.Errorf("ops gets dev after making its own: %+v %v, want %s", got, err, own.ID)
	}
	if _, err := d.client.Get(ctx, "dev"); !errors.Is(err, paddock.ErrConflict) {
		t.Errorf("the socket gets dev that three keys hold: %v, want a conflict", err)
	}

	// The ledger of a's destroyed dev, by name, is a's even while b's live
	// dev has newer entries under the same name.
	if err := a.sdk.Delete(ctx, devA.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sdk.Exec(ctx, "dev", paddock.ExecOptions{Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if l, err := a.sdk.Ledger(ctx, "dev"); err != nil || l.SandboxID != devA.ID {
		t.Errorf("a reads the ledger of its destroyed dev by name: %+v %v, want %s's", l, err, devA.ID)
	}
}
