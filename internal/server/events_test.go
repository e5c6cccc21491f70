package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// eventStream reads GET /v1/events line by line.
type eventStream struct {
	t      *testing.T
	events chan api.Event
}

func openEvents(t *testing.T, base, key string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %s", resp.Status)
	}
	s := &eventStream{t: t, events: make(chan api.Event, 256)}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("event %q: %v", sc.Text(), err)
				return
			}
			s.events <- ev
		}
	}()
	return s
}

// next is the next event other than a ping.
func (s *eventStream) next() api.Event {
	s.t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatal("the event stream ended")
			}
			if ev.Type != api.StreamPing {
				return ev
			}
		case <-time.After(30 * time.Second):
			s.t.Fatal("no event in 30 s")
		}
	}
}

// until reads events up to the one where sandbox id reaches state; it
// returns the sandbox ids the events named on the way.
func (s *eventStream) until(id, state string) map[string]bool {
	s.t.Helper()
	seen := map[string]bool{}
	for {
		ev := s.next()
		if ev.Type != api.StreamSandbox || ev.Sandbox == nil {
			s.t.Fatalf("event %+v: want a sandbox change", ev)
		}
		seen[ev.Sandbox.ID] = true
		if ev.Sandbox.ID == id && ev.Sandbox.State == state {
			return seen
		}
	}
}

func TestEventStream(t *testing.T) {
	a := newAPIServer(t)
	keyA, keyB := a.newKey(t, "events-a"), a.newKey(t, "events-b")
	var before api.Sandbox
	if st, raw := call(t, a.tcp.URL, keyA, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "before"}, &before); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	sa, sb, local := openEvents(t, a.tcp.URL, keyA), openEvents(t, a.tcp.URL, keyB), openEvents(t, a.local.URL, "")

	// The sync is each caller's own list, present even when empty.
	if ev := sa.next(); ev.Type != api.StreamSync || len(ev.Sandboxes) != 1 || ev.Sandboxes[0].ID != before.ID {
		t.Fatalf("A's sync: %+v; want its one sandbox", ev)
	}
	if ev := sb.next(); ev.Type != api.StreamSync || ev.Sandboxes == nil || len(ev.Sandboxes) != 0 {
		t.Fatalf("B's sync: %+v; want an empty list", ev)
	}
	if ev := local.next(); ev.Type != api.StreamSync || len(ev.Sandboxes) != 1 {
		t.Fatalf("the socket's sync: %+v; want the one sandbox", ev)
	}

	var sbA, sbB api.Sandbox
	if st, raw := call(t, a.tcp.URL, keyA, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{}, &sbA); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	if seen := sa.until(sbA.ID, api.StateRunning); len(seen) != 1 {
		t.Errorf("A's stream named %v; want only its new sandbox", seen)
	}
	if st, raw := call(t, a.tcp.URL, keyB, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{}, &sbB); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	// B's stream, in order, would have named A's sandbox before its own.
	if seen := sb.until(sbB.ID, api.StateRunning); len(seen) != 1 {
		t.Errorf("B's stream named %v; want only its own sandbox", seen)
	}
	seen := local.until(sbB.ID, api.StateRunning)
	if !seen[sbA.ID] || !seen[sbB.ID] {
		t.Errorf("the socket's stream named %v; want both sandboxes", seen)
	}

	// A state change says where it came from; the end is "destroyed".
	if st, raw := call(t, a.tcp.URL, keyA, http.MethodPost, "/v1/sandboxes/"+sbA.ID+"/stop", nil, nil); st != http.StatusOK {
		t.Fatalf("stop: %d %s", st, raw)
	}
	for {
		ev := sa.next()
		if ev.Sandbox.ID == sbA.ID && ev.To == api.StateStopped {
			if ev.From != api.StateStopping || ev.Sandbox.State != api.StateStopped {
				t.Errorf("stop event %+v", ev)
			}
			break
		}
	}
	if st, raw := call(t, a.tcp.URL, keyA, http.MethodDelete, "/v1/sandboxes/"+sbA.ID, nil, nil); st >= 300 {
		t.Fatalf("delete: %d %s", st, raw)
	}
	sa.until(sbA.ID, api.StateDestroyed)
}

