package oci

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
)

// fixtures are built once per test that needs a real sandbox.
func fixtures(t *testing.T, kind string) (layers []string, agentBin string) {
	t.Helper()
	needRoot(t)
	needBinary(t, kind)
	needBinary(t, "mkfs.ext4")
	agentBin = os.Getenv("PADDOCK_TEST_AGENT")
	if agentBin == "" {
		agentBin = runtimetest.AgentBinary(t)
	}
	return []string{runtimetest.BusyboxRootfs(t)}, agentBin
}

func testResources() runtime.Resources {
	return runtime.Resources{CPUMillis: 500, MemoryBytes: 128 << 20, DiskBytes: 64 << 20, Pids: 64}
}

func healthy(ctx context.Context, socket string) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer hc.CloseIdleConnections()
	var last error
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("agent not healthy: %v", last)
}

// TestHostCgroupLimits reads the limits back from the host's cgroup files.
func TestHostCgroupLimits(t *testing.T) {
	for _, kind := range testRuntimes() {
		t.Run(kind, func(t *testing.T) {
			layers, agentBin := fixtures(t, kind)
			r := newTestRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := runtimetest.NewID(t)
			res := testResources()
			if _, err := r.Start(ctx, runtime.Spec{ID: id, Layers: layers, AgentBinary: agentBin, Resources: res}); err != nil {
				t.Fatal(err)
			}
			wantPids := res.Pids
			if kind == KindRunsc {
				wantPids = runscPidsLimit(res.Pids)
			}
			mem, pids := strconv.FormatInt(res.MemoryBytes, 10), strconv.FormatInt(wantPids, 10)
			// Paths are <controller>/<file> on v1 and <file> on v2.
			tests := []struct{ file, want string }{
				{"memory/memory.limit_in_bytes", mem},
				{"cpu/cpu.cfs_quota_us", "50000"},
				{"cpu/cpu.cfs_period_us", "100000"},
				{"pids/pids.max", pids},
			}
			if r.host.swapAccounting {
				tests = append(tests, struct{ file, want string }{"memory/memory.memsw.limit_in_bytes", mem})
			}
			if r.host.cgroupV2 {
				tests = []struct{ file, want string }{
					{"memory.max", mem},
					{"cpu.max", "50000 100000"},
					{"pids.max", pids},
				}
				// Swap equal to the limit in the spec (memory plus swap)
				// is no swap at all in v2's separate swap limit.
				if r.host.swapAccounting {
					tests = append(tests, struct{ file, want string }{"memory.swap.max", "0"})
				}
			}
			for _, tt := range tests {
				ctrl, file, _ := strings.Cut(tt.file, "/")
				path := filepath.Join(cgroupRoot, ctrl, r.cgroupParent, id, file)
				if r.host.cgroupV2 {
					path = filepath.Join(cgroupRoot, r.cgroupParent, id, tt.file)
				}
				b, err := os.ReadFile(path)
				if err != nil || strings.TrimSpace(string(b)) != tt.want {
					t.Errorf("%s = %q, %v; want %s", tt.file, strings.TrimSpace(string(b)), err, tt.want)
				}
			}
			if err := r.Destroy(ctx, id); err != nil {
				t.Fatal(err)
			}
			if dirs := r.cgroupDirs(id); len(dirs) > 0 {
				t.Errorf("cgroups left: %v", dirs)
			}
		})
	}
}

// TestStartRollsBack makes the runtime's create fail and checks that
// Start leaves nothing behind: no mount, no loop device, no directory.
func TestStartRollsBack(t *testing.T) {
	layers, agentBin := fixtures(t, KindRunc)
	realBin, _ := exec.LookPath(KindRunc)
	wrapper := filepath.Join(t.TempDir(), "runc")
	// runc's start is one `run --detach`; runsc's a `create` and a `start`.
	script := fmt.Sprintf("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in create|run) echo injected failure >&2; exit 1;; esac; done\nexec %s \"$@\"\n", realBin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m, _ := mountsUnder(dir); len(m) == 0 {
			os.RemoveAll(dir)
		}
	})
	r, err := New(Options{Runtime: KindRunc, Binary: wrapper, Root: dir, CgroupParent: "paddock-test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := runtimetest.NewID(t)
	t.Cleanup(func() { _ = r.Destroy(context.Background(), id) })
	_, err = r.Start(ctx, runtime.Spec{ID: id, Layers: layers, AgentBinary: agentBin, Resources: testResources()})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Start = %v, want the injected failure", err)
	}
	if m, _ := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left after failed Start: %v", m)
	}
	if _, err := os.Lstat(r.sandboxDir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox dir left after failed Start: %v", err)
	}
	if _, err := r.Status(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status after failed Start = %v, want ErrNotFound", err)
	}
}

