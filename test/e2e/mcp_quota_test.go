package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPOverTCPCountsAgainstTheKey checks that sandboxes an MCP client
// creates over the TCP listener count against its API key's quota, not the
// local caller's: with the local quota full, the key may still create up to
// its own quota and no further.
func TestMCPOverTCPCountsAgainstTheKey(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 3*time.Minute)
	key, err := d.client.CreateKey(ctx, "mcp-quota")
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"max_sandboxes_local": 1, "max_sandboxes_per_key": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("policy", "set", policy)
	d.must("create", "--image", "busybox", "--name", "local-one")
	// The local caller is now at its quota.
	if out, errOut, code := d.run("create", "--image", "busybox"); code == 0 || !strings.Contains(errOut, "max_sandboxes_local") {
		t.Fatalf("a second local create: exit %d, %s%s; want refused by max_sandboxes_local", code, out, errOut)
	}

	cs := connectMCP(t, d, "http", key.Secret)
	var first struct {
		Sandbox struct{ ID string }
	}
	call(t, cs, "sandbox_create", map[string]any{"image": "busybox", "name": "by-key"}, &first)
	if first.Sandbox.ID == "" {
		t.Fatal("sandbox_create returned no id")
	}
	// The key's own quota of 1 holds for MCP too.
	callErr(t, cs, "sandbox_create", map[string]any{"image": "busybox", "name": "by-key-2"}, "max_sandboxes_per_key")
}
