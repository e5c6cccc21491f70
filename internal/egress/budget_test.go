package egress

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestHeaderBudget(t *testing.T) {
	endless := "GET / HTTP/1.1\r\nHost: a.test\r\nX-Big: " + strings.Repeat("a", 4<<20) + "\r\n\r\n"
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"small request", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", false},
		{"header past the bound", endless, true},
		{"start line past the bound", "GET /" + strings.Repeat("b", 4<<20) + " HTTP/1.1\r\nHost: a.test\r\n\r\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hb := &headerBudget{r: strings.NewReader(tt.in)}
			br := bufio.NewReader(hb)
			hb.arm(maxHeaderBytes + int64(br.Size()))
			_, err := http.ReadRequest(br)
			hb.disarm()
			if tt.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, errHeadersTooLarge) {
				t.Fatalf("err = %v, want %v", err, errHeadersTooLarge)
			}
		})
	}
}

// TestHeaderBudgetLeavesBodiesAlone checks that a body larger than the
// header bound, and the next request on the same connection, still read
// once the budget is disarmed and armed again.
func TestHeaderBudgetLeavesBodiesAlone(t *testing.T) {
	body := strings.Repeat("x", 3*maxHeaderBytes)
	in := "POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body +
		"GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n"
	hb := &headerBudget{r: strings.NewReader(in)}
	br := bufio.NewReader(hb)
	for i, want := range []string{"/up", "/next"} {
		hb.arm(maxHeaderBytes + int64(br.Size()))
		req, err := http.ReadRequest(br)
		hb.disarm()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if req.URL.Path != want {
			t.Fatalf("request %d path %q, want %q", i, req.URL.Path, want)
		}
		got, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("request %d body: %v", i, err)
		}
		if i == 0 && len(got) != len(body) {
			t.Fatalf("body %d bytes, want %d", len(got), len(body))
		}
	}
}
