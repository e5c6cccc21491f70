package errhttp

import (
	"net/http"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestTablesMapEveryClass: a class added to errdefs without a status in
// every table fails here.
func TestTablesMapEveryClass(t *testing.T) {
	for name, table := range map[string]Table{"API": API, "Envd": Envd} {
		if m := table.Missing(); len(m) > 0 {
			t.Errorf("table %s maps no status for %v", name, m)
		}
		for code, st := range table {
			if st < 400 || st > 599 {
				t.Errorf("table %s maps %s to %d, not an error status", name, code, st)
			}
		}
	}
}

func TestOverrides(t *testing.T) {
	if got := Envd.Status(api.CodeResourceExhausted); got != http.StatusInsufficientStorage {
		t.Errorf("envd resource_exhausted = %d, want 507", got)
	}
	if got := API.Status(api.CodeResourceExhausted); got != http.StatusTooManyRequests {
		t.Errorf("API resource_exhausted = %d, want 429 (With must not change the base)", got)
	}
	if got := API.Status("no-such-code"); got != http.StatusInternalServerError {
		t.Errorf("unknown code = %d, want 500", got)
	}
}
