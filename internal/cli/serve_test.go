package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/kubebin"
)

// TestServePrintConfigNetwork: the networking variables reach the
// configuration `serve --print-config` shows, and a bad one fails it with
// an error naming the variable.
func TestServePrintConfigNetwork(t *testing.T) {
	t.Setenv("PADDOCK_NETWORK_RANGE", "10.123.0.0/16")
	t.Setenv("PADDOCK_EGRESS_PERMIT", "198.18.7.0/30")
	t.Setenv("PADDOCK_EGRESS_DNS_UPSTREAM", "127.0.0.1:9")
	t.Setenv("PADDOCK_EGRESS_MAX_CONNS", "77")
	t.Setenv("PADDOCK_FIREWALL", "iptables")
	cmd := newServeCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--print-config", "--state-dir", t.TempDir()})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var got struct {
		Network struct {
			Range       string   `json:"range"`
			Firewall    string   `json:"firewall"`
			DNSUpstream string   `json:"dns_upstream"`
			Permit      []string `json:"permit"`
			MaxConns    int      `json:"max_conns"`
		} `json:"network"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	n := got.Network
	if n.Range != "10.123.0.0/16" || n.Firewall != "iptables" || n.DNSUpstream != "127.0.0.1:9" || len(n.Permit) != 1 || n.Permit[0] != "198.18.7.0/30" || n.MaxConns != 77 {
		t.Errorf("network = %+v\n%s", n, out.String())
	}

	t.Setenv("PADDOCK_FIREWALL", "pf")
	cmd = newServeCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--print-config", "--state-dir", t.TempDir()})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "PADDOCK_FIREWALL") {
		t.Fatalf("PADDOCK_FIREWALL=pf: %v, want an error naming the variable", err)
	}
}

// TestServeKubernetesNeedsItsDaemon: `serve --backend kubernetes` runs the
// daemon that links the Kubernetes backend (internal/kubebin); a build
// that has none says how to get it rather than starting without it.
func TestServeKubernetesNeedsItsDaemon(t *testing.T) {
	cmd := newServeCmd()
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	cmd.SetArgs([]string{"--backend", "kubernetes", "--state-dir", t.TempDir(), "--socket", filepath.Join(t.TempDir(), "pd.sock")})
	if err := cmd.Execute(); !errors.Is(err, kubebin.ErrMissing) {
		t.Fatalf("serve --backend kubernetes without its daemon: %v", err)
	}
}
