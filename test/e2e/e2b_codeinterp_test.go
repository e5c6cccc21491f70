package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ciLine is one line of the code interpreter's /execute stream.
type ciLine struct {
	Type           string `json:"type"`
	Text           string `json:"text"`
	Name           string `json:"name"`
	Value          string `json:"value"`
	IsMainResult   bool   `json:"is_main_result"`
	ExecutionCount uint64 `json:"execution_count"`
}

// ciExecute posts to /execute on port 49999 and reads the whole stream.
func ciExecute(t *testing.T, c *e2bClient, hdr map[string]string, body any) (int, string, []ciLine) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", c.base+"/execute", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	defer resp.Body.Close()
	var lines []ciLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l ciLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return resp.StatusCode, resp.Status, lines
}

// TestE2BCodeInterpreter covers the faults of the code-interpreter
// surface (port 49999) that the SDK suite in test/compat/e2b does not:
// token rules, addressing by host name, bounds, paused and python-less
// sandboxes, and a client that leaves mid-run.
func TestE2BCodeInterpreter(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "e2b-ci"))
	c := &e2bClient{t: t, base: "http://" + d.listen, key: key}
	anon := &e2bClient{t: t, base: c.base}

	sb := c.create(map[string]any{"templateID": "code-interpreter-v1", "timeout": 300})
	if sb.TemplateID != "code-interpreter-v1" {
		t.Fatalf("create returned %+v", sb)
	}
	hdr := func(extra ...string) map[string]string {
		h := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49999", "X-Access-Token": sb.EnvdAccessToken}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}

	t.Run("the stream ends with an explicit end", func(t *testing.T) {
		// Output and results travel apart from the interpreter, so their
		// order between them is not fixed; the count comes first and the
		// end last.
		// Output streams as it is written: "hi\n" may come as one chunk
		// or as "hi" and "\n" (print writes them apart, unbuffered).
		st, _, lines := ciExecute(t, anon, hdr(), map[string]any{"code": "print('hi')\n6 * 7"})
		byType := map[string]ciLine{}
		var stdout strings.Builder
		results := 0
		for _, l := range lines {
			byType[l.Type] = l
			switch l.Type {
			case "stdout":
				stdout.WriteString(l.Text)
			case "result":
				results++
			}
		}
		last := len(lines) - 1
		if st != 200 || len(lines) < 4 || lines[0].Type != "number_of_executions" || lines[0].ExecutionCount == 0 ||
			lines[last].Type != "end_of_execution" || stdout.String() != "hi\n" || results != 1 ||
			byType["result"].Text != "42" || !byType["result"].IsMainResult {
			t.Fatalf("status %d lines %+v", st, lines)
		}
	})

	t.Run("addressed by host name", func(t *testing.T) {
		host := map[string]string{"Host": "49999-" + sb.SandboxID + ".sandbox.test", "X-Access-Token": sb.EnvdAccessToken}
		st, _, lines := ciExecute(t, anon, host, map[string]any{"code": "'by host'"})
		if st != 200 || len(lines) < 2 || lines[1].Text != "'by host'" {
			t.Fatalf("status %d lines %+v", st, lines)
		}
		if r := anon.do("GET", "/contexts", nil, map[string]string{"Host": "49999-" + sb.SandboxID + ".sandbox.test"}); r.status != 200 || !strings.Contains(string(r.body), "e2b-default-python") {
			t.Fatalf("contexts by host name: %d %s", r.status, r.body)
		}
	})

	t.Run("faults", func(t *testing.T) {
		noToken := hdr()
		delete(noToken, "X-Access-Token")
		tests := []struct {
			name   string
			hdr    map[string]string
			body   any
			status int
			phrase string
		}{
			{"no access token", noToken, map[string]any{"code": "1"}, 401, "envdAccessToken"},
			{"wrong access token", hdr("X-Access-Token", "wrong"), map[string]any{"code": "1"}, 401, "envdAccessToken"},
			{"code too large", hdr(), map[string]any{"code": strings.Repeat("#", 1<<20+1)}, 400, "at most 1048576"},
			{"body too large", hdr(), map[string]any{"code": "1", "pad": strings.Repeat("x", 9<<20)}, 413, ""},
			{"unknown context", hdr(), map[string]any{"code": "1", "context_id": "nope"}, 404, ""},
			{"unsupported language", hdr(), map[string]any{"code": "1", "language": "r"}, 400, `language "r" is not supported`},
			{"bad variable", hdr(), map[string]any{"code": "1", "env_vars": map[string]string{"A=B": "1"}}, 400, "environment variable name"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				st, status, _ := ciExecute(t, anon, tc.hdr, tc.body)
				if st != tc.status || !strings.Contains(status, tc.phrase) {
					t.Fatalf("status %q, want %d with %q", status, tc.status, tc.phrase)
				}
			})
		}
		anon.do("GET", "/execute", nil, hdr()).errCode(t, 405)
		anon.do("GET", "/nothing", nil, hdr()).errCode(t, 404)
		anon.do("DELETE", "/contexts/nope", nil, hdr()).errCode(t, 404)
	})

	t.Run("a client that leaves interrupts the run", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		b, _ := json.Marshal(map[string]any{"code": "import time\nleft = 1\nprint('sleeping', flush=True)\ntime.sleep(30)\nleft = 2"})
		req, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/execute", bytes.NewReader(b))
		for k, v := range hdr() {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "sleeping") {
		}
		started := time.Now()
		cancel()
		resp.Body.Close()
		st, _, lines := ciExecute(t, anon, hdr(), map[string]any{"code": "left"})
		if st != 200 || len(lines) < 2 || lines[1].Text != "1" {
			t.Fatalf("after the client left: %d %+v", st, lines)
		}
		if el := time.Since(started); el > 10*time.Second {
			t.Fatalf("the next run waited %s: the abandoned run was not interrupted", el)
		}
	})

	t.Run("private traffic needs the traffic token on every call", func(t *testing.T) {
		r := c.do("POST", "/v2/sandboxes", map[string]any{"templateID": "code-interpreter", "network": map[string]any{"allowPublicTraffic": false}}, nil)
		var priv struct {
			SandboxID          string `json:"sandboxID"`
			EnvdAccessToken    string `json:"envdAccessToken"`
			TrafficAccessToken string `json:"trafficAccessToken"`
		}
		r.json(t, &priv)
		h := map[string]string{"E2b-Sandbox-Id": priv.SandboxID, "E2b-Sandbox-Port": "49999"}
		anon.do("GET", "/contexts", nil, h).errCode(t, 403)
		h["X-Access-Token"] = priv.EnvdAccessToken
		if st, _, _ := ciExecute(t, anon, h, map[string]any{"code": "1"}); st != 403 {
			t.Fatalf("execute without the traffic token: %d", st)
		}
		h["E2b-Traffic-Access-Token"] = priv.TrafficAccessToken
		if r := anon.do("GET", "/contexts", nil, h); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
			t.Fatalf("contexts with the traffic token: %d %s", r.status, r.body)
		}
	})

	t.Run("an image without python3", func(t *testing.T) {
		bb := c.create(map[string]any{"templateID": "busybox"})
		h := map[string]string{"E2b-Sandbox-Id": bb.SandboxID, "E2b-Sandbox-Port": "49999", "X-Access-Token": bb.EnvdAccessToken}
		if st, status, _ := ciExecute(t, anon, h, map[string]any{"code": "1"}); st != 400 || !strings.Contains(status, "python3 not found in this image") {
			t.Fatalf("busybox: %q", status)
		}
	})

	t.Run("a paused sandbox", func(t *testing.T) {
		if r := c.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{}, nil); r.status != http.StatusNoContent {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		// E2B's proxy answer for a sandbox it cannot route to.
		if st, status, _ := ciExecute(t, anon, hdr(), map[string]any{"code": "1"}); st != http.StatusBadGateway {
			t.Fatalf("paused: %d %q", st, status)
		}
		if r := c.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", map[string]any{}, nil); r.status != http.StatusCreated {
			t.Fatalf("connect: %d %s", r.status, r.body)
		}
		// Pause keeps memory: the default context and its state are there.
		if st, _, lines := ciExecute(t, anon, hdr(), map[string]any{"code": "left"}); st != 200 || len(lines) < 2 || lines[1].Text != "1" {
			t.Fatalf("after connect: %d %+v", st, lines)
		}
	})
}
