package network

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// TestClusterNetwork: each sandbox gets a proxy credential of its own,
// kept across daemons and carried only in its secret variables; the
// proxy answers nobody without it; rule changes reach the backend; a
// release leaves no file.
func TestClusterNetwork(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	applied := map[string]runtime.Egress{}
	open := func() *Cluster {
		c, err := OpenCluster(ClusterOptions{StateDir: dir, Listen: "127.0.0.1:0", Apply: func(_ context.Context, id string, e runtime.Egress) error {
			mu.Lock()
			applied[id] = e
			mu.Unlock()
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, bad := range []string{"0.0.0.0:3128", "localhost:3128", "[::1]:0"} {
		if _, err := OpenCluster(ClusterOptions{StateDir: dir, Listen: bad}); err == nil {
			t.Errorf("listen %q: no error", bad)
		}
	}
	c := open()
	ctx := context.Background()
	pol, err := c.Validate(api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: []string{"example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := c.Prepare(ctx, "sbx1", &pol)
	if err != nil {
		t.Fatal(err)
	}
	if ns.NetNSPath != "" || ns.ResolvConf != "" || ns.Egress == nil || ns.Egress.Proxy != c.Addr() || len(ns.Egress.Direct) != 0 {
		t.Fatalf("setup: %+v", ns)
	}
	var proxyURL string
	for _, kv := range ns.SecretEnv {
		if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
			proxyURL = v
		}
	}
	u, err := url.Parse(proxyURL)
	if err != nil || u.User.Username() != "sbx1" || u.Host != c.Addr().String() {
		t.Fatalf("proxy URL %q: %v", proxyURL, err)
	}
	tok, _ := u.User.Password()
	for _, kv := range ns.Env {
		if strings.Contains(kv, tok) {
			t.Errorf("the credential is in the plain variables: %s", kv)
		}
	}
	// Another sandbox gets another credential.
	ns2, err := c.Prepare(ctx, "sbx2", &pol)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(ns.SecretEnv, ns2.SecretEnv) || strings.Contains(strings.Join(ns2.SecretEnv, " "), tok) {
		t.Errorf("two sandboxes share a credential")
	}
	// Without the credential the proxy answers 407.
	resp, err := http.Get("http://" + c.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("without credentials: %d", resp.StatusCode)
	}
	// An address rule (a public prefix, only a rule here: nothing is
	// sent) reaches the backend; one in a forbidden range is
	// refused.
	pol.AllowCIDRs = []string{"192.0.2.8/30"}
	if _, err := c.Validate(pol); err == nil {
		t.Fatalf("an address rule in a forbidden range was taken")
	}
	pol.AllowCIDRs = []string{"1.1.1.0/30"}
	if pol, err = c.Validate(pol); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := len(applied)
	mu.Unlock()
	if err := c.SetPolicy(ctx, "sbx1", pol); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := applied["sbx1"]
	mu.Unlock()
	if before != 0 || len(got.Direct) == 0 || got.Direct[0] != netip.MustParsePrefix("1.1.1.0/30") || got.Proxy != c.Addr() {
		t.Errorf("applied: %+v", got)
	}
	c.Close()

	// The next daemon gives the sandbox the same credential.
	c = open()
	defer c.Close()
	again, err := c.Prepare(ctx, "sbx1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(again.SecretEnv, " "), tok) {
		t.Errorf("a new daemon changed the sandbox's credential")
	}
	if ids := c.List(); len(ids) != 2 {
		t.Errorf("list: %v", ids)
	}
	if err := c.Release(ctx, "sbx1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{c.policyPath("sbx1"), c.tokenPath("sbx1")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after release: %v", p, err)
		}
	}
}

// TestClusterRelay: with a relay, the sandboxes' variables name the
// relay, not the proxy; a daemon whose proxy comes back at another
// address points each sandbox's pod at it once (the backend is asked),
// not again at the next prepare; when the backend failed, it is tried
// again in the background until it passes, and no more once the sandbox
// is released.
func TestClusterRelay(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var applied []runtime.Egress
	fail, tries := false, 0
	open := func() *Cluster {
		c, err := OpenCluster(ClusterOptions{StateDir: dir, Listen: "127.0.0.1:0", Relay: "127.0.0.1:49985", RetryEvery: 20 * time.Millisecond, Apply: func(_ context.Context, id string, e runtime.Egress) error {
			mu.Lock()
			defer mu.Unlock()
			tries++
			if fail {
				return errors.New("the API server is away")
			}
			applied = append(applied, e)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(applied)
	}
	for _, bad := range []string{"10.0.0.1:3128", "127.0.0.1", "relay"} {
		if _, err := OpenCluster(ClusterOptions{StateDir: dir, Listen: "127.0.0.1:0", Relay: bad}); err == nil {
			t.Errorf("relay %q: no error", bad)
		}
	}
	ctx := context.Background()
	c := open()
	pol, err := c.Validate(api.NetworkPolicy{Mode: api.NetworkEgress})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := c.Prepare(ctx, "sbx1", &pol)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(ns.SecretEnv, " "), "@127.0.0.1:49985") || ns.Egress.Proxy != c.Addr() {
		t.Fatalf("setup with a relay: %+v", ns)
	}
	if _, err := c.Prepare(ctx, "sbx1", nil); err != nil || calls() != 0 {
		t.Fatalf("a prepare at the same address asked the backend: %d calls, %v", calls(), err)
	}
	first := c.Addr()
	c.Close()

	// Port 0: the next daemon's proxy has another address.
	c = open()
	defer c.Close()
	if c.Addr() == first {
		t.Fatalf("the proxy came back at %s, the same address", first)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := c.Prepare(ctx, "sbx1", nil); err == nil {
		t.Fatal("a prepare whose pointing failed passed")
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); calls() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the failed pointing was not tried again")
		}
	}
	if _, err := c.Prepare(ctx, "sbx1", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if len(applied) != 1 || applied[0].Proxy != c.Addr() {
		t.Fatalf("applied: %+v, want once at %s", applied, c.Addr())
	}
	mu.Unlock()
	if b, err := os.ReadFile(c.pointedPath("sbx1")); err != nil || string(b) != c.Addr().String() {
		t.Fatalf("the pointed-at record: %q %v", b, err)
	}

	// Another sandbox whose pointing keeps failing is tried no more once
	// released, and leaves no record.
	if err := os.Remove(c.pointedPath("sbx1")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := c.Prepare(ctx, "sbx1", nil); err == nil {
		t.Fatal("a prepare whose pointing failed passed")
	}
	if err := c.Release(ctx, "sbx1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := tries
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	after := tries
	mu.Unlock()
	if after != before {
		t.Errorf("a released sandbox was tried %d more times", after-before)
	}
	if _, err := os.Stat(c.pointedPath("sbx1")); !os.IsNotExist(err) {
		t.Errorf("the pointed-at record after release: %v", err)
	}
}
