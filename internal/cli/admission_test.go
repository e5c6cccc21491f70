package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestPrintInfoRuntimes: the table says which runsc is in use (its path
// and the note: pinned build or PATH, platform) and why a runtime is out.
func TestPrintInfoRuntimes(t *testing.T) {
	in := &api.Info{
		Version: "v1", CgroupLayout: "hybrid",
		Runtimes: []api.RuntimeInfo{
			{Name: "runc", Binary: "runc", Path: "/usr/sbin/runc", Version: "runc version 1.1.5", Available: true, Default: true},
			{Name: "gvisor", Binary: "runsc", Path: "/var/cache/paddock/bin/runsc-v0.0.0-x", Version: "runsc version v0.0.0-x", Available: true, Note: "pinned build v0.0.0-x, platform systrap"},
			{Name: "crun", Binary: "crun", Path: "/usr/bin/crun", Version: "crun version 1.8.1", Reason: "a test container did not run"},
		},
	}
	var b bytes.Buffer
	if err := printInfo(&b, in); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	want := map[string][]string{
		"runc ":   {"/usr/sbin/runc", "default"},
		"gvisor ": {"runsc version v0.0.0-x", "/var/cache/paddock/bin/runsc-v0.0.0-x", "pinned build v0.0.0-x, platform systrap"},
		"crun ":   {"false", "a test container did not run"},
	}
	for prefix, parts := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				found = true
				for _, p := range parts {
					if !strings.Contains(l, p) {
						t.Errorf("%q lacks %q", l, p)
					}
				}
			}
		}
		if !found {
			t.Errorf("no %q row in:\n%s", prefix, b.String())
		}
	}
	if !strings.Contains(lines[2], "PATH") {
		t.Errorf("header %q has no PATH column", lines[2])
	}
}
