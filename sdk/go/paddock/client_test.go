package paddock

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		name       string
		c          Client
		envURL     string
		envSock    string
		wantBase   string
		wantSocket string
		wantErr    error
	}{
		{name: "zero", wantBase: "http://paddock", wantSocket: DefaultSocket},
		{name: "env socket", envSock: "/srv/x.sock", wantBase: "http://paddock", wantSocket: "/srv/x.sock"},
		{name: "env url beats env socket", envURL: "http://127.0.0.1:8080", envSock: "/srv/x.sock", wantBase: "http://127.0.0.1:8080"},
		{name: "field socket beats env url", c: Client{Socket: "/s"}, envURL: "http://h:1", wantBase: "http://paddock", wantSocket: "/s"},
		{name: "field url", c: Client{URL: "https://h:9/prefix/"}, wantBase: "https://h:9/prefix"},
		{name: "bad scheme", c: Client{URL: "ftp://h"}, wantErr: ErrInvalidArgument},
		{name: "no host", c: Client{URL: "http://"}, wantErr: ErrInvalidArgument},
		{name: "credentials in url", c: Client{URL: "http://u:p@h:1"}, wantErr: ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvURL, tt.envURL)
			t.Setenv(EnvSocket, tt.envSock)
			ep, err := tt.c.resolve()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ep.base != tt.wantBase || ep.socket != tt.wantSocket {
				t.Fatalf("got %+v, want base %q socket %q", ep, tt.wantBase, tt.wantSocket)
			}
		})
	}
}

func TestDaemonNotRunning(t *testing.T) {
	c := &Client{Socket: filepath.Join(t.TempDir(), "missing.sock")}
	_, err := c.Health(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"missing.sock", "is it running", "paddock serve", "make run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestCanceledContextIsNotReportedAsDaemonDown(t *testing.T) {
	c := &Client{Socket: filepath.Join(t.TempDir(), "missing.sock")}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Health(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// unixServer serves h on a unix socket in a temp dir.
func unixServer(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "paddock.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

func TestUnixSocketAndAPIKey(t *testing.T) {
	var gotAuth, gotPath string
	sock := unixServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		_, _ = io.WriteString(w, `{"status":"ok","version":"v1.2.3","runtimes":["runc"]}`)
	}))
	c := &Client{Socket: sock, APIKey: "sekrit"}
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != "v1.2.3" || gotPath != "/v1/health" || gotAuth != "Bearer sekrit" {
		t.Fatalf("health %+v path %q auth %q", h, gotPath, gotAuth)
	}
}

func TestAPIKeyFromEnv(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"keys":[]}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv(EnvAPIKey, "from-env")
	t.Setenv(EnvURL, srv.URL)
	var c Client
	if _, err := c.ListKeys(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gotAuth != "Bearer from-env" {
		t.Fatalf("auth = %q", gotAuth)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status  int
		body    string
		want    error
		code    string
		message string
	}{
		{404, `{"code":"not_found","message":"sandbox \"x\" not found"}`, ErrNotFound, "not_found", `sandbox "x" not found`},
		{409, `{"code":"conflict","message":"name taken"}`, ErrConflict, "conflict", "name taken"},
		{400, `{"code":"invalid_argument","message":"bad"}`, ErrInvalidArgument, "invalid_argument", "bad"},
		{429, `{"code":"resource_exhausted","message":"full"}`, ErrResourceExhausted, "resource_exhausted", "full"},
		{503, `{"code":"unavailable","message":"later"}`, ErrUnavailable, "unavailable", "later"},
		{504, `{"code":"deadline_exceeded","message":"slow"}`, ErrDeadlineExceeded, "deadline_exceeded", "slow"},
		{403, `{"code":"permission_denied","message":"no"}`, ErrPermissionDenied, "permission_denied", "no"},
		{401, `{"code":"unauthenticated","message":"key?"}`, ErrUnauthenticated, "unauthenticated", "key?"},
		{412, `{"code":"failed_precondition","message":"stopped"}`, ErrFailedPrecondition, "failed_precondition", "stopped"},
		// The code in the body wins over the status.
		{500, `{"code":"not_found","message":"odd"}`, ErrNotFound, "not_found", "odd"},
		// Without a JSON body the status decides.
		{404, `404 page not found`, ErrNotFound, "not_found", "HTTP 404: 404 page not found"},
		{502, ``, ErrUnavailable, "unavailable", ""},
		// Terminal escapes from a peer never reach the user's screen.
		{400, "{\"code\":\"invalid_argument\",\"message\":\"a\\u001b[31mb\"}", ErrInvalidArgument, "invalid_argument", "a[31mb"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c := &Client{URL: srv.URL}
			_, err := c.Get(context.Background(), "x")
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want Is %v", err, tt.want)
			}
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err %T is not *APIError", err)
			}
			if ae.Status != tt.status || ae.Code != tt.code || ae.Message != tt.message {
				t.Fatalf("got %+v", ae)
			}
			for _, other := range []error{ErrConflict, ErrNotFound} {
				if other != tt.want && errors.Is(err, other) {
					t.Fatalf("err also matches %v", other)
				}
			}
		})
	}
}

func TestIDsAreEscaped(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL}
	ctx := context.Background()
	if err := c.Delete(ctx, "a/../b c?d"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "dev", "/tmp/a b&path=/etc"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteKey(ctx, "k/1"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/v1/sandboxes/a%2F..%2Fb%20c%3Fd?",
		"/v1/sandboxes/dev/files?path=%2Ftmp%2Fa+b%26path%3D%2Fetc",
		"/v1/keys/k%2F1?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBadRefsNeverLeaveTheClient(t *testing.T) {
	c := &Client{URL: "http://127.0.0.1:1"} // nothing listens; a request would fail differently
	ctx := context.Background()
	tests := map[string]func() error{
		"empty id":   func() error { _, err := c.Get(ctx, ""); return err },
		"dot dot id": func() error { return c.Delete(ctx, "..") },
		"dot id":     func() error { _, err := c.Stop(ctx, "."); return err },
		"long id":    func() error { _, err := c.Start(ctx, strings.Repeat("a", 300)); return err },
		"empty path": func() error { return c.ReadFile(ctx, "dev", "", io.Discard) },
		"nul path":   func() error { _, err := c.Stat(ctx, "dev", "/a\x00b"); return err },
		"no cmd":     func() error { _, err := c.Exec(ctx, "dev", ExecOptions{}); return err },
		"label key":  func() error { _, err := c.List(ctx, map[string]string{"a=b": "c"}); return err },
		"key name":   func() error { _, err := c.CreateKey(ctx, ""); return err },
		"image name": func() error { _, err := c.BuildImage(ctx, "", nil); return err },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			if err := f(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestListSendsLabels(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()["label"]
		_, _ = io.WriteString(w, `{"sandboxes":[{"id":"a","state":"running"}]}`)
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL}
	list, err := c.List(context.Background(), map[string]string{"team": "x", "app": "y=z"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "a" || list[0].State != api.StateRunning {
		t.Fatalf("list = %+v", list)
	}
	if strings.Join(got, ",") != "app=y=z,team=x" {
		t.Fatalf("labels = %q", got)
	}
}

func TestUnreadableResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":`)
	}))
	t.Cleanup(srv.Close)
	_, err := (&Client{URL: srv.URL}).Get(context.Background(), "x")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

// The SDK is imported by programs outside this module's internal tree, so
// it must never depend on it.
func TestNoInternalImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool to list dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/paddock/internal/") {
			t.Errorf("the SDK depends on %s", p)
		}
	}
}
