package adversarial

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// The attack regression tests that came from test/e2e keep that suite's
// helper names. Each helper here is a thin layer over internal/testdaemon
// and internal/testnet, which both suites share: the daemon, the CLI, API
// keys as tenants, raw calls and network test hosts are written once.

// tmpRoot is a short directory under /tmp for what tests make beside a
// daemon (image stores, state dirs of daemons that must not start):
// agent socket paths under a state dir must fit in 107 bytes. TestMain
// makes and removes it.
var tmpRoot string

func requireHost(t *testing.T) {
	t.Helper()
	testdaemon.RequireHost(t, false)
}

func requireGVisor(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(runscBin()); err != nil {
		t.Skipf("needs runsc (%s; apt-get install runsc, or scripts/install-deps.sh for the pinned build)", runscBin())
	}
}

// runscBin is the runsc the test daemons run ($PADDOCK_RUNSC, else the
// pinned build, else Debian's in PATH).
func runscBin() string { return config.RunscFromEnv(os.Getenv) }

func paddockBin(t *testing.T) string {
	t.Helper()
	return testdaemon.Binary(t)
}

func imagesDir() string { return testdaemon.ImagesDir(nil) }

type syncBuffer = testdaemon.LogBuffer

func uniqueName(prefix string) string { return testdaemon.UniqueName(prefix) }

func ctxT(t *testing.T, d time.Duration) context.Context { return testdaemon.Ctx(t, d) }

type daemonOpts struct {
	listen bool
	// imagesDir, when set, replaces the image cache shared by the tests.
	imagesDir string
	// env is added to the daemon's environment.
	env []string
}

// daemon is one real `paddock serve` (testdaemon.Daemon) under the e2e
// suite's names.
type daemon struct {
	*testdaemon.Daemon
	t        *testing.T
	stateDir string
	socket   string
	listen   string
	logs     *syncBuffer
	client   *paddock.Client
	env      []string // the daemon's added environment, its range included
}

// startDaemon starts a daemon on a fresh state dir; t.Cleanup destroys its
// sandboxes, stops it and fails the test if it left anything behind.
func startDaemon(t *testing.T, o daemonOpts) *daemon {
	t.Helper()
	td := testdaemon.Start(t, testdaemon.Options{Env: o.env, Listen: o.listen, ImagesDir: o.imagesDir})
	return &daemon{Daemon: td, t: t, stateDir: td.StateDir, socket: td.Socket, listen: td.Listen,
		logs: td.LogBuffer(), client: td.Client, env: td.Env()}
}

func (d *daemon) start() {
	d.t.Helper()
	d.Restart()
}

func (d *daemon) stop()  { d.Stop() }
func (d *daemon) kill9() { d.Kill9() }

func (d *daemon) run(args ...string) (string, string, int) {
	d.t.Helper()
	return d.CLI(nil, args...)
}

// must runs the CLI and fails the test unless it exits 0.
func (d *daemon) must(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.CLI(nil, args...)
	if code != 0 {
		d.t.Fatalf("paddock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (d *daemon) netTag() string {
	d.t.Helper()
	return d.NetTag()
}

func create(t *testing.T, d *daemon, req api.CreateSandboxRequest) *api.Sandbox {
	t.Helper()
	return testdaemon.Create(t, d.client, req)
}

func execOut(t *testing.T, d *daemon, id string, cmd ...string) (string, int) {
	t.Helper()
	return testdaemon.ExecOut(t, d.client, id, cmd...)
}

// tenant is one API key, with an SDK client and a raw one.
type tenant struct {
	key *api.CreatedKey
	sdk *paddock.Client
	raw keyClient
}

func newTenant(t *testing.T, d *daemon, name, scope string) tenant {
	t.Helper()
	tn := testdaemon.NewTenant(t, d.client, d.listen, name, scope)
	return tenant{key: tn.Key, sdk: tn.SDK, raw: keyClient{t: t, base: tn.Raw.Base, key: tn.Raw.Key}}
}

// keyClient makes raw HTTP calls with one API key (testdaemon.KeyClient).
type keyClient struct {
	t    *testing.T
	base string
	key  string
}

type keyResp struct {
	status int
	err    api.Error // the error body, when there is one
	body   []byte
}

func (c keyClient) do(method, path, body string) keyResp {
	c.t.Helper()
	r := testdaemon.KeyClient{T: c.t, Base: c.base, Key: c.key}.Do(method, path, body)
	return keyResp{status: r.Status, err: r.Err, body: r.Body}
}

func sorted(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

func readTar(t *testing.T, path string) map[string]string {
	t.Helper()
	return testdaemon.ReadTar(t, path)
}

func keys(m map[string]string) []string { return testdaemon.SortedKeys(m) }

// Network test hosts and probes (internal/testnet).

type netPlan = testnet.Plan

func newNetPlan(t *testing.T, n int) netPlan { return testnet.NewPlan(t, n) }

func ipRun(t *testing.T, args ...string) {
	t.Helper()
	testnet.IPRun(t, args...)
}

func probeTCP(ns, network, addr string, timeout time.Duration) string {
	return testnet.ProbeTCP(ns, network, addr, timeout)
}

type netLink = testdaemon.NetLink

func readNetLink(t *testing.T, d *daemon, id string) netLink {
	t.Helper()
	return testdaemon.ReadNetLink(t, d.stateDir, id)
}

// injUpstream is an HTTPS upstream for credential injection tests
// (testnet.HTTPSUpstream).
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
