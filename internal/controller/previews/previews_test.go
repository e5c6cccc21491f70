package previews

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// TestExposeCheckRevoke: an exposed port's token opens it and nothing
// else does (a wrong token, another port, another sandbox, a revoked or
// replaced token, a destroyed sandbox: the same not found); the token is
// in Expose's answer only; another key can neither expose, list nor
// revoke a sandbox it does not see. No root: the process backend.
func TestExposeCheckRevoke(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := New(Options{Core: c, Store: env.Store, Listen: "127.0.0.1:8090", Domain: "localhost", Logger: controllertest.Logger(t)})
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	sys := controller.System(base)
	sb, err := c.Create(a, api.CreateSandboxRequest{Name: "web", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(a, api.CreateSandboxRequest{Name: "other", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}

	p, err := s.Expose(a, "web", 8000)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidPreviewToken(p.Token) || !strings.HasPrefix(p.URL, "http://8000-"+sb.ID+"-"+p.Token+".localhost:8090/") ||
		p.PathURL != "http://127.0.0.1:8090/preview/"+sb.ID+"/8000/" {
		t.Errorf("preview: %+v", p)
	}
	if port, id, tok, ok := ParsePreviewHost(strings.TrimSuffix(strings.TrimPrefix(p.URL, "http://"), "/"), "localhost"); !ok || port != 8000 || id != sb.ID || tok != p.Token {
		t.Errorf("the preview's own host does not parse: %d %q %q %v", port, id, tok, ok)
	}
	if err := s.Check(sys, sb.ID, 8000, p.Token); err != nil {
		t.Fatalf("the token of the exposed port: %v", err)
	}
	wrong := newPreviewToken()
	for name, err := range map[string]error{
		"wrong token":     s.Check(sys, sb.ID, 8000, wrong),
		"another port":    s.Check(sys, sb.ID, 8001, p.Token),
		"another sandbox": s.Check(sys, other.ID, 8000, p.Token),
		"a name, not id":  s.Check(sys, "web", 8000, p.Token),
		"bad token shape": s.Check(sys, sb.ID, 8000, "x"),
	} {
		if err == nil || err.Error() != errNoPreview.Error() {
			t.Errorf("%s: %v, want %q", name, err, errNoPreview)
		}
	}
	list, err := s.List(a, "web")
	if err != nil || len(list) != 1 || list[0].Port != 8000 || list[0].Token != "" || list[0].URL != "" {
		t.Errorf("list: %+v, %v", list, err)
	}
	ps, err := s.OpenPort(sys, sb.ID)
	if err != nil || ps.Agent == nil {
		t.Fatalf("open port: %+v, %v", ps, err)
	}
	ps.Done()

	// Another key sees no sandbox "web" of a's.
	if _, err := s.Expose(b, sb.ID, 9000); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b exposed a's port: %v", err)
	}
	if _, err := s.List(b, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b listed a's previews: %v", err)
	}
	if err := s.Unexpose(b, sb.ID, 8000); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b revoked a's preview: %v", err)
	}
	if err := s.Check(sys, sb.ID, 8000, p.Token); err != nil {
		t.Fatalf("a's token after b's attempts: %v", err)
	}

	// Exposing again replaces the token; unexposing revokes it.
	p2, err := s.Expose(a, "web", 8000)
	if err != nil || p2.Token == p.Token {
		t.Fatalf("expose again: %+v, %v", p2, err)
	}
	if err := s.Check(sys, sb.ID, 8000, p.Token); err == nil {
		t.Error("the replaced token still opens the port")
	}
	if err := s.Unexpose(a, "web", 8000); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(sys, sb.ID, 8000, p2.Token); err == nil {
		t.Error("the revoked token still opens the port")
	}
	p3, err := s.Expose(a, "web", 8000)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(a, "web"); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(sys, sb.ID, 8000, p3.Token); err == nil {
		t.Error("a destroyed sandbox's token still opens its port")
	}
	if _, err := s.Expose(a, "other", 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("port 0: %v", err)
	}
}

// TestListenerOff: without the preview listener, exposing says so.
func TestListenerOff(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	s := New(Options{Core: env.Controller, Store: env.Store, Listen: config.PreviewOff, Domain: "localhost"})
	ctx := controller.WithCaller(context.Background(), "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	if _, err := env.Controller.Create(ctx, api.CreateSandboxRequest{Name: "web", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expose(ctx, "web", 8000); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "preview listener") {
		t.Errorf("expose without a listener: %v", err)
	}
}

func TestPreviewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := newPreviewToken()
		if !ValidPreviewToken(tok) || len(tok)*5 < 128 || strings.ToLower(tok) != tok {
			t.Fatalf("token %q: want >= 128 bits of lowercase base32", tok)
		}
		if seen[tok] {
			t.Fatal("a token repeated")
		}
		seen[tok] = true
	}
}

func TestParsePreviewHost(t *testing.T) {
	tok := newPreviewToken()
	id := "abcdefghij0123456789"
	cases := []struct {
		host, domain string
		ok           bool
		port         int
	}{
		{"8000-" + id + "-" + tok + ".localhost:8090", "localhost", true, 8000},
		{"8000-" + id + "-" + tok + ".localhost", "localhost", true, 8000},
		{"8000-" + id + "-" + strings.ToUpper(tok) + ".LOCALHOST", "localhost", true, 8000},
		{"443-" + id + "-" + tok + ".preview.example.com.", "preview.example.com", true, 443},
		{"8000-" + id + "-" + tok + ".evil.localhost", "localhost", false, 0},
		{"8000-" + id + "-" + tok + ".example.com", "localhost", false, 0},
		{"0-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"65536-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"080-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"8000-" + id + "-short.localhost", "localhost", false, 0},
		{"8000-" + id + ".localhost", "localhost", false, 0},
		{"localhost", "localhost", false, 0},
		{"", "localhost", false, 0},
	}
	for _, tc := range cases {
		port, gotID, gotTok, ok := ParsePreviewHost(tc.host, tc.domain)
		if ok != tc.ok || (ok && (port != tc.port || gotID != id || gotTok != tok)) {
			t.Errorf("ParsePreviewHost(%q) = %d %q %q %v; want ok=%v port %d", tc.host, port, gotID, gotTok, ok, tc.ok, tc.port)
		}
	}
}

func FuzzParsePreviewHost(f *testing.F) {
	f.Add("8000-abcdefghij0123456789-" + strings.Repeat("a", 26) + ".localhost:8090")
	f.Add("1-a-b.localhost")
	f.Add("--.localhost")
	f.Fuzz(func(t *testing.T, host string) {
		port, id, tok, ok := ParsePreviewHost(host, "localhost")
		if !ok {
			return
		}
		if port < 1 || port > 65535 || !controller.IsID(id) || !ValidPreviewToken(tok) {
			t.Fatalf("ParsePreviewHost(%q) accepted %d %q %q", host, port, id, tok)
		}
	})
}
