package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestCheckDisk(t *testing.T) {
	old := freeBytes
	t.Cleanup(func() { freeBytes = old })
	freeBytes = func(string) (uint64, error) { return 77 << 30, nil }
	sb := func(id string, diskGiB int64, state string) *store.Sandbox {
		return &store.Sandbox{ID: id, State: state, Resources: api.Resources{DiskMB: diskGiB << 10}}
	}
	existing := []*store.Sandbox{sb("a", 8, api.StateRunning), sb("b", 4, api.StateStopped), sb("gone", 500, api.StateDestroyed)}
	for _, tc := range []struct {
		name    string
		ratio   float64
		diskGiB int64
		ok      bool
	}{
		{"fits", 1, 60, true},
		{"exactly fills", 1, 65, true},
		{"one GiB over", 1, 66, false},
		{"the issue's 150G", 1, 150, false},
		{"overcommitted", 2.5, 150, true},
		{"past the overcommit", 2.5, 190, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{cfg: config.Config{StateDir: t.TempDir(), DiskOvercommit: tc.ratio}}
			err := c.checkDisk(existing, sb("new", tc.diskGiB, api.StateCreating))
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrResourceExhausted) {
				t.Fatalf("err = %v, want resource exhausted", err)
			}
			for _, want := range []string{"refused", "12.0 GiB granted", "77.0 GiB available", "overcommit"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
		})
	}
	// A record being re-admitted (a template create) does not count twice.
	c := &Controller{cfg: config.Config{StateDir: t.TempDir(), DiskOvercommit: 1}}
	if err := c.checkDisk(append(existing, sb("new", 60, api.StateCreating)), sb("new", 60, api.StateCreating)); err != nil {
		t.Errorf("re-admitting a record counted it twice: %v", err)
	}
	// On the kubernetes backend the disks are the nodes', not the host's.
	kc := &Controller{cfg: config.Config{StateDir: t.TempDir(), DiskOvercommit: 1, Backend: config.BackendKubernetes}}
	if err := kc.checkDisk(existing, sb("new", 150, api.StateCreating)); err != nil {
		t.Errorf("the kubernetes backend refused a disk by the host's space: %v", err)
	}
}
