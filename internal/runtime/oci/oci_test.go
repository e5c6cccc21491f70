package oci

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
)

// testLogger sends a backend's logs to the test, so a failure shows the
// commands that led to it.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts, loop devices and cgroups")
	}
}

func needBinary(t *testing.T, name string) {
	t.Helper()
	if name == KindRunsc {
		name = testRunsc()
	}
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("needs %s in PATH", name)
	}
}

// testRunsc is the runsc the tests drive as KindRunsc: $PADDOCK_RUNSC
// (scripts/test.sh points it at the pinned build), else the daemon's own
// default resolution.
func testRunsc() string { return config.RunscFromEnv(os.Getenv) }

// binaryFor is the executable for kind: runsc's is testRunsc, the
// others' are looked up in PATH.
func binaryFor(kind string) string {
	if kind == KindRunsc {
		return testRunsc()
	}
	return ""
}

// newTestRuntime makes a backend with its own short state root (the
// agent's socket path must fit in sun_path) and, at cleanup, destroys
// whatever sandbox is left and removes the root only if nothing is still
// mounted below it.
func newTestRuntime(t *testing.T, kind string) *Runtime {
	t.Helper()
	return newTestRuntimeBin(t, kind, binaryFor(kind))
}

// newTestRuntimeBin is newTestRuntime with the runtime binary chosen.
func newTestRuntimeBin(t *testing.T, kind, bin string) *Runtime {
	t.Helper()
	dir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Runtime: kind, Binary: bin, Root: dir, CgroupParent: "paddock-test", Logger: testLogger(t)})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ids, err := r.List(ctx)
		if err != nil {
			t.Errorf("cleanup: list: %v", err)
		}
		for _, id := range ids {
			if err := r.Destroy(ctx, id); err != nil {
				t.Errorf("cleanup: destroy %s: %v", id, err)
			}
		}
		_ = r.Close() // drops runsc's pinned namespace (runsc_netns.go)
		// The shared test parent goes too once empty; another test still
		// using it keeps it (rmdir fails with EBUSY).
		if mounts, err := cgroupMounts(); err == nil {
			for _, m := range mounts {
				_ = unix.Rmdir(filepath.Join(m, r.cgroupParent))
			}
		}
		if m, err := mountsUnder(dir); err != nil || len(m) > 0 {
			t.Errorf("cleanup: mounts left under %s: %v %v; not removing it", dir, m, err)
			return
		}
		os.RemoveAll(dir)
	})
	return r
}

// testRuntimes are the runtimes the shared tests run on here: runc and
// runsc everywhere, crun where it works, a pure cgroup v2 host (on others
// TestProbe checks that crun is refused, with the reason).
// $PADDOCK_TEST_RUNTIMES (e.g. "runc,crun") narrows the list, for a slow
// host such as the emulated cgroup v2 VM.
func testRuntimes() []string {
	kinds := []string{KindRunc, KindRunsc}
	if CgroupLayout() == LayoutUnified {
		kinds = append(kinds, KindCrun)
	}
	if only := os.Getenv("PADDOCK_TEST_RUNTIMES"); only != "" {
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(strings.Split(only, ","), k) })
	}
	return kinds
}

func TestSuite(t *testing.T) {
	cases := []struct{ name, kind, bin string }{
		{KindRunc, KindRunc, ""},
		// Paddock's gVisor: the pinned build.
		{KindRunsc, KindRunsc, testRunsc()},
		// Debian's runsc (20221219) stays selectable (PADDOCK_RUNSC=runsc).
		{"runsc-path", KindRunsc, "runsc"},
		{KindCrun, KindCrun, ""},
	}
	for _, tc := range cases {
		if !slices.Contains(testRuntimes(), tc.kind) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			needRoot(t)
			needBinary(t, tc.kind)
			needBinary(t, "mkfs.ext4")
			bin := tc.bin
			if bin != "" {
				p, err := exec.LookPath(bin)
				if err != nil {
					t.Skipf("needs %s", bin)
				}
				bin = p
			}
			pidsInside := tc.kind != KindRunsc || probeRunsc(t.Context(), bin).cgroupV2Inside
			t.Logf("%s %s: pids limit enforced inside: %v", tc.kind, bin, pidsInside)
			runtimetest.Run(t, func(t *testing.T) runtime.Backend { return newTestRuntimeBin(t, tc.kind, bin) }, runtimetest.Options{
				// A prebuilt agent (e.g. from CI's build step) saves a build.
				AgentBinary:       os.Getenv("PADDOCK_TEST_AGENT"),
				SandboxWideLimits: tc.kind == KindRunsc,
				TasksLimitInside:  pidsInside,
				// Every host this suite runs on has kernel 5.19 or later.
				UserNamespace: tc.kind != KindRunsc,
			})
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"unknown runtime", Options{Runtime: "kata", Root: "/tmp/x"}, errdefs.ErrInvalidArgument},
		{"relative root", Options{Runtime: KindRunc, Root: "state"}, errdefs.ErrInvalidArgument},
		{"root too long for sockets", Options{Runtime: KindRunc, Root: "/" + string(make([]byte, 80))}, errdefs.ErrInvalidArgument},
		{"bad cgroup parent", Options{Runtime: KindRunc, Root: "/tmp/x", CgroupParent: "../escape"}, errdefs.ErrInvalidArgument},
		{"missing binary", Options{Runtime: KindRunc, Root: t.TempDir(), Binary: "/nonexistent/runc"}, errdefs.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("New(%+v) = %v, want %v", tt.opts, err, tt.want)
			}
		})
	}
}
