package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// claimRuntime is a runtime with only what the range claims use.
func claimRuntime(t *testing.T, root, claims string) *Runtime {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "sandboxes"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &Runtime{root: root, userns: usernsState{on: true, claimDir: claims}}
}

func newSandboxDir(t *testing.T, r *Runtime, id string) layout {
	t.Helper()
	l := r.layout(id)
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestClaimRange(t *testing.T) {
	claims := t.TempDir()
	r1 := claimRuntime(t, t.TempDir(), claims)
	r2 := claimRuntime(t, t.TempDir(), claims) // another daemon of the host
	la, lb := newSandboxDir(t, r1, "a"), newSandboxDir(t, r2, "a")

	baseA, err := r1.claimRange(la, "a")
	if err != nil {
		t.Fatal(err)
	}
	if baseA < usernsFirst || (baseA-usernsFirst)%usernsSize != 0 {
		t.Fatalf("base %d is not a range's first id", baseA)
	}
	// The same sandbox id in another daemon never gets the same range.
	baseB, err := r2.claimRange(lb, "a")
	if err != nil {
		t.Fatal(err)
	}
	if baseA == baseB {
		t.Fatal("two daemons' sandboxes share a range")
	}
	// A second claim of a running sandbox (a start after a crash) keeps it.
	if again, err := r1.claimRange(la, "a"); err != nil || again != baseA {
		t.Fatalf("claim again: %d %v, want %d", again, err, baseA)
	}
	// Another daemon cannot release what it did not claim.
	slotA := strconv.Itoa(int((baseA - usernsFirst) / usernsSize))
	r2.releaseSlot(int((baseA-usernsFirst)/usernsSize), "a")
	if _, err := os.Stat(filepath.Join(claims, slotA)); err != nil {
		t.Fatalf("another daemon released a claim: %v", err)
	}
	r1.releaseRange(la, "a")
	if _, err := os.Stat(filepath.Join(claims, slotA)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("claim kept after release: %v", err)
	}
	// A released range is taken again by the same sandbox if free.
	if again, err := r1.claimRange(la, "a"); err != nil || again != baseA {
		t.Fatalf("claim after release: %d %v, want %d", again, err, baseA)
	}

	// The sweep removes claims of this daemon's sandboxes that are gone,
	// and nothing of another daemon's.
	if err := os.RemoveAll(la.dir); err != nil {
		t.Fatal(err)
	}
	r1.sweepClaims()
	if _, err := os.Stat(filepath.Join(claims, slotA)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the claim of a removed sandbox survived the sweep: %v", err)
	}
	slotB := strconv.Itoa(int((baseB - usernsFirst) / usernsSize))
	if _, err := os.Stat(filepath.Join(claims, slotB)); err != nil {
		t.Fatalf("the sweep took another daemon's claim: %v", err)
	}
}

func TestClaimRangeExhausted(t *testing.T) {
	claims := t.TempDir()
	for i := 0; i < usernsSlots; i++ {
		if err := os.WriteFile(filepath.Join(claims, strconv.Itoa(i)), []byte("/elsewhere\nx\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := claimRuntime(t, t.TempDir(), claims)
	if _, err := r.claimRange(newSandboxDir(t, r, "a"), "a"); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("claim with every range taken: %v", err)
	}
}

func TestBuildSpecUserNamespace(t *testing.T) {
	r := &Runtime{kind: KindRunc, cgroupParent: "paddock", host: hostInfo{nofileHard: 1024}}
	spec := runtime.Spec{ID: "a", Resources: testResources()}
	s := r.buildSpec(spec, bundlePaths{rootfs: "/r", runDir: "/run", agentBinary: "/agent", idBase: usernsFirst, sysfs: "/sb/idmap/sys"})
	hasUser := false
	for _, ns := range s.Linux.Namespaces {
		hasUser = hasUser || ns.Type == "user"
	}
	if !hasUser || len(s.Linux.UIDMappings) != 1 || s.Linux.UIDMappings[0].HostID != usernsFirst || s.Linux.UIDMappings[0].Size != usernsSize ||
		len(s.Linux.GIDMappings) != 1 || s.Linux.GIDMappings[0] != s.Linux.UIDMappings[0] {
		t.Fatalf("namespaces %v, uid maps %v, gid maps %v", s.Linux.Namespaces, s.Linux.UIDMappings, s.Linux.GIDMappings)
	}
	for _, m := range s.Mounts {
		if m.Destination == "/sys" && (m.Type != "bind" || m.Source != "/sb/idmap/sys") {
			t.Fatalf("/sys: %+v, want the sandbox network's sysfs bound", m)
		}
	}
	plain := r.buildSpec(spec, bundlePaths{rootfs: "/r", runDir: "/run", agentBinary: "/agent"})
	for _, ns := range plain.Linux.Namespaces {
		if ns.Type == "user" {
			t.Fatal("a user namespace without a range")
		}
	}
}