// TestSurvivesDaemonKill starts a sandbox from a child process, SIGKILLs
// that process, and checks the sandbox still runs and a new backend on
// the same state root adopts it.
func TestSurvivesDaemonKill(t *testing.T) {
	for _, kind := range testRuntimes() {
		t.Run(kind, func(t *testing.T) {
			layers, agentBin := fixtures(t, kind)
			r := newTestRuntime(t, kind)
			id := runtimetest.NewID(t)
			spec := runtime.Spec{ID: id, Layers: layers, AgentBinary: agentBin, Resources: testResources()}
			b, _ := json.Marshal(spec)
			cmd := exec.Command(os.Args[0])
			cmd.Stderr = tWriter{t}
			cmd.Env = append(os.Environ(), "PADDOCK_OCI_HELPER="+string(b), "PADDOCK_OCI_HELPER_ROOT="+r.root, "PADDOCK_OCI_HELPER_KIND="+kind)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			sc := bufio.NewScanner(out)
			started := false
			for sc.Scan() {
				if strings.Contains(sc.Text(), "HELPER-STARTED") {
					started = true
					break
				}
				t.Log(sc.Text())
			}
			if !started {
				t.Fatal("helper did not start the sandbox")
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A new backend on the same root plays the restarted daemon.
			r2, err := New(Options{Runtime: kind, Binary: binaryFor(kind), Root: r.root, CgroupParent: r.cgroupParent, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			st, err := r2.Status(ctx, id)
			if err != nil || st != runtime.StatusRunning {
				t.Fatalf("Status after daemon kill = %s, %v; want running", st, err)
			}
			info, err := r2.Info(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if err := healthy(ctx, info.AgentSocket); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMain lets the test binary double as the daemon that
// TestSurvivesDaemonKill starts and kills.
func TestMain(m *testing.M) {
	if raw := os.Getenv("PADDOCK_OCI_HELPER"); raw != "" {
		os.Exit(helperStart(raw))
	}
	code := m.Run()
	runtimetest.CleanupAgentBinary()
	os.Exit(code)
}

func helperStart(raw string) int {
	var spec runtime.Spec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := New(Options{Runtime: os.Getenv("PADDOCK_OCI_HELPER_KIND"), Binary: binaryFor(os.Getenv("PADDOCK_OCI_HELPER_KIND")), Root: os.Getenv("PADDOCK_OCI_HELPER_ROOT"), CgroupParent: "paddock-test"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.Start(ctx, spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("HELPER-STARTED")
	// Wait to be killed; the parent kills this process, and the timeout
	// bounds it should the parent die first.
	<-ctx.Done()
	return 0
}

// TestDestroyRefusesThroughMount checks Destroy never deletes through a
// mount left under the sandbox directory.
func TestDestroyRefusesThroughMount(t *testing.T) {
	needRoot(t)
	r := newTestRuntime(t, KindRunc)
	id := runtimetest.NewID(t)
	dir := r.sandboxDir(id)
	precious := t.TempDir()
	if err := os.WriteFile(filepath.Join(precious, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "stray")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(precious, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(target) })
	err := r.Destroy(context.Background(), id)
	if err == nil {
		t.Fatal("Destroy removed a sandbox dir with a mount under it")
	}
	if _, err := os.Stat(filepath.Join(precious, "keep")); err != nil {
		t.Fatalf("Destroy deleted through the mount: %v", err)
	}
	if err := unmount(target); err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(context.Background(), id); err != nil {
		t.Fatalf("Destroy after unmount: %v", err)
	}
}