func TestEventStreamsBounded(t *testing.T) {
	a := newAPIServer(t)
	key := a.newKey(t, "streams")
	for range 16 {
		openEvents(t, a.tcp.URL, key)
	}
	st, raw := call(t, a.tcp.URL, key, http.MethodGet, "/v1/events", nil, nil)
	wantError(t, "a 17th event stream", st, raw, http.StatusTooManyRequests, api.CodeResourceExhausted)
	// Another caller still has its own.
	openEvents(t, a.tcp.URL, a.newKey(t, "streams-other")).next()
}

// TestTerminalKeyAsSubprotocol: a browser's WebSocket cannot carry an
// Authorization header, so the key may come as a subprotocol; the server
// answers "paddock" and never echoes the key.
func TestTerminalKeyAsSubprotocol(t *testing.T) {
	a := newAPIServer(t)
	key, other := a.newKey(t, "ws"), a.newKey(t, "ws-other")
	var sb api.Sandbox
	if st, raw := call(t, a.tcp.URL, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{}, &sb); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	u := "ws" + strings.TrimPrefix(a.tcp.URL, "http") + "/v1/sandboxes/" + sb.ID + "/pty?cmd=/bin/sh"
	dial := func(protos ...string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: protos})
	}
	conn, resp, err := dial("paddock", "paddock.bearer."+key)
	if err != nil {
		t.Fatalf("dial with the key as a subprotocol: %v", err)
	}
	defer conn.CloseNow()
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "paddock" {
		t.Errorf("the server chose subprotocol %q; want paddock", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	typ, msg, err := conn.Read(ctx)
	var m api.PTYMessage
	if err != nil || typ != websocket.MessageText || json.Unmarshal(msg, &m) != nil || m.Type != api.PTYReady {
		t.Fatalf("first message: %v %q %v; want ready", typ, msg, err)
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")

	for _, tc := range []struct {
		what   string
		protos []string
		want   int
	}{
		{"no key", []string{"paddock"}, http.StatusUnauthorized},
		{"a wrong key", []string{"paddock", "paddock.bearer.pdk_wrong"}, http.StatusUnauthorized},
		{"another tenant's key", []string{"paddock", "paddock.bearer." + other}, http.StatusNotFound},
	} {
		c, resp, err := dial(tc.protos...)
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: connected; want %d", tc.what, tc.want)
			continue
		}
		if resp == nil || resp.StatusCode != tc.want {
			t.Errorf("%s: %v %v; want %d", tc.what, resp, err, tc.want)
		}
	}
}

func TestHostStats(t *testing.T) {
	a := newAPIServer(t)
	key := a.newKey(t, "stats")
	var sb api.Sandbox
	if st, raw := call(t, a.tcp.URL, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{}, &sb); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	// Figures of every tenant: not for a key of scope own.
	st, raw := call(t, a.tcp.URL, key, http.MethodGet, "/v1/stats", nil, nil)
	wantError(t, "stats with a key of scope own", st, raw, http.StatusForbidden, api.CodePermissionDenied)
	var hs api.HostStats
	if st, raw := call(t, a.local.URL, "", http.MethodGet, "/v1/stats", nil, &hs); st != http.StatusOK {
		t.Fatalf("stats on the socket: %d %s", st, raw)
	}
	if len(hs.Minutes) != api.StatsMinutes || hs.States[api.StateRunning] != 1 {
		t.Fatalf("stats: %d minutes, states %v", len(hs.Minutes), hs.States)
	}
	creates := 0
	for _, m := range hs.Minutes {
		creates += m.Creates
	}
	if creates != 1 || hs.Minutes[len(hs.Minutes)-1].States[api.StateRunning] != 1 {
		t.Errorf("stats count %d creates, last minute %+v; want the one", creates, hs.Minutes[len(hs.Minutes)-1])
	}
}

// TestEventsThroughTheSDK: the Go client's stream gives the sync, then
// the changes.
func TestEventsThroughTheSDK(t *testing.T) {
	a := newAPIServer(t)
	key := a.newKey(t, "sdk-events")
	c := &paddock.Client{URL: a.tcp.URL, APIKey: key}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Events(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Sandboxes == nil || len(s.Sandboxes) != 0 {
		t.Fatalf("sync: %v; want an empty list", s.Sandboxes)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == api.StreamSandbox && ev.Sandbox.ID == sb.ID && ev.To == api.StateRunning {
			return
		}
	}
}
