package testdaemon

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Ctx is a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// UniqueName is prefix and a number no other call of this run shares.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// FreeAddr is a TCP address of 127.0.0.1 that nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Create makes a sandbox through c and fails the test if it cannot.
func Create(t testing.TB, c *paddock.Client, req api.CreateSandboxRequest) *api.Sandbox {
	t.Helper()
	sb, err := c.Create(Ctx(t, 5*time.Minute), req)
	if err != nil {
		t.Fatalf("create %+v: %v", req, err)
	}
	return sb
}

// ExecOut runs cmd in sandbox id through c and returns its output (stdout
// and stderr together) and exit code.
func ExecOut(t testing.TB, c *paddock.Client, id string, cmd ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	res, err := c.Exec(Ctx(t, 2*time.Minute), id, paddock.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return out.String(), res.ExitCode
}

// KeyClient makes raw HTTP calls to a daemon's TCP listener with one API
// key, so a test sees statuses and error bodies exactly as sent.
type KeyClient struct {
	T    testing.TB
	Base string // http://host:port
	Key  string // the API key's secret
}

// KeyResp is one raw answer.
type KeyResp struct {
	Status int
	Err    api.Error // the error body, when there is one
	Body   []byte
}

// Do sends one request; a body starting with { is sent as JSON.
func (c KeyClient) Do(method, path, body string) KeyResp {
	c.T.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(Ctx(c.T, 2*time.Minute), method, c.Base+path, rd)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	out := KeyResp{Status: resp.StatusCode, Body: b}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &out.Err)
	}
	return out
}

// Tenant is one API key of a daemon, with an SDK client and a raw client
// for its TCP listener.
type Tenant struct {
	Key *api.CreatedKey
	SDK *paddock.Client
	Raw KeyClient
}

// NewTenant creates an API key of the given scope through admin (the
// daemon's socket) and clients for the listener at listen (host:port).
func NewTenant(t testing.TB, admin *paddock.Client, listen, name, scope string) Tenant {
	t.Helper()
	k, err := admin.CreateKeyWith(Ctx(t, time.Minute), api.CreateKeyRequest{Name: name, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	if k.Scope != scope {
		t.Fatalf("key %s has scope %q, want %q", name, k.Scope, scope)
	}
	base := "http://" + listen
	return Tenant{Key: k, SDK: &paddock.Client{URL: base, APIKey: k.Secret}, Raw: KeyClient{T: t, Base: base, Key: k.Secret}}
}

// ReadTar returns the regular files of a tar file, by name without a
// leading "./" or "/".
func ReadTar(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")] = string(b)
	}
}

// SortedKeys is m's keys in order.
func SortedKeys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// Within fails the test unless got is set and between from and to (a
// second of slack each side: the API's times are taken around the call).
func Within(t testing.TB, what string, got *time.Time, from, to time.Time) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no expiry, want one in [%v, %v]", what, from, to)
	}
	if got.Before(from.Add(-time.Second)) || got.After(to.Add(time.Second)) {
		t.Fatalf("%s: expires %v, want within [%v, %v]", what, *got, from, to)
	}
}

// NetLink is a sandbox's network plumbing as the daemon records it.
type NetLink struct {
	Gateway string `json:"gateway"`
	Addr    string `json:"addr"`
	NetNS   string `json:"netns"`
	HostIf  string `json:"host_if"`
}

// ReadNetLink reads sandbox id's plumbing from the daemon's state dir.
func ReadNetLink(t testing.TB, stateDir, id string) NetLink {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "network", "links", id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var l NetLink
	if err := json.Unmarshal(b, &l); err != nil || l.NetNS == "" || l.HostIf == "" {
		t.Fatalf("link record of %s: %v %s", id, err, b)
	}
	return l
}
