package reply

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestRPCKeepsKindDropsSentinelText(t *testing.T) {
	err := RPC(fmt.Errorf("open /x: no such file: %w", errdefs.ErrNotFound))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || ce.Message() != "open /x: no such file" {
		t.Fatalf("RPC = %v", err)
	}
	if RPC(nil) != nil {
		t.Error("RPC(nil) is not nil")
	}
	already := connect.NewError(connect.CodeAborted, errors.New("x"))
	if RPC(already) != already {
		t.Error("a Connect error was wrapped again")
	}
}

func TestErrorWritesEnvdBody(t *testing.T) {
	rec := httptest.NewRecorder()
	Error(rec, errdefs.Invalid("path contains a NUL byte"))
	var body struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusBadRequest || body.Code != rec.Code || body.Message != "path contains a NUL byte" {
		t.Errorf("got %d %+v", rec.Code, body)
	}
	if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", rec.Header())
	}
}
