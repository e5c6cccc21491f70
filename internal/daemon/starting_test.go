package daemon

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGateAnswersWhileStarting(t *testing.T) {
	var g gate
	for _, path := range []string{"/v1/health", "/v1/sandboxes", "/sandboxes"} {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body struct{ Code, Message, Status string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || body.Code != "unavailable" || body.Status != "starting" || body.Message == "" {
			t.Errorf("%s while starting: %d %v %+v", path, rec.Code, rec.Header(), body)
		}
	}
	g.open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/health", nil))
	if rec.Code != http.StatusTeapot {
		t.Errorf("after open: %d, want the real handler's answer", rec.Code)
	}
}
