package adversarial

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestSecretNamesPerOwner: secret names are per owner. Two own keys each
// store a secret named token, with different values, and neither learns
// that the other has one (no conflict, nothing in list or get). Each
// key's sandbox, whose rule names {{secret:token}}, sends its own key's
// value upstream, never the other's. A key of scope all that names a
// secret only it keeps in a rule of another key's sandbox is refused: the
// sandbox's owner keeps no such secret. Deleting one key's token leaves
// the other's, still injected.
func TestSecretNamesPerOwner(t *testing.T) {
	requireHost(t)
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables: secrets live only on a daemon with egress networking")
	}
	plan := newNetPlan(t, 7)
	up := newInjUpstream(t, plan.NS, plan.HostIf, plan.HostCIDR, plan.Upstream)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, up.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{listen: true, env: []string{
		"PADDOCK_NETWORK_RANGE=" + plan.Range,
		"PADDOCK_EGRESS_DNS_STATIC=api.test.example=" + plan.Upstream,
		"PADDOCK_EGRESS_PERMIT=" + plan.Permit,
		"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9",
		"PADDOCK_EGRESS_UPSTREAM_CA=" + caFile,
	}})
	ctx := ctxT(t, 10*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	ops := newTenant(t, d, "ops", api.KeyScopeAll)
	mark := strings.ReplaceAll(uniqueName("v"), "-", "")
	value := map[string]string{"a": "value-of-a-" + mark, "b": "value-of-b-" + mark}

	// Both create token: each is a new secret of its own (201), where
	// names shared across owners made the second a 409 "taken".
	for _, c := range []struct {
		who string
		tn  tenant
	}{{"a", a}, {"b", b}} {
		r := c.tn.raw.do("PUT", "/v1/secrets/token", `{"value":"`+value[c.who]+`"}`)
		var s api.Secret
		if r.status != http.StatusCreated || json.Unmarshal(r.body, &s) != nil || s.CreatedBy != c.tn.key.ID {
			t.Fatalf("%s creates token: %d %s, want 201 owned by %s", c.who, r.status, r.body, c.tn.key.ID)
		}
	}

	// a's sandbox names token in create's body; b's gets its rule after.
	rule := api.Injection{Host: "api.test.example", Header: "Authorization", Value: "Bearer {{secret:token}}"}
	create := func(tn tenant, inject []api.Injection) *api.Sandbox {
		t.Helper()
		sb, err := tn.sdk.Create(ctx, api.CreateSandboxRequest{Network: &api.NetworkPolicy{
			Mode: api.NetworkEgress, AllowHosts: []string{"api.test.example"}, Inject: inject,
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.client.Delete(ctxT(t, time.Minute), sb.ID) })
		return sb
	}
	boxA, boxB := create(a, []api.Injection{rule}), create(b, nil)
	if _, err := b.sdk.SetInjection(ctx, boxB.ID, rule); err != nil {
		t.Fatalf("b's rule naming its own token: %v", err)
	}
	box := map[string]*api.Sandbox{"a": boxA, "b": boxB}
	tenants := map[string]tenant{"a": a, "b": b}

	// fetch sends one request from who's sandbox and returns what the
	// upstream saw of it.
	fetch := func(who, path string) []string {
		t.Helper()
		var out, stderr bytes.Buffer
		res, err := tenants[who].sdk.Exec(ctx, box[who].ID, paddock.ExecOptions{
			Cmd:    []string{"curl", "-sS", "--max-time", "20", "https://api.test.example" + path},
			Stdout: &out, Stderr: &stderr,
		})
		if err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "authorized=true") {
			t.Fatalf("%s's request %s: %+v %v %q %q", who, path, res, err, out.String(), stderr.String())
		}
		return up.saw(func(s string) bool { return strings.HasPrefix(s, "api.test.example "+path+" ") })
	}
	for _, who := range []string{"a", "b"} {
		path := "/from-" + who + "-" + mark
		if got, want := fetch(who, path), "api.test.example "+path+" auth=Bearer "+value[who]; len(got) != 1 || got[0] != want {
			t.Errorf("%s's sandbox sent %q, want its own owner's value (%q)", who, got, want)
		}
	}

	// Each key sees its own token only, used by its own sandbox only.
	for who, tn := range tenants {
		secs, err := tn.sdk.ListSecrets(ctx)
		if err != nil || len(secs) != 1 || secs[0].Name != "token" || secs[0].CreatedBy != tn.key.ID ||
			len(secs[0].UsedBy) != 1 || secs[0].UsedBy[0] != box[who].ID {
			t.Errorf("%s lists %+v %v, want its own token used by %s", who, secs, err, box[who].ID)
		}
		s, err := tn.sdk.GetSecret(ctx, "token")
		if err != nil || s.CreatedBy != tn.key.ID || len(s.UsedBy) != 1 || s.UsedBy[0] != box[who].ID {
			t.Errorf("%s gets token: %+v %v, want its own used by %s", who, s, err, box[who].ID)
		}
		for _, raw := range []string{"/v1/secrets", "/v1/secrets/token"} {
			if r := tn.raw.do("GET", raw, ""); strings.Contains(string(r.body), value["a"]) || strings.Contains(string(r.body), value["b"]) {
				t.Errorf("%s GET %s returned a value: %s", who, raw, r.body)
			}
		}
	}
	// Another owner's token is not asked for by owner either.
	if r := a.raw.do("GET", "/v1/secrets/token?owner="+b.key.ID, ""); r.status != http.StatusNotFound {
		t.Errorf("a gets b's token by owner: %d %s, want 404", r.status, r.body)
	}
	// The all key sees both, each with its owner, and names either.
	if secs, err := ops.sdk.ListSecrets(ctx); err != nil || len(secs) != 2 {
		t.Errorf("the all key lists %+v %v, want both tokens", secs, err)
	}
	if r := ops.raw.do("GET", "/v1/secrets/token?owner="+b.key.ID, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), b.key.ID) {
		t.Errorf("the all key gets b's token by owner: %d %s", r.status, r.body)
	}

	// A secret only the all key keeps does not exist for a's sandbox,
	// whoever sets the rule.
	if _, err := ops.sdk.SetSecret(ctx, "ops-only", []byte("value-of-ops-"+mark)); err != nil {
		t.Fatal(err)
	}
	_, err := ops.sdk.SetInjection(ctx, boxA.ID, api.Injection{Host: "api.test.example", Header: "X-Ops", Value: "{{secret:ops-only}}"})
	if !errors.Is(err, paddock.ErrInvalidArgument) || !strings.Contains(err.Error(), `secret "ops-only" does not exist`) {
		t.Errorf("the all key's rule on a's sandbox naming its own secret: %v, want invalid, does not exist", err)
	}

	// a's token is used by a's sandbox only; once the rule goes, a's delete
	// leaves b's token, still injected.
	r := a.raw.do("DELETE", "/v1/secrets/token", "")
	if r.status != http.StatusConflict || !strings.Contains(r.err.Message, boxA.ID) || strings.Contains(r.err.Message, boxB.ID) {
		t.Errorf("a deletes its token in use: %d %s, want 409 naming only %s", r.status, r.body, boxA.ID)
	}
	if _, err := a.sdk.RemoveInjection(ctx, boxA.ID, "api.test.example", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.sdk.DeleteSecret(ctx, "token"); err != nil {
		t.Fatalf("a deletes its token: %v", err)
	}
	if _, err := a.sdk.GetSecret(ctx, "token"); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("a's token after its delete: %v, want not found", err)
	}
	if s, err := b.sdk.GetSecret(ctx, "token"); err != nil || s.CreatedBy != b.key.ID {
		t.Errorf("b's token after a's delete: %+v %v", s, err)
	}
	path := "/from-b-after-" + mark
	if got, want := fetch("b", path), "api.test.example "+path+" auth=Bearer "+value["b"]; len(got) != 1 || got[0] != want {
		t.Errorf("b's sandbox after a's delete sent %q, want %q", got, want)
	}
	if err := b.sdk.DeleteSecret(ctx, "token"); !errors.Is(err, paddock.ErrConflict) {
		t.Errorf("b deletes its token in use: %v, want conflict", err)
	}
}
