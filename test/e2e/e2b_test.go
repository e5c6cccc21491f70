package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// e2bClient speaks E2B's REST API and data plane to a daemon's TCP
// listener, the way E2B's SDKs do.
type e2bClient struct {
	t    *testing.T
	base string
	key  string
}

type e2bResp struct {
	status int
	header http.Header
	body   []byte
}

func (r e2bResp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %q is not JSON: %v", r.status, r.body, err)
	}
}

// errCode checks E2B's error body: {code: <http status>, message}.
func (r e2bResp) errCode(t *testing.T, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d (%s), want %d", r.status, r.body, want)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	r.json(t, &e)
	if e.Code != want || e.Message == "" {
		t.Fatalf("error body %s: want code %d and a message", r.body, want)
	}
}

func (c *e2bClient) do(method, path string, body any, hdr map[string]string) e2bResp {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.key != "" {
		req.Header.Set("X-API-Key", c.key)
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
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return e2bResp{status: resp.StatusCode, header: resp.Header, body: b}
}

type e2bSandbox struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken"`
	State           string `json:"state"`
}

func (c *e2bClient) create(body map[string]any) e2bSandbox {
	c.t.Helper()
	r := c.do("POST", "/v2/sandboxes", body, nil)
	if r.status != http.StatusCreated {
		c.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var sb e2bSandbox
	r.json(c.t, &sb)
	return sb
}

func (c *e2bClient) envd(id, token, path string) e2bResp {
	c.t.Helper()
	h := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"}
	if token != "" {
		h["X-Access-Token"] = token
	}
	return c.do("GET", path, nil, h)
}

func TestE2BFacade(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "e2b-facade"))
	if !strings.HasPrefix(key, "e2b_") || len(key) != 68 {
		t.Fatalf("key %q is not e2b_ + 64 hex", key)
	}
	if _, err := d.client.CreateKeyFormat(context.Background(), "odd", "rot13"); !errors.Is(err, paddock.ErrInvalidArgument) {
		t.Fatalf("unknown key format: %v, want invalid argument", err)
	}
	c := &e2bClient{t: t, base: "http://" + d.listen, key: key}
	anon := &e2bClient{t: t, base: c.base}

	t.Run("authentication", func(t *testing.T) {
		anon.do("GET", "/v2/sandboxes", nil, nil).errCode(t, 401)
		bad := &e2bClient{t: t, base: c.base, key: "e2b_" + strings.Repeat("0", 64)}
		bad.do("GET", "/v2/sandboxes", nil, nil).errCode(t, 401)
		if r := c.do("GET", "/v2/sandboxes", nil, nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
			t.Fatalf("empty list: %d %s", r.status, r.body)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		tests := []struct {
			name, method, path string
			body               any
			want               int
		}{
			{"unknown template", "POST", "/v2/sandboxes", map[string]any{"templateID": "no-such-template"}, 400},
			{"timeout too long", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "timeout": 10 * 86400}, 400},
			{"timeout zero", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "timeout": 0}, 400},
			{"IPv6 egress rule", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "network": map[string]any{"allowOut": []string{"2001:db8::1"}}}, 400},
			{"metadata address egress rule", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "network": map[string]any{"allowOut": []string{"169.254.169.254"}}}, 400},
			{"egress proxy", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "network": map[string]any{"egressProxy": map[string]string{"address": "p.test:1080"}}}, 400},
			{"iam tokens", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "iam": map[string]any{"tokens": map[string]any{"a": map[string]string{"audience": "x", "tokenType": "JWT"}}}}, 400},
			{"network of an unknown sandbox", "PUT", "/sandboxes/nosuchsandbox/network", map[string]any{"allowOut": []string{"a.test"}}, 404},
			{"fork count zero", "POST", "/sandboxes/nosuchsandbox/fork", map[string]any{"count": 0}, 400},
			{"fork count too high", "POST", "/sandboxes/nosuchsandbox/fork", map[string]any{"count": 65}, 400},
			{"fork unknown", "POST", "/sandboxes/nosuchsandbox/fork", map[string]any{"count": 1}, 404},
			{"snapshot unknown", "POST", "/sandboxes/nosuchsandbox/snapshots", map[string]any{}, 404},
			{"snapshot list limit", "GET", "/snapshots?limit=0", nil, 400},
			{"snapshot list token", "GET", "/snapshots?nextToken=%21", nil, 400},
			{"delete unknown snapshot", "DELETE", "/templates/nosuchsnapshot", nil, 404},
			{"secret reserved prefix", "POST", "/secrets", map[string]any{"name": "sec_x", "value": "v"}, 400},
			{"secret bad name", "POST", "/secrets", map[string]any{"name": "a b", "value": "v"}, 400},
			{"secret without value", "POST", "/secrets", map[string]any{"name": "ok"}, 400},
			{"secret with metadata", "POST", "/secrets", map[string]any{"name": "ok", "value": "v", "metadata": map[string]string{"a": "b"}}, 400},
			{"secret value with a newline", "POST", "/secrets", map[string]any{"name": "ok", "value": "a\nb"}, 400},
			{"unknown secret", "GET", "/secrets/sec_nothere", nil, 404},
			{"update unknown secret", "POST", "/secrets/nothere", map[string]any{"value": "v"}, 404},
			{"delete unknown secret", "DELETE", "/secrets/nothere", nil, 404},
			{"secret list limit", "GET", "/secrets?limit=500", nil, 400},
			{"volumes", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "volumeMounts": []any{map[string]string{"name": "v", "path": "/v"}}}, 400},
			{"reserved metadata", "POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "metadata": map[string]string{"paddock.dev/e2b-envd-token": "x"}}, 400},
			{"not JSON", "POST", "/v2/sandboxes", "][", 400},
			{"bad state filter", "GET", "/v2/sandboxes?state=gone", nil, 400},
			{"bad page token", "GET", "/v2/sandboxes?nextToken=%21", nil, 400},
			{"unknown sandbox", "GET", "/sandboxes/nosuchsandbox", nil, 404},
			{"kill unknown", "DELETE", "/sandboxes/nosuchsandbox", nil, 404},
			{"id with dash", "GET", "/sandboxes/a-b", nil, 404},
			{"unsupported route", "POST", "/templates", map[string]any{}, 404},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				c.do(tc.method, tc.path, tc.body, nil).errCode(t, tc.want)
			})
		}
	})

	sb := c.create(map[string]any{"templateID": "busybox", "timeout": 300, "metadata": map[string]string{"k": "v"}})
	if strings.Contains(sb.SandboxID, "-") || sb.EnvdAccessToken == "" || sb.EnvdVersion == "" || sb.TemplateID != "busybox" {
		t.Fatalf("create returned %+v", sb)
	}

	t.Run("data plane enforces the access token", func(t *testing.T) {
		c.envd(sb.SandboxID, "", "/health").errCode(t, 401)
		c.envd(sb.SandboxID, "wrong", "/health").errCode(t, 401)
		if r := c.envd(sb.SandboxID, sb.EnvdAccessToken, "/health"); r.status != http.StatusNoContent {
			t.Fatalf("health with the token: %d %s", r.status, r.body)
		}
		host := map[string]string{"Host": "49983-" + sb.SandboxID + ".sandbox.test", "X-Access-Token": sb.EnvdAccessToken}
		if r := anon.do("GET", "/health", nil, host); r.status != http.StatusNoContent {
			t.Fatalf("health by host name: %d %s", r.status, r.body)
		}
		delete(host, "X-Access-Token")
		anon.do("GET", "/health", nil, host).errCode(t, 401)
	})

	t.Run("data plane addressing faults", func(t *testing.T) {
		anon.do("GET", "/", nil, map[string]string{"E2b-Sandbox-Id": "nosuchsandbox", "E2b-Sandbox-Port": "49983"}).errCode(t, 502)
		anon.do("GET", "/", nil, map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "99999"}).errCode(t, 400)
		// Paddock's own agent services are not part of E2B's surface.
		anon.do("GET", "/paddock/v1/tar?path=/", nil, map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": sb.EnvdAccessToken}).errCode(t, 404)
		// Nothing listens on this port inside the sandbox.
		anon.do("GET", "/", nil, map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "9"}).errCode(t, 503)
		// A sandbox made through /v1 is not reachable through E2B's data plane.
		native := strings.TrimSpace(d.must("create", "--image", "busybox"))
		anon.do("GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": native, "E2b-Sandbox-Port": "49983"}).errCode(t, 502)
		c.do("GET", "/sandboxes/"+native, nil, nil).errCode(t, 404)
	})

	t.Run("insecure sandbox needs no token", func(t *testing.T) {
		open := c.create(map[string]any{"templateID": "busybox", "secure": false})
		if open.EnvdAccessToken != "" {
			t.Fatalf("secure:false returned a token")
		}
		if r := c.envd(open.SandboxID, "", "/health"); r.status != http.StatusNoContent {
			t.Fatalf("health: %d %s", r.status, r.body)
		}
		if r := c.do("DELETE", "/sandboxes/"+open.SandboxID, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("kill: %d %s", r.status, r.body)
		}
	})

	t.Run("private traffic needs the traffic token", func(t *testing.T) {
		r := c.do("POST", "/v2/sandboxes", map[string]any{"templateID": "busybox", "network": map[string]any{"allowPublicTraffic": false}}, nil)
		var priv struct {
			SandboxID          string `json:"sandboxID"`
			TrafficAccessToken string `json:"trafficAccessToken"`
		}
		r.json(t, &priv)
		if r.status != http.StatusCreated || priv.TrafficAccessToken == "" {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		h := map[string]string{"E2b-Sandbox-Id": priv.SandboxID, "E2b-Sandbox-Port": "9"}
		anon.do("GET", "/", nil, h).errCode(t, 403)
		h["E2b-Traffic-Access-Token"] = priv.TrafficAccessToken
		anon.do("GET", "/", nil, h).errCode(t, 503) // admitted; nothing listens there
	})

	t.Run("auto-pause stops an idle sandbox and connect brings it back", func(t *testing.T) {
		ap := c.create(map[string]any{"templateID": "busybox", "timeout": 1, "autoPause": true})
		deadline := time.Now().Add(60 * time.Second)
		for {
			var info e2bSandbox
			c.do("GET", "/sandboxes/"+ap.SandboxID, nil, nil).json(t, &info)
			if info.State == "paused" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %q after its timeout", info.State)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if r := c.do("POST", "/v2/sandboxes/"+ap.SandboxID+"/connect", map[string]any{}, nil); r.status != http.StatusCreated {
			t.Fatalf("connect: %d %s", r.status, r.body)
		}
		if r := c.envd(ap.SandboxID, ap.EnvdAccessToken, "/health"); r.status != http.StatusNoContent {
			t.Fatalf("health after connect: %d %s", r.status, r.body)
		}
	})

	t.Run("pause and connect", func(t *testing.T) {
		if r := c.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{}, nil); r.status != http.StatusNoContent {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		c.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{}, nil).errCode(t, 409)
		c.envd(sb.SandboxID, sb.EnvdAccessToken, "/health").errCode(t, 502)
		var listed []e2bSandbox
		c.do("GET", "/v2/sandboxes?state=paused&metadata=k%3Dv", nil, nil).json(t, &listed)
		if len(listed) != 1 || listed[0].SandboxID != sb.SandboxID || listed[0].State != "paused" {
			t.Fatalf("paused list: %+v", listed)
		}
		r := c.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 300}, nil)
		if r.status != http.StatusCreated {
			t.Fatalf("connect to a paused sandbox: %d %s", r.status, r.body)
		}
		var again e2bSandbox
		r.json(t, &again)
		if again.EnvdAccessToken != sb.EnvdAccessToken {
			t.Fatalf("connect returned a different token")
		}
		if r := c.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", map[string]any{}, nil); r.status != http.StatusOK {
			t.Fatalf("connect to a running sandbox: %d %s", r.status, r.body)
		}
		if r := c.envd(sb.SandboxID, sb.EnvdAccessToken, "/health"); r.status != http.StatusNoContent {
			t.Fatalf("health after connect: %d %s", r.status, r.body)
		}
	})

	t.Run("paging", func(t *testing.T) {
		other := c.create(map[string]any{"templateID": "busybox", "metadata": map[string]string{"k": "v"}})
		seen := map[string]bool{}
		token := ""
		for page := 0; page < 5; page++ {
			path := "/v2/sandboxes?limit=1&metadata=k%3Dv"
			if token != "" {
				path += "&nextToken=" + token
			}
			r := c.do("GET", path, nil, nil)
			var items []e2bSandbox
			r.json(t, &items)
			if len(items) != 1 {
				t.Fatalf("page %d: %s", page, r.body)
			}
			seen[items[0].SandboxID] = true
			if token = r.header.Get("X-Next-Token"); token == "" {
				break
			}
		}
		if len(seen) != 2 || !seen[sb.SandboxID] || !seen[other.SandboxID] {
			t.Fatalf("pages saw %v", seen)
		}
	})

	t.Run("timeout ends the sandbox", func(t *testing.T) {
		short := c.create(map[string]any{"templateID": "busybox"})
		if r := c.do("POST", "/sandboxes/"+short.SandboxID+"/timeout", map[string]any{"timeout": 1}, nil); r.status != http.StatusNoContent {
			t.Fatalf("set timeout: %d %s", r.status, r.body)
		}
		deadline := time.Now().Add(60 * time.Second)
		for c.do("GET", "/sandboxes/"+short.SandboxID, nil, nil).status != http.StatusNotFound {
			if time.Now().After(deadline) {
				t.Fatal("the sandbox outlived its timeout")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("kill", func(t *testing.T) {
		if r := c.do("DELETE", "/sandboxes/"+sb.SandboxID, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("kill: %d %s", r.status, r.body)
		}
		c.do("DELETE", "/sandboxes/"+sb.SandboxID, nil, nil).errCode(t, 404)
		c.envd(sb.SandboxID, sb.EnvdAccessToken, "/health").errCode(t, 502)
	})
}
