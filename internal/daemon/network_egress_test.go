package daemon

import (
	"testing"

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
		e := refusalEntry(tt.ref)
		if e.Note != tt.note || e.Data[tt.key] != tt.value || e.Kind != "egress_refused" {
			t.Errorf("%+v: %+v", tt.ref, e)
		}
	}
}
