package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
)

// TestInProcessTransport: requests served in-process carry the caller
// and scope they were made for (and never one named in a header), keep
// their method, path and body, get the handler's status and headers, and
// stream: the client reads each write as it is made. A client that stops
// reading ends the handler's writes; a handler that panics breaks the
// answer off without taking the daemon down.
func TestInProcessTransport(t *testing.T) {
	step := make(chan struct{})
	writeErr := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /who", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, controller.Caller(r.Context())+" "+controller.CallerScope(r.Context())+" "+r.URL.Query().Get("q")+" "+string(body))
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		<-step
		io.WriteString(w, "second\n")
	})
	mux.HandleFunc("GET /endless", func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := io.WriteString(w, "x\n"); err != nil {
				writeErr <- err
				return
			}
		}
	})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic("boom")
	})
	mux.HandleFunc("GET /silent", func(w http.ResponseWriter, r *http.Request) {})
	const key = "aaaaaaaaaaaaaaaa"
	c := &http.Client{Transport: inProcess{h: mux, caller: key, scope: api.KeyScopeOwn}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	do := func(method, path string, body io.Reader, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+inProcessHost+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := do("POST", "/who?q=v", strings.NewReader("payload"), map[string]string{"X-Paddock-Caller": "bbbbbbbbbbbbbbbb"})
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Test") != "yes" || string(got) != key+" own v payload" {
		t.Errorf("POST /who: %d %v %q", resp.StatusCode, resp.Header, got)
	}

	resp = do("GET", "/stream", nil, nil)
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line before the handler went on: %q, %v", line, err)
	}
	close(step)
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
		t.Errorf("rest of the stream: %q, %v", rest, err)
	}
	resp.Body.Close()

	resp = do("GET", "/endless", nil, nil)
	if _, err := io.ReadFull(resp.Body, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case err := <-writeErr:
		if err == nil {
			t.Error("the handler's write after the client closed succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Error("the handler kept writing after the client closed the body")
	}

	resp = do("GET", "/panic", nil, nil)
	if _, err := io.ReadAll(resp.Body); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("reading a panicking handler's answer: %v, want the panic as an error", err)
	}
	resp.Body.Close()

	resp = do("GET", "/silent", nil, nil)
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(got) != 0 {
		t.Errorf("a handler that wrote nothing: %d %q", resp.StatusCode, got)
	}
}
