package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// injUpstream is an HTTPS server in a network namespace of its own,
// serving api.test.example and other.test.example with a certificate of a
// test CA. It records each request's host, path and Authorization, and
// never echoes a header back (the sandbox must not learn the secret).
type injUpstream struct {
	*testnet.HTTPSUpstream
	caPEM []byte
}

func (u *injUpstream) saw(pred func(string) bool) []string { return u.HTTPSUpstream.Saw(pred) }

func newInjUpstream(t *testing.T, name, hostIf, hostCIDR, nsAddr string) *injUpstream {
	t.Helper()
	u := testnet.NewHTTPSUpstream(t, name, hostIf, hostCIDR, nsAddr)
	return &injUpstream{HTTPSUpstream: u, caPEM: u.CAPEM}
}

func TestNetworkInjection(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables")
	}
	// A test host of this process's network slot: two runs of the suite
	// on one machine never share its names or addresses.
	plan := newNetPlan(t, 8)
	up := newInjUpstream(t, plan.NS, plan.HostIf, plan.HostCIDR, plan.Upstream)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, up.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{env: []string{
		"PADDOCK_EGRESS_DNS_STATIC=api.test.example=" + plan.Upstream + ";other.test.example=" + plan.Upstream,
		"PADDOCK_EGRESS_PERMIT=" + plan.Permit,
		"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9",
		"PADDOCK_EGRESS_UPSTREAM_CA=" + caFile,
	}})
	canary := "pdk-canary-" + strings.ReplaceAll(uniqueName("x"), "-", "")
	auth := "auth=Bearer " + canary

	// The value goes in on stdin, never on argv.
	if out, stderr, code := d.runStdin([]byte(canary+"\n"), "secret", "set", "tok", "--from-file", "-"); code != 0 || strings.TrimSpace(out) != "tok" {
		t.Fatalf("secret set: %d %q %q", code, out, stderr)
	}
	id := strings.TrimSpace(d.must("create", "--allow-host", "api.test.example", "--allow-host", "other.test.example"))
	if _, stderr, code := d.run("net", "inject", id, "--host", "api.test.example", "--header", "Authorization: Bearer {{secret:nope}}"); code == 0 || !strings.Contains(stderr, `secret "nope" does not exist`) {
		t.Fatalf("rule naming a missing secret: exit %d %q", code, stderr)
	}
	show := d.must("net", "inject", id, "--host", "api.test.example", "--header", "Authorization: Bearer {{secret:tok}}")
	if !strings.Contains(show, "inject: api.test.example Authorization: Bearer {{secret:tok}}") || strings.Contains(show, canary) {
		t.Fatalf("net inject printed:\n%s", show)
	}
	// The upstream's CA in the sandbox, for the host that is not intercepted.
	d.must("exec", id, "--", "python3", "-c", "import sys; open('/tmp/up.pem','w').write(sys.argv[1])", string(up.caPEM))
	curl := func(args ...string) (string, string, int) {
		t.Helper()
		return d.run(append([]string{"exec", id, "--", "curl", "-sS", "--max-time", "20"}, args...)...)
	}
	count := func(path string) int {
		return len(up.saw(func(s string) bool {
			return strings.HasPrefix(s, "api.test.example "+path+" ") && strings.HasSuffix(s, auth)
		}))
	}

	t.Run("proxy and transparent requests carry the secret", func(t *testing.T) {
		for _, c := range []struct{ path, flag string }{{"/via-proxy", ""}, {"/transparent", "--noproxy"}} {
			args := []string{"https://api.test.example" + c.path}
			if c.flag != "" {
				args = append([]string{c.flag, "*"}, args...)
			}
			out, stderr, code := curl(args...)
			if code != 0 || !strings.Contains(out, "authorized=true") || count(c.path) != 1 {
				t.Fatalf("%s: exit %d out %q err %q; upstream saw %v", c.path, code, out, stderr, up.saw(func(string) bool { return true }))
			}
		}
	})

	t.Run("a host without rules is passed through untouched", func(t *testing.T) {
		// Verified against the upstream's own CA only: Paddock did not
		// terminate this TLS.
		out, stderr, code := curl("--cacert", "/tmp/up.pem", "https://other.test.example/plain")
		if code != 0 || !strings.Contains(out, "authorized=false") {
			t.Fatalf("exit %d out %q err %q", code, out, stderr)
		}
		// The intercepted host does not verify against the upstream's CA.
		if _, _, code := curl("--cacert", "/tmp/up.pem", "https://api.test.example/"); code == 0 {
			t.Fatal("api.test.example was not intercepted")
		}
	})

	t.Run("a redirect to another host does not carry the header", func(t *testing.T) {
		out, stderr, code := d.run("exec", id, "--", "bash", "-c",
			"cat /tmp/up.pem /etc/ssl/certs/ca-certificates.crt > /tmp/both.pem && curl -sSL --max-time 20 --cacert /tmp/both.pem https://api.test.example/redirect")
		if code != 0 || !strings.Contains(out, "served other.test.example/landing authorized=false") {
			t.Fatalf("exit %d out %q err %q", code, out, stderr)
		}
		if count("/redirect") != 1 {
			t.Fatal("the first request was not injected")
		}
		if got := up.saw(func(s string) bool { return strings.HasPrefix(s, "other.test.example ") && strings.Contains(s, canary) }); len(got) > 0 {
			t.Fatalf("other host received the secret: %v", got)
		}
	})

	t.Run("the trust bundle is read-only and holds the image's roots and the CA", func(t *testing.T) {
		out, _, _ := d.run("exec", id, "--", "bash", "-c",
			`echo x >> /etc/ssl/certs/ca-certificates.crt && echo WRITABLE; grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt; grep -c 'Paddock egress CA' /etc/ssl/certs/ca-certificates.crt; echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS"`)
		f := strings.Fields(out)
		if strings.Contains(out, "WRITABLE") || len(f) < 4 || f[1] != "1" || f[2] != "/etc/ssl/certs/ca-certificates.crt" {
			t.Fatalf("bundle: %q", out)
		}
		var n int
		fmt.Sscan(f[0], &n)
		if n < 50 {
			t.Fatalf("bundle holds %d certificates: the image's roots are missing", n)
		}
	})

	t.Run("the canary and the CA key are nowhere inside the sandbox", func(t *testing.T) {
		keyPEM, err := os.ReadFile(filepath.Join(d.stateDir, "network", "ca", "egress-ca-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		keyLine := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1]
		// The patterns reach grep through a pipe, so they are in no file,
		// environment or command line of the sandbox.
		// A control marker planted in a file proves the scan reads files.
		control := "pdk-control-" + strings.ReplaceAll(uniqueName("y"), "-", "")
		pats := base64.StdEncoding.EncodeToString([]byte(canary + "\n" + keyLine + "\n" + control + "\n"))
		script := `p() { echo ` + pats + ` | base64 -d; }
p | tail -n 1 > /var/tmp/control-marker
grep -rsFl -f <(p) / --exclude-dir=proc --exclude-dir=sys
grep -sFl -f <(p) /proc/[0-9]*/environ /proc/[0-9]*/cmdline
env | grep -F -f <(p) && echo IN-ENV
echo scanned`
		out, stderr, code := d.run("exec", id, "--", "bash", "-c", script)
		if code != 0 || strings.TrimSpace(out) != "/var/tmp/control-marker\nscanned" {
			t.Fatalf("found inside the sandbox (exit %d): %q %q", code, out, stderr)
		}
	})

	t.Run("the secret is not in the ledger nor the daemon log, and is listed with its user", func(t *testing.T) {
		ledger := d.must("ledger", id, "--json")
		if strings.Contains(ledger, canary) || !strings.Contains(ledger, "network_inject") {
			t.Fatalf("ledger:\n%s", ledger)
		}
		if strings.Contains(d.logs.String(), canary) {
			t.Fatal("the daemon log holds the secret")
		}
		ls := d.must("secret", "ls")
		if !strings.Contains(ls, "tok") || !strings.Contains(ls, id) || strings.Contains(ls, canary) {
			t.Fatalf("secret ls:\n%s", ls)
		}
		if b, err := os.ReadFile(filepath.Join(d.stateDir, "paddock.db")); err == nil && strings.Contains(string(b), canary) {
			t.Fatal("the database holds the secret in clear")
		}
	})

	t.Run("a secret in use cannot be deleted", func(t *testing.T) {
		_, stderr, code := d.run("secret", "rm", "tok")
		if code == 0 || !strings.Contains(stderr, id) || !strings.Contains(stderr, "conflict") {
			t.Fatalf("exit %d %q", code, stderr)
		}
	})

	t.Run("gVisor sandboxes trust the CA and get injections", func(t *testing.T) {
		requireGVisor(t)
		gid := strings.TrimSpace(d.must("create", "--runtime", "gvisor", "--allow-host", "api.test.example"))
		d.must("net", "inject", gid, "--host", "api.test.example", "--header", "Authorization: Bearer {{secret:tok}}")
		// Python's urllib needs no threads (glibc threads fail in this
		// runsc release) and honours HTTPS_PROXY and SSL_CERT_FILE.
		out, _, _ := d.run("exec", gid, "--", "python3", "-c", pyGet, "https://api.test.example/gvisor")
		if !strings.Contains(out, "200 served api.test.example/gvisor authorized=true") || count("/gvisor") != 1 {
			t.Fatalf("gVisor: %q", out)
		}
		if out, _, _ := d.run("exec", gid, "--", "sh", "-c", "echo x >> /etc/ssl/certs/ca-certificates.crt && echo WRITABLE"); strings.Contains(out, "WRITABLE") {
			t.Fatal("gVisor: the bundle is writable")
		}
		d.must("rm", gid)
	})

	t.Run("rules survive a daemon restart", func(t *testing.T) {
		d.stop()
		d.start()
		if show := d.must("net", "show", id); !strings.Contains(show, "inject: api.test.example Authorization") {
			t.Fatalf("net show after restart:\n%s", show)
		}
		out, stderr, code := curl("https://api.test.example/after-restart")
		if code != 0 || count("/after-restart") != 1 {
			t.Fatalf("after restart: exit %d %q %q", code, out, stderr)
		}
	})

	t.Run("uninject then delete", func(t *testing.T) {
		d.must("net", "uninject", id, "--host", "api.test.example")
		// With no rule the host is spliced: the sandbox's curl now meets
		// the upstream's own certificate, which its bundle does not hold
		// (curl's exit 60), and no request reaches the upstream.
		_, stderr, code := curl("https://api.test.example/after-uninject")
		if code != 60 || !strings.Contains(stderr, "SSL certificate problem") {
			t.Fatalf("after uninject: exit %d %q, want curl's certificate failure (60)", code, stderr)
		}
		if got := up.saw(func(s string) bool { return strings.Contains(s, "/after-uninject") }); len(got) > 0 {
			t.Fatalf("the upstream received %v", got)
		}
		// Trusting the upstream's own CA, the same request goes through,
		// spliced and without the header.
		out, stderr, code := curl("--cacert", "/tmp/up.pem", "https://api.test.example/after-uninject")
		if code != 0 || !strings.Contains(out, "served api.test.example/after-uninject authorized=false") {
			t.Fatalf("spliced after uninject: exit %d %q %q", code, out, stderr)
		}
		d.must("secret", "rm", "tok")
		if ls := d.must("secret", "ls"); strings.Contains(ls, "tok") {
			t.Fatalf("secret ls after rm:\n%s", ls)
		}
	})
}

func TestSecretBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	cases := []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"secret", "set", "tok"}, "never taken from the command line"},
		{"v", []string{"secret", "set", "Bad/Name", "--from-file", "-"}, "secret name"},
		{"line1\nline2", []string{"secret", "set", "tok", "--from-file", "-"}, "line break"},
		{"", []string{"secret", "set", "tok", "--from-env", "PADDOCK_TEST_UNSET_VAR"}, "is not set"},
		{"", []string{"secret", "rm", "nosuch"}, "does not exist"},
		{"", []string{"net", "inject", "nosuchbox", "--host", "a.test", "--header", "X-Key: v"}, "not found"},
	}
	for _, c := range cases {
		var stdin []byte
		if c.stdin != "" {
			stdin = []byte(c.stdin)
		}
		_, stderr, code := d.runStdin(stdin, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
		if strings.Contains(stderr, "line2") {
			t.Errorf("%v: error echoes the value: %q", c.args, stderr)
		}
	}
	// Replaying a PUT would mean storing a hash of the value: refused.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	req, _ := http.NewRequest(http.MethodPut, "http://paddock/v1/secrets/idem", strings.NewReader(`{"value":"v"}`))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT /v1/secrets with Idempotency-Key: %d", resp.StatusCode)
	}
	id := strings.TrimSpace(d.must("create", "--image", "busybox", "--allow-host", "a.test"))
	if _, stderr, code := d.runStdin([]byte("v"), "secret", "set", "k", "--from-file", "-"); code != 0 {
		t.Fatalf("secret set: %q", stderr)
	}
	for _, c := range []struct{ header, want string }{
		{"Host: {{secret:k}}", "cannot be injected"},
		{"Proxy-Authorization: {{secret:k}}", "cannot be injected"},
		{"Content-Length: 1", "cannot be injected"},
		{"Bad Name: x", "not allowed in an HTTP field name"},
		{"X-Key: {{secret:k", "not closed"},
	} {
		if _, stderr, code := d.run("net", "inject", id, "--host", "a.test", "--header", c.header); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("inject %q: exit %d %q, want %q", c.header, code, stderr, c.want)
		}
	}
	if _, stderr, code := d.run("net", "uninject", id, "--host", "a.test"); code == 0 || !strings.Contains(stderr, "no injection") {
		t.Errorf("uninject without rules: exit %d %q", code, stderr)
	}

	// Rules in create's network body: checked like the others, then shown.
	ctx := t.Context()
	create := func(secret string) (*api.Sandbox, error) {
		return d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{
			Mode: api.NetworkEgress, AllowHosts: []string{"a.test"},
			Inject: []api.Injection{{Host: "a.test", Header: "x-key", Value: "{{secret:" + secret + "}}"}},
		}})
	}
	if _, err := create("missing"); !errors.Is(err, paddock.ErrInvalidArgument) || !strings.Contains(err.Error(), `secret "missing" does not exist`) {
		t.Errorf("create with a rule naming a missing secret: %v", err)
	}
	sb, err := create("k")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.client.Network(ctx, sb.ID)
	if err != nil || len(p.Inject) != 1 || p.Inject[0] != (api.Injection{Host: "a.test", Header: "X-Key", Value: "{{secret:k}}"}) {
		t.Fatalf("network of a sandbox created with a rule: %+v %v", p, err)
	}
	if err := d.client.DeleteSecret(ctx, "k"); !errors.Is(err, paddock.ErrConflict) || !strings.Contains(err.Error(), sb.ID) {
		t.Errorf("delete a secret a created sandbox uses: %v", err)
	}
}
