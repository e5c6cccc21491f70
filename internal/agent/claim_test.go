package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func gateCall(t *testing.T, h http.Handler, method, path, token, body string) int {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		r.Header.Set(TokenHeader, token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func TestPoolAgentAnswersOnlyOneClaim(t *testing.T) {
	pool := strings.Repeat("p", 64)
	mine := strings.Repeat("m", 64)
	other := strings.Repeat("o", 64)
	h := New(Options{PoolToken: pool}).Handler()

	// Unclaimed: the pool's token opens nothing but the claim.
	if c := gateCall(t, h, "GET", "/health", pool, ""); c != http.StatusUnauthorized {
		t.Fatalf("health with the pool token before the claim: %d, want 401", c)
	}
	if c := gateCall(t, h, "GET", "/health", "", ""); c != http.StatusUnauthorized {
		t.Fatalf("health without a token: %d, want 401", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, other, `{"token":"`+mine+`"}`); c != http.StatusUnauthorized {
		t.Fatalf("claim with a wrong pool token: %d, want 401", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, pool, `{"token":"short"}`); c != http.StatusBadRequest {
		t.Fatalf("claim with a short token: %d, want 400", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, pool, `{"token":"`+pool+`"}`); c != http.StatusBadRequest {
		t.Fatalf("claim keeping the pool's token: %d, want 400", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, pool, `not json`); c != http.StatusBadRequest {
		t.Fatalf("claim with a bad body: %d, want 400", c)
	}
	if c := gateCall(t, h, "GET", ClaimPath, pool, ""); c != http.StatusMethodNotAllowed {
		t.Fatalf("claim with GET: %d, want 405", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, pool, `{"token":"`+mine+`"}`); c != http.StatusNoContent {
		t.Fatalf("claim: %d, want 204", c)
	}

	// Claimed: only the new token works; the pool's is forgotten.
	if c := gateCall(t, h, "GET", "/health", mine, ""); c != http.StatusNoContent && c != http.StatusOK {
		t.Fatalf("health with the new token: %d", c)
	}
	if c := gateCall(t, h, "GET", "/health", pool, ""); c != http.StatusUnauthorized {
		t.Fatalf("health with the pool token after the claim: %d, want 401", c)
	}
	if c := gateCall(t, h, "POST", ClaimPath, pool, `{"token":"`+other+`"}`); c != http.StatusConflict {
		t.Fatalf("second claim: %d, want 409", c)
	}
	if c := gateCall(t, h, "GET", "/health", mine, ""); c != http.StatusNoContent && c != http.StatusOK {
		t.Fatalf("health after a refused second claim: %d", c)
	}
}

func TestTokenAgentRefusesClaims(t *testing.T) {
	tok := strings.Repeat("t", 64)
	h := New(Options{Token: tok}).Handler()
	if c := gateCall(t, h, "POST", ClaimPath, tok, `{"token":"`+strings.Repeat("x", 64)+`"}`); c != http.StatusConflict {
		t.Fatalf("claim on an agent with its own token: %d, want 409", c)
	}
	if c := gateCall(t, h, "GET", "/health", tok, ""); c != http.StatusNoContent && c != http.StatusOK {
		t.Fatalf("health: %d", c)
	}
	if c := gateCall(t, h, "GET", "/health", strings.Repeat("t", 63)+"u", ""); c != http.StatusUnauthorized {
		t.Fatalf("health with a wrong token: %d, want 401", c)
	}
	if c := gateCall(t, h, "GET", "/health", strings.Repeat("t", 300), ""); c != http.StatusUnauthorized {
		t.Fatalf("health with an overlong token: %d, want 401", c)
	}
}
