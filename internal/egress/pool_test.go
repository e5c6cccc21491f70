package egress_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
)

// TestUpstreamConnectionsAreNotShared: two sandboxes asking the same
// upstream through their proxies never ride one upstream connection.
func TestUpstreamConnectionsAreNotShared(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	link2, err := e.mgr.Setup(ctx, "egtest2", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.mgr.Teardown(context.Background(), "egtest2") })
	pol, err := egress.NormalizePolicy(egress.Policy{Allow: []string{"up.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Attach("egtest2", link2.Gateway, link2.Addr, pol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.Detach("egtest2") })
	pu, _ := url.Parse(fmt.Sprintf("http://%s:%d", link2.Gateway, egress.ProxyPort))
	c2 := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DialContext: dialFrom(t, link2.NetNS)}, Timeout: 15 * time.Second}
	c1 := e.proxyClient(t)

	peer := func(c *http.Client) string {
		t.Helper()
		code, body, _, err := get(t, c, "http://up.test/peer", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /peer: %d %q %v", code, body, err)
		}
		return body
	}
	first := peer(c1)
	if again := peer(c1); again != first {
		t.Logf("the first sandbox's second request came on a new upstream connection (%s, then %s)", first, again)
	}
	for range 3 {
		if other := peer(c2); other == first {
			t.Fatalf("the second sandbox's request rode the first sandbox's upstream connection %s", first)
		}
	}
}
