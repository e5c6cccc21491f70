package oci

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
)

func TestParseRuncInit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    runcInit
		wantErr bool
	}{
		{"runc 1.1", `{"id":"x","init_process_pid":1266,"init_process_start":1262901,"cgroup_paths":{}}`, runcInit{1266, 1262901}, false},
		{"no pid", `{"init_process_start":5}`, runcInit{}, true},
		{"no start", `{"init_process_pid":5}`, runcInit{}, true},
		{"negative pid", `{"init_process_pid":-1,"init_process_start":5}`, runcInit{}, true},
		{"not json", `state`, runcInit{}, true},
		{"start as string", `{"init_process_pid":5,"init_process_start":"5"}`, runcInit{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRuncInit([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseRuncInit = %+v, %v; want %+v, err %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzParseRuncInit(f *testing.F) {
	f.Add([]byte(`{"init_process_pid":1266,"init_process_start":1262901}`))
	f.Add([]byte(`{"init_process_pid":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseRuncInit(b)
		if err == nil && (st.Pid <= 0 || st.Start == 0) {
			t.Fatalf("accepted %+v", st)
		}
	})
}

func TestProcStartTime(t *testing.T) {
	rest := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	for _, tc := range []struct {
		name string
		in   string
		want uint64
		ok   bool
	}{
		{"plain", "12 (sh)" + rest, 424242, true},
		{"name with spaces and parens", "12 (a) b (c) d)" + rest, 424242, true},
		{"short", "12 (sh) S 1 2", 0, false},
		{"no paren", "12 sh S", 0, false},
		{"not a number", "12 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := procStartTime([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("procStartTime = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	// The live value must be readable for this very process.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if v, ok := procStartTime(b); !ok || v == 0 {
		t.Fatalf("procStartTime(/proc/self/stat) = %d, %v", v, ok)
	}
}

func FuzzProcStartTime(f *testing.F) {
	f.Add([]byte("12 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20"))
	f.Fuzz(func(t *testing.T, b []byte) { procStartTime(b) })
}

// TestKillInitChecksStartTime checks a pid whose start time is not init's
// (the pid was reused) is never signalled, and that the right one dies.
func TestKillInitChecksStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	start, ok := procStartTime(b)
	if !ok {
		t.Fatal("no start time")
	}
	if err := killInit(runcInit{Pid: pid, Start: start + 1}); err != nil {
		t.Fatalf("killInit with a stale start time: %v", err)
	}
	if !processAlive(pid) {
		t.Fatal("a process with another start time was killed")
	}
	// The child is never reaped before Wait, so the pidfd sees its exit
	// as a zombie.
	if err := killInit(runcInit{Pid: pid, Start: start}); err != nil {
		t.Fatalf("killInit: %v", err)
	}
	if processAlive(pid) {
		t.Fatal("init survived killInit")
	}
}

// TestFastKill runs a real runc sandbox through Kill and Destroy without
// `runc state` and `runc kill`, and a paused one through the slow path.
func TestFastKill(t *testing.T) {
	layers, agentBin := fixtures(t, KindRunc)
	for _, paused := range []bool{false, true} {
		t.Run("paused="+strconv.FormatBool(paused), func(t *testing.T) {
			r := newTestRuntime(t, KindRunc)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := runtimetest.NewID(t)
			info, err := r.Start(ctx, runtime.Spec{ID: id, Layers: layers, AgentBinary: agentBin, Resources: testResources()})
			if err != nil {
				t.Fatal(err)
			}
			if err := healthy(ctx, info.AgentSocket); err != nil {
				t.Fatal(err)
			}
			if paused {
				if err := r.Pause(ctx, id); err != nil {
					t.Fatal(err)
				}
				if !r.frozen(id) {
					t.Fatal("frozen() = false for a paused sandbox")
				}
			} else if r.frozen(id) {
				t.Fatal("frozen() = true for a running sandbox")
			}
			if err := r.Kill(ctx, id); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			if processAlive(info.Pid) {
				t.Fatalf("init %d alive after Kill", info.Pid)
			}
			if st, err := r.Status(ctx, id); err != nil || st != runtime.StatusStopped {
				t.Fatalf("Status after Kill = %s, %v; want stopped", st, err)
			}
			// Kill is idempotent: the dead init is not signalled again.
			if err := r.Kill(ctx, id); err != nil {
				t.Fatalf("second Kill: %v", err)
			}
			if err := r.Destroy(ctx, id); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(r.stateDir(), id)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("runc state dir left after Destroy: %v", err)
			}
			if len(r.cgroupDirs(id)) > 0 {
				t.Fatalf("cgroups left after Destroy: %v", r.cgroupDirs(id))
			}
			// No container left: nothing to do, no error.
			if found, err := r.fastKill(ctx, id, true); found || err != nil {
				t.Fatalf("fastKill of a deleted container = %v, %v", found, err)
			}
		})
	}
}
