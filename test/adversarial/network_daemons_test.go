package adversarial

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Several daemons on one host: each claims its range, refuses another's,
// and never removes what another made.

// rangeOf is the daemon's PADDOCK_NETWORK_RANGE.
func (d *daemon) rangeOf() string {
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "PADDOCK_NETWORK_RANGE="); ok {
			return v
		}
	}
	d.t.Fatal("daemon without a network range")
	return ""
}

// netAlive fails the test unless sandbox id of d still has its network:
// eth0 inside (as the sandbox itself sees it), the host end of its veth,
// and its proxy answering on its gateway from inside its namespace.
func netAlive(t *testing.T, d *daemon, id, when string) {
	t.Helper()
	l := readNetLink(t, d, id)
	out, errOut, code := d.run("exec", id, "--", "cat", "/proc/net/dev")
	if code != 0 || !strings.Contains(out, "eth0:") {
		t.Errorf("%s: sandbox %s has no eth0 (exit %d):\n%s%s", when, id, code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", l.HostIf)); err != nil {
		t.Errorf("%s: sandbox %s's veth %s is gone: %v", when, id, l.HostIf, err)
	}
	if got := probeTCP(l.NetNS, "tcp", net.JoinHostPort(l.Gateway, "3128"), 5*time.Second); got != "answered" {
		t.Errorf("%s: sandbox %s's proxy on %s: %s", when, id, l.Gateway, got)
	}
}

// serveRefused starts a second daemon (a state dir of its own) on rng and
// returns what it said on its way out; it fails the test if that daemon
// starts serving.
func serveRefused(t *testing.T, rng string) string {
	t.Helper()
	state, err := os.MkdirTemp(tmpRoot, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	sock := filepath.Join(state, "paddock.sock")
	cmd := exec.Command(paddockBin(t), "serve", "--state-dir", state, "--socket", sock)
	cmd.Env = append(os.Environ(), "PADDOCK_IMAGES_DIR="+imagesDir(), "PADDOCK_PREPARE_DEFAULT_IMAGE=false",
		"PADDOCK_PREVIEW_LISTEN=127.0.0.1:0", "PADDOCK_NETWORK_RANGE="+rng)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	client := &paddock.Client{Socket: sock}
	deadline := time.After(90 * time.Second)
	for {
		select {
		case <-exited:
			return logs.String()
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the second daemon on %s neither served nor exited:\n%s", rng, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Health(ctx)
		cancel()
		if err == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			t.Errorf("a second daemon started serving on %s, which overlaps a running daemon's range", rng)
			return logs.String()
		}
	}
}

// TestNetworkRangeClaimed: a second daemon on a running daemon's range, or
// on a range inside it, refuses to start, naming the first's state dir,
// and the first's sandbox keeps its network.
func TestNetworkRangeClaimed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := strings.TrimSpace(d.must("create", "--image", "busybox", "--allow-host", "up.test"))
	netAlive(t, d, id, "before")
	p := netip.MustParsePrefix(d.rangeOf())
	for _, rng := range []string{p.String(), netip.PrefixFrom(p.Addr(), p.Bits()+1).String()} {
		out := serveRefused(t, rng)
		if !strings.Contains(out, d.stateDir) || !strings.Contains(out, "PADDOCK_NETWORK_RANGE") {
			t.Errorf("the second daemon on %s does not name the first's state dir %s:\n%s", rng, d.stateDir, out)
		}
		netAlive(t, d, id, "after a second daemon tried "+rng)
	}
}

// TestNetworkDaemonsKeepEachOthersNetworks: two daemons on ranges apart,
// chosen so that daemons which named their objects after the range alone
// shared one name: each one's start, restart and kill -9 leaves the
// other's egress sandbox its network.
func TestNetworkDaemonsKeepEachOthersNetworks(t *testing.T) {
	t.Parallel()
	r1, r2 := testnet.TwinRanges(t)
	d1 := startDaemon(t, daemonOpts{env: []string{"PADDOCK_NETWORK_RANGE=" + r1}})
	id1 := strings.TrimSpace(d1.must("create", "--image", "busybox", "--allow-host", "up.test"))
	d2 := startDaemon(t, daemonOpts{env: []string{"PADDOCK_NETWORK_RANGE=" + r2}})
	id2 := strings.TrimSpace(d2.must("create", "--image", "busybox", "--allow-host", "up.test"))
	if d1.netTag() == d2.netTag() {
		t.Fatalf("two state dirs drew one tag %s", d1.netTag())
	}
	both := func(when string) {
		t.Helper()
		netAlive(t, d1, id1, when)
		netAlive(t, d2, id2, when)
	}
	both("both started")
	d2.stop()
	d2.start()
	both("the second restarted")
	d1.kill9()
	d1.start()
	both("the first killed and started again")
	// Stopped, the first keeps its sandbox's plumbing (its proxy is
	// down) while the second restarts beside it.
	d1.stop()
	d2.stop()
	d2.start()
	netAlive(t, d2, id2, "the second restarted beside the stopped first")
	l1 := readNetLink(t, d1, id1)
	for _, p := range []string{l1.NetNS, filepath.Join("/sys/class/net", l1.HostIf)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the stopped first daemon's %s went: %v", p, err)
		}
	}
	d1.start()
	both("the first started again")
}

// TestNetworkRestartRemovesOwnOrphans: a restart removes the namespace of
// its own tag that no record names, and a network its records name whose
// sandbox is gone; it keeps a namespace of the range's old shared tag
// (another daemon's, as far as it can know) and its live sandbox's network.
func TestNetworkRestartRemovesOwnOrphans(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := strings.TrimSpace(d.must("create", "--image", "busybox", "--allow-host", "up.test"))
	tag := d.netTag()
	p := netip.MustParsePrefix(d.rangeOf())
	sum := sha256.Sum256([]byte(p.String()))
	foreign := "paddock-" + hex.EncodeToString(sum[:2]) + "-e2eforeign"
	nameless := "paddock-" + tag + "-e2eorphan"
	recorded := "e2eorphan2"
	recNS, recIf := "paddock-"+tag+"-"+recorded, "pd"+tag+"3c"
	for _, ns := range []string{foreign, nameless, recNS} {
		ipRun(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	ipRun(t, "link", "add", recIf, "type", "veth", "peer", "name", "eth0", "netns", recNS)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", recIf).Run() })
	// The record of a sandbox the store no longer has (removed while its
	// network's teardown was cut short): /30 number 60 of the range.
	base := p.Addr().As4()
	at := func(off byte) string {
		return netip.AddrFrom4([4]byte{base[0], base[1], base[2], base[3] + 240 + off}).String()
	}
	rec, _ := json.Marshal(map[string]any{"id": recorded, "index": 60, "gateway": at(1), "addr": at(2), "netns": "/run/netns/" + recNS, "host_if": recIf})
	recPath := filepath.Join(d.stateDir, "network", "links", recorded+".json")

	d.kill9()
	if err := os.WriteFile(recPath, rec, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	nss, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	for _, gone := range []string{nameless, recNS} {
		if strings.Contains(string(nss), gone) {
			t.Errorf("orphan namespace %s kept:\n%s", gone, nss)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", recIf)); err == nil {
		t.Errorf("orphan veth %s kept", recIf)
	}
	if _, err := os.Stat(recPath); err == nil {
		t.Errorf("orphan record %s kept", recPath)
	}
	if !strings.Contains(string(nss), foreign) {
		t.Errorf("namespace %s, not this daemon's, removed:\n%s", foreign, nss)
	}
	netAlive(t, d, id, "after the restart")
}
