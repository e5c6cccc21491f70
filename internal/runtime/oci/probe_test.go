package oci

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestProbe: each runtime's verdict matches what this host has. crun 1.8
// refuses hybrid and v1-only cgroup layouts, so there it must be reported
// unavailable with the reason; a missing binary is "not installed".
func TestProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the crun probe runs a container")
	}
	_, agentBin := fixtures(t, KindRunc)
	layout := CgroupLayout()
	for _, kind := range []string{KindRunc, KindRunsc, KindCrun, "paddock-no-such-runtime"} {
		t.Run(kind, func(t *testing.T) {
			pr := Probe(t.Context(), kind, "", t.TempDir(), agentBin)
			t.Logf("%+v", pr)
			_, lookErr := exec.LookPath(kind)
			switch {
			case lookErr != nil:
				if pr.Available || !strings.Contains(pr.Reason, "not installed") {
					t.Fatalf("missing binary: %+v", pr)
				}
			case kind == KindCrun && layout != LayoutUnified:
				if pr.Available || !strings.Contains(pr.Reason, "cgroup") || !strings.Contains(pr.Reason, layout) {
					t.Fatalf("crun on a %s host: %+v", layout, pr)
				}
			default:
				if !pr.Available || pr.Version == "" || pr.Reason != "" {
					t.Fatalf("%s: %+v", kind, pr)
				}
			}
		})
	}
}

func TestCgroupLayoutMatchesHost(t *testing.T) {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if unified := err == nil; unified != (CgroupLayout() == LayoutUnified) {
		t.Fatalf("layout %s, cgroup.controllers at the root: %v", CgroupLayout(), unified)
	}
}

// TestProbeBundle: the probe's read-only root holds every mountpoint its
// config names plus /dev (crun populates it and cannot create it in a
// read-only root), and nobody, who the process runs as, can traverse it.
func TestProbeBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := writeProbeBundle(dir, "paddock-probe-test", "/bin/true"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, spec.Root.Path)
	if !spec.Root.Readonly {
		t.Fatal("probe root is writable; the mountpoints test below would prove nothing")
	}
	fi, err := os.Stat(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if uid := spec.Process.User.UID; uid != 0 && fi.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("root mode %v: uid %d cannot reach /paddock through it", fi.Mode().Perm(), uid)
	}
	want := []string{"/dev"}
	for _, m := range spec.Mounts {
		want = append(want, m.Destination)
	}
	for _, p := range want {
		if _, err := os.Stat(filepath.Join(rootfs, p)); err != nil {
			t.Errorf("mountpoint %s missing in the read-only root: %v", p, err)
		}
	}
	if got := strings.Join(spec.Process.Args, " "); got != "/paddock agent --help" {
		t.Errorf("probe runs %q; want the agent's help, which exits 0", got)
	}
}

// TestProbeTrialRunRunc runs the crun probe's container with runc, which
// works on every cgroup layout: the bundle itself must start and exit 0
// with the real agent, whichever runtime executes it.
func TestProbeTrialRunRunc(t *testing.T) {
	_, agentBin := fixtures(t, KindRunc)
	bin, err := exec.LookPath(KindRunc)
	if err != nil {
		t.Fatal(err)
	}
	if err := trialRun(t.Context(), bin, t.TempDir(), agentBin); err != nil {
		t.Fatal(err)
	}
}
