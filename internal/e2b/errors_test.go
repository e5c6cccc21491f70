package e2b

import (
	"net/http"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestStatusesMapEveryClass: the E2B API's table maps every error class,
// with the overrides E2B's SDKs depend on.
func TestStatusesMapEveryClass(t *testing.T) {
	if m := statuses.Missing(); len(m) > 0 {
		t.Errorf("the E2B table maps no status for %v", m)
	}
	for code, want := range map[string]int{
		// 429 would read as a rate limit in the SDKs.
		api.CodeResourceExhausted:  http.StatusBadRequest,
		api.CodeFailedPrecondition: http.StatusBadRequest,
		api.CodeNotFound:           http.StatusNotFound,
		api.CodeUnauthenticated:    http.StatusUnauthorized,
		api.CodeInternal:           http.StatusInternalServerError,
	} {
		if got := statuses.Status(code); got != want {
			t.Errorf("E2B status of %s = %d, want %d", code, got, want)
		}
	}
}
