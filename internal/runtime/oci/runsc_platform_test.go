package oci

import (
	"errors"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestChoosePlatform(t *testing.T) {
	current := []string{"kvm", "ptrace", "systrap"}
	debian := []string{"ptrace"}
	tests := []struct {
		want    string
		have    []string
		got     string
		wantErr error
	}{
		{"", current, PlatformSystrap, nil},
		{"", debian, PlatformPtrace, nil},
		{PlatformPtrace, current, PlatformPtrace, nil},
		{PlatformSystrap, current, PlatformSystrap, nil},
		{PlatformSystrap, debian, "", errdefs.ErrUnavailable},
		{"kvm", current, "", errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		got, err := choosePlatform(tt.want, tt.have)
		if got != tt.got || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("choosePlatform(%q, %v) = %q, %v; want %q, %v", tt.want, tt.have, got, err, tt.got, tt.wantErr)
		}
	}
}

func TestParsePlatformHelp(t *testing.T) {
	tests := []struct {
		name, help string
		want       []string
	}{
		{"debian 20221219", "  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n  -platform_device_path string\n", []string{"ptrace", "kvm"}},
		{"current", "  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n", []string{"systrap", "ptrace", "kvm"}},
		{"no platform flag", "  -root string\n", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		got := parsePlatformHelp(tt.help)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: parsePlatformHelp = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestProbeRunscInstalled reads the features of the runsc binaries here:
// Debian's in PATH and the one the tests drive (the pinned build).
func TestProbeRunscInstalled(t *testing.T) {
	needBinary(t, KindRunsc)
	for _, bin := range []string{"runsc", testRunsc()} {
		got := probeRunsc(t.Context(), bin)
		if !slices.Contains(got.platforms, PlatformPtrace) {
			t.Errorf("%s platforms = %q, want ptrace among them", bin, got.platforms)
		}
		// systrap and the in-sandbox cgroup v2 came in the same era.
		if slices.Contains(got.platforms, PlatformSystrap) != got.cgroupV2Inside {
			t.Errorf("%s: %+v", bin, got)
		}
		t.Logf("%s: %+v", bin, got)
	}
}

// TestProbeRestoreArgs: the pinned build restores with its pages loading
// in the background; Debian's runsc (which Paddock never restores with)
// has no such flag and gets none.
func TestProbeRestoreArgs(t *testing.T) {
	needBinary(t, KindRunsc)
	if got := probeRestoreArgs(testRunsc()); !slices.Equal(got, []string{"--background"}) {
		t.Errorf("pinned runsc: restore args %q, want --background", got)
	}
	if got := probeRestoreArgs("runsc"); got != nil {
		t.Errorf("Debian's runsc: restore args %q, want none", got)
	}
	if got := probeRestoreArgs("/nonexistent/runsc"); got != nil {
		t.Errorf("a missing binary: restore args %q, want none", got)
	}
}
