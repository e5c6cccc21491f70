package network

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/egress"
)

func TestRefusalEntry(t *testing.T) {
	for _, tt := range []struct {
		ref        egress.Refusal
		note       string
		key, value string
	}{
		{egress.Refusal{Host: "a.test", Port: 443, Rule: "default-deny", Via: "connect"}, "a.test:443 refused by rule default-deny", "via", "connect"},
		{egress.Refusal{Host: "a.test", Port: 53, Rule: "deny:a.test", Via: "dns", Repeats: 41}, "a.test:53 refused by rule deny:a.test 41 more times", "repeats", "41"},
		{egress.Refusal{Repeats: 900, Others: true}, "900 more refusals of other destinations, not recorded one by one (rate limit)", "others", "true"},
	} {
		e := RefusalEntry(tt.ref)
		if e.Note != tt.note || e.Data[tt.key] != tt.value || e.Kind != "egress_refused" {
			t.Errorf("%+v: %+v", tt.ref, e)
		}
	}
}

// TestRefusalRecorder: a refusal becomes its sandbox's ledger entry through
// Record; without Record (no controller yet) it is dropped, not a panic.
func TestRefusalRecorder(t *testing.T) {
	refusalRecorder(nil)(egress.Refusal{Sandbox: "sba", Host: "a.test", Port: 443, Rule: "default-deny"})
	var got []string
	rec := refusalRecorder(func(ctx context.Context, sandbox string, e api.LedgerEntry) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("record runs without a deadline")
		}
		got = append(got, sandbox+" "+e.Note)
		return nil
	})
	rec(egress.Refusal{Sandbox: "sba", Host: "a.test", Port: 443, Rule: "default-deny", Via: "connect"})
	if len(got) != 1 || got[0] != "sba a.test:443 refused by rule default-deny" {
		t.Errorf("recorded %q", got)
	}
}
