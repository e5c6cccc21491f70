package oci

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProbe: each runtime's verdict matches what this host has. crun 1.8
// refuses hybrid and v1-only cgroup layouts, so there it must be reported
// unavailable with the reason; a missing binary is "not installed".
func TestProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the crun probe runs a container")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	layout := CgroupLayout()
	for _, kind := range []string{KindRunc, KindRunsc, KindCrun, "paddock-no-such-runtime"} {
		t.Run(kind, func(t *testing.T) {
			pr := Probe(t.Context(), kind, "", t.TempDir(), self)
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
