// Package adversarial attacks a real daemon the way a hostile tenant and
// a hostile sandbox would, on runc and gVisor, as the sandbox's default
// user and as root. Every attack here is one that must fail; each probe
// is also run where it must succeed (TestProbesCanSucceed), so a probe
// cannot pass because it is broken or a tool is missing. The regression
// test of every attack that once got through (keys, names and secrets of
// other tenants, import amplification, daemons sharing a host, dead
// sandboxes reported running, special files, disks, bodies, restarts,
// builds cut short) lives here too, on the daemon harness of
// internal/testdaemon (harness_test.go). docs/security.md lists the
// attacks, their results and their tests.
package adversarial

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("/tmp", "pv")
	if err == nil {
		// Searchable, as a daemon's state dir's parents must be for its
		// sandboxes to run in user namespaces.
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir // harness_test.go
	code := m.Run()
	os.RemoveAll(dir)
	testdaemon.Cleanup()
	if probeDir != "" {
		os.RemoveAll(probeDir)
	}
	os.Exit(code)
}

type probeResult struct {
	Probe   string `json:"probe"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// allProbes is every probe the binary runs, in its order.
var allProbes = []string{
	"mount", "unshare-user", "unshare-mount-net", "sysrq-trigger", "core-pattern", "sysctl",
	"cgroup-write", "kcore", "kernel-log", "kvm", "dev-mem", "block-devices", "mknod-block",
	"raw-socket", "bpf", "ptrace-agent", "agent-binary", "daemon-socket", "daemon-files",
	"fd-leak", "env-secret", "other-files", "metadata-address",
}

var (
	probeOnce sync.Once
	probeDir  string
	probeBin  string
	probeErr  error
)

// probeBinary builds the static probe once; $PADDOCK_TEST_PROBE names a
// prebuilt one instead (the cgroup v2 VM has no Go toolchain).
func probeBinary(t *testing.T) string {
	t.Helper()
	if prebuilt := os.Getenv("PADDOCK_TEST_PROBE"); prebuilt != "" {
		return prebuilt
	}
	probeOnce.Do(func() {
		probeDir, probeErr = os.MkdirTemp("", "pdprobe")
		if probeErr != nil {
			return
		}
		probeBin = filepath.Join(probeDir, "probe")
		cmd := exec.Command("go", "build", "-o", probeBin, "./probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = err
			t.Logf("%s", out)
		}
	})
	if probeErr != nil {
		t.Fatalf("building the probe: %v", probeErr)
	}
	return probeBin
}

func parseProbes(t *testing.T, out []byte) map[string]probeResult {
	t.Helper()
	got := map[string]probeResult{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r probeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("probe output %q: %v", sc.Text(), err)
		}
		got[r.Probe] = r
	}
	for _, p := range allProbes {
		if _, ok := got[p]; !ok {
			t.Errorf("probe %s gave no result; output:\n%s", p, out)
		}
	}
	return got
}

func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestProbesCanSucceed runs the probe on the host as root, where the
// harmless form of each attack gets through: it proves each probe reports
// "open" when the way is open. The paths it is given stand for the real
// ones (a copy for the agent binary; a plain file for /dev/kvm,
// /proc/sysrq-trigger and /proc/kcore where the host's kernel lacks them,
// as a VM's kernel often does).
func TestProbesCanSucceed(t *testing.T) {
	testdaemon.RequireHost(t, false)
	bin := probeBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := os.Create(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	marker := "marker-" + secret(t)
	for _, f := range []string{marker, "agent", "kvm", "sysrq", "kcore"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	canary := secret(t)
	standIn := func(real, name string) string {
		if _, err := os.Stat(real); err == nil {
			return real
		}
		t.Logf("%s: this kernel has none; a plain file stands in", real)
		return filepath.Join(dir, name)
	}
	cmd := exec.Command(bin, "-control", "-walk-root", dir, "-agent", filepath.Join(dir, "agent"),
		"-kvm", standIn("/dev/kvm", "kvm"), "-sysrq", standIn("/proc/sysrq-trigger", "sysrq"),
		"-kcore", standIn("/proc/kcore", "kcore"),
		"-state-dir", state, "-marker", marker, "-daemon-socket", filepath.Join(dir, "d.sock"),
		"-canary-a", canary[:16], "-canary-b", canary[16:])
	cmd.Env = append(os.Environ(), "PROBE_CANARY="+canary, "TMPDIR="+dir)
	cmd.ExtraFiles = []*os.File{db} // a descriptor that leaks the daemon's files
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	got := parseProbes(t, out)
	// Neither is always possible on a host: /dev/mem is often locked down
	// to root's own reads of low memory only, and the metadata probe is
	// never sent off the machine.
	notRequired := []string{"dev-mem", "metadata-address"}
	for _, p := range allProbes {
		r := got[p]
		if slices.Contains(notRequired, p) {
			t.Logf("%s: %s (%s)", p, r.Outcome, r.Detail)
			continue
		}
		if r.Outcome != "open" {
			t.Errorf("probe %s reported %s on the host as root (%s); it cannot detect the way it checks", p, r.Outcome, r.Detail)
		}
	}
}

// allowed are probes that get through inside a sandbox without reaching
// anything outside it, per runtime, with the reason.
var allowed = map[string]map[string]string{
	"runc": {},
	"gvisor": {
		// The Sentry serves its own /proc. The pinned runsc has a
		// /proc/sysrq-trigger there: a static, empty, write-only inode
		// of the Sentry (gVisor's pkg/sentry/fsimpl/proc/tasks.go) that
		// no host kernel ever sees, and runsc ignores the spec's
		// readonlyPaths and maskedPaths that close it on runc.
		"sysrq-trigger": "the Sentry's own static /proc file, not the host's",
	},
}

// TestEscapeProbes runs every probe inside sandboxes on runc and gVisor,
// as the default user and as root, beside another sandbox and with a
// secret stored in the daemon: each must be blocked.
func TestEscapeProbes(t *testing.T) {
	testdaemon.RequireHost(t, true)
	bin := probeBinary(t)
	canary := secret(t)
	d := testdaemon.Start(t, testdaemon.Options{Env: []string{"PADDOCK_ADVERSARIAL_CANARY=" + canary}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := d.Client.SetSecret(ctx, "adversarial-canary", []byte(canary)); err != nil {
		t.Fatalf("storing a secret: %v", err)
	}
	marker := "marker-" + secret(t)
	hostMarker := filepath.Join(os.TempDir(), marker)
	if err := os.WriteFile(hostMarker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostMarker) })
	// Another tenant's sandbox holds a file of the same name.
	other, err := d.Client.Create(ctx, api.CreateSandboxRequest{Image: "busybox"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := d.Client.WriteFile(ctx, other.ID, "/home/user/"+marker, strings.NewReader("other"), 0o644); err != nil {
		t.Fatalf("writing the other sandbox's file: %v", err)
	}
	probe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			sb, err := d.Client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Runtime: rt})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if _, err := d.Client.WriteFile(ctx, sb.ID, "/home/user/probe", bytes.NewReader(probe), 0o755); err != nil {
				t.Fatalf("uploading the probe: %v", err)
			}
			for _, user := range []string{"user", "root"} {
				t.Run(user, func(t *testing.T) {
					var stdout, stderr bytes.Buffer
					res, err := d.Client.Exec(ctx, sb.ID, paddock.ExecOptions{
						Cmd: []string{"/home/user/probe", "-state-dir", d.StateDir, "-marker", marker,
							"-canary-a", canary[:16], "-canary-b", canary[16:], "-daemon-socket", d.Socket},
						User: user, Stdout: &stdout, Stderr: &stderr, Timeout: 2 * time.Minute,
					})
					if err != nil || res.ExitCode != 0 {
						t.Fatalf("probe: %+v, %v\nstdout %s\nstderr %s", res, err, stdout.String(), stderr.String())
					}
					got := parseProbes(t, stdout.Bytes())
					for _, p := range allProbes {
						r := got[p]
						why, ok := allowed[rt][p]
						switch {
						case r.Outcome == "blocked":
							t.Logf("%-18s blocked: %s", p, r.Detail)
						case ok:
							t.Logf("%-18s %s, allowed on %s: %s (%s)", p, r.Outcome, rt, why, r.Detail)
						default:
							t.Errorf("%s as %s on %s: %s (%s)", p, user, rt, r.Outcome, r.Detail)
						}
					}
				})
			}
		})
	}
}
