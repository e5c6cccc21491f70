package daemon

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/egress"
)

func TestNetworkConfigMaxConns(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int
		fail bool
	}{
		{"", 0, false}, {"64", 64, false}, {"0", 0, true}, {"-3", 0, true}, {"lots", 0, true}, {"99999999", 0, true},
	} {
		t.Setenv("PADDOCK_EGRESS_MAX_CONNS", tt.env)
		nc, err := networkConfigFromEnv()
		if tt.fail != (err != nil) || nc.MaxConns != tt.want {
			t.Errorf("%q: %d %v", tt.env, nc.MaxConns, err)
		}
		if tt.fail && !strings.Contains(err.Error(), "PADDOCK_EGRESS_MAX_CONNS") {
			t.Errorf("%q: error %v does not name the variable", tt.env, err)
		}
	}
}

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
		e := refusalEntry(tt.ref)
		if e.Note != tt.note || e.Data[tt.key] != tt.value || e.Kind != "egress_refused" {
			t.Errorf("%+v: %+v", tt.ref, e)
		}
	}
}
