package server

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// An internal error in a streamed event reaches the client as a reference
// only, as in a whole response; the details go to the log with it. Other
// errors keep their words.
func TestStreamedInternalErrorsHidden(t *testing.T) {
	const detail = "open /var/lib/paddock/paddock.db: disk I/O error"
	internal := func() *api.Error { return &api.Error{Code: api.CodeInternal, Message: detail} }
	var logBuf bytes.Buffer
	rec := httptest.NewRecorder()
	w := &statusWriter{ResponseWriter: rec, log: slog.New(slog.NewTextHandler(&logBuf, nil)), r: httptest.NewRequest("POST", "/v1/sandboxes/x/exec", nil)}
	n := newNDJSON(w)
	for _, ev := range []any{
		api.ExecEvent{Type: api.EventEnd, Error: internal()},
		api.WatchEvent{Type: "error", Error: internal()},
		api.BuildEvent{Type: "error", Error: internal()},
		api.TemplateBuildEvent{Type: api.BuildEnd, Error: internal()},
		api.ExecEvent{Type: api.EventEnd, Error: &api.Error{Code: api.CodeNotFound, Message: "sandbox x was destroyed while the request ran"}},
	} {
		if err := n.send(ev); err != nil {
			t.Fatal(err)
		}
	}
	body := rec.Body.String()
	if strings.Contains(body, "paddock.db") {
		t.Errorf("an internal error's details reached the client:\n%s", body)
	}
	if got := strings.Count(body, "internal error (reference "); got != 4 {
		t.Errorf("%d events say internal error with a reference, want 4:\n%s", got, body)
	}
	if !strings.Contains(body, "was destroyed while the request ran") {
		t.Errorf("a not-found error lost its words:\n%s", body)
	}
	if got := strings.Count(logBuf.String(), "paddock.db"); got != 4 {
		t.Errorf("the log holds the details %d times, want 4:\n%s", got, logBuf.String())
	}
	// The terminal's control stream has no ResponseWriter: the same.
	s := &Server{log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	if e := s.apiError(errInternal(detail)); strings.Contains(e.Message, "paddock.db") || !strings.Contains(e.Message, "internal error (reference ") {
		t.Errorf("terminal control error: %+v", e)
	}
}

type errInternal string

func (e errInternal) Error() string { return string(e) }
