package config

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveRunsc(t *testing.T) {
	pinned := DefaultRunsc()
	other := "/opt/gvisor/runsc"
	debian := "/usr/bin/runsc"
	tests := []struct {
		name      string
		setting   string
		installed []string // executables that exist
		inPath    bool     // Debian's runsc is in PATH
		want      string
		wantNote  string
	}{
		{"pinned build installed", pinned, []string{pinned}, true, pinned, "pinned build " + PinnedRunscVersion()},
		{"pinned build missing falls back to PATH", pinned, nil, true, debian, "runsc from PATH: the pinned build is not at " + pinned},
		{"pinned build missing, nothing in PATH", pinned, nil, false, pinned, ""},
		{"another path is never replaced", other, nil, true, other, ""},
		{"another path installed", other, []string{other}, true, other, ""},
		{"a name is looked up in PATH", "runsc", []string{pinned}, true, debian, "runsc from PATH"},
		{"a name not in PATH", "runsc", nil, false, "runsc", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookPath := func(name string) (string, error) {
				if name == "runsc" && tt.inPath {
					return debian, nil
				}
				return "", errors.New("not found")
			}
			executable := func(p string) bool {
				for _, i := range tt.installed {
					if i == p {
						return true
					}
				}
				return false
			}
			got, note := resolveRunsc(tt.setting, lookPath, executable)
			if got != tt.want || !strings.HasPrefix(note, tt.wantNote) || (tt.wantNote == "") != (note == "") {
				t.Errorf("resolveRunsc(%q) = %q, %q; want %q, %q...", tt.setting, got, note, tt.want, tt.wantNote)
			}
		})
	}
}

func TestValidateRunsc(t *testing.T) {
	for _, tt := range []struct {
		setting string
		ok      bool
	}{
		{DefaultRunsc(), true},
		{"runsc", true},
		{"/usr/bin/runsc", true},
		{"", false},
		{"bin/runsc", false},
		{"./runsc", false},
		{"/usr/bin/run\x00sc", false},
		{"/" + strings.Repeat("a", maxRunscLen), false},
	} {
		c := Default()
		c.Runsc = tt.setting
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate with runsc %.40q = %v, want ok=%v", tt.setting, err, tt.ok)
		}
	}
}

func TestPinnedRunscVersion(t *testing.T) {
	v := PinnedRunscVersion()
	if !strings.HasPrefix(v, "v0.0.0-") || strings.ContainsAny(v, " \n/") {
		t.Fatalf("pinned runsc version %q: want a gvisor.dev/gvisor pseudo-version", v)
	}
	if got := DefaultRunsc(); got != DefaultRunscDir+"/runsc-"+v+"-precompiled" {
		t.Fatalf("DefaultRunsc() = %q", got)
	}
}

func TestRunscEnv(t *testing.T) {
	c := Default()
	if err := c.ApplyEnv(func(k string) string {
		if k == "PADDOCK_RUNSC" {
			return "runsc"
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	if c.Runsc != "runsc" {
		t.Fatalf("PADDOCK_RUNSC=runsc gave Runsc %q", c.Runsc)
	}
}

func TestValidateRunscPlatform(t *testing.T) {
	for _, tt := range []struct {
		platform string
		ok       bool
	}{{"", true}, {"systrap", true}, {"ptrace", true}, {"kvm", false}, {"SYSTRAP", false}} {
		c := Default()
		c.RunscPlatform = tt.platform
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate with runsc_platform %q = %v, want ok=%v", tt.platform, err, tt.ok)
		}
	}
}
