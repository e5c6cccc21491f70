//go:build cgroupv2vm

package cgroupv2

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInsideSystemdUnit runs inside the VM only (inside.sh selects it): it
// installs deploy/systemd/paddock.service, starts it, creates a sandbox,
// restarts and stops the daemon and checks the sandbox lived through both,
// as the unit's KillMode promises, with its cgroup limits still in force.
func TestInsideSystemdUnit(t *testing.T) {
	share := os.Getenv("PADDOCK_CGROUPV2_SHARE")
	if os.Getenv("PADDOCK_CGROUPV2_INSIDE") != "1" || share == "" {
		t.Skip("runs only inside the cgroup v2 VM: it installs a systemd unit on the machine")
	}
	if comm, _ := os.ReadFile("/proc/1/comm"); strings.TrimSpace(string(comm)) != "systemd" {
		t.Fatalf("PID 1 is %q, not systemd", comm)
	}
	install(t, filepath.Join(share, "bin", "paddock"), "/usr/local/bin/paddock", 0o755)
	install(t, filepath.Join(share, "paddock.service"), "/etc/systemd/system/paddock.service", 0o644)
	// No network in the VM: the daemon must not try to build Debian's base
	// image. A drop-in, as a user would add one.
	dropIn := "/etc/systemd/system/paddock.service.d"
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropIn, "test.conf"), []byte("[Service]\nEnvironment=PADDOCK_PREPARE_DEFAULT_IMAGE=false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("systemctl", "stop", "paddock").Run()
		os.RemoveAll(dropIn)
		os.Remove("/etc/systemd/system/paddock.service")
		_ = exec.Command("systemctl", "daemon-reload").Run()
	})
	sh(t, "systemctl", "daemon-reload")
	if out, err := exec.Command("systemd-analyze", "verify", "/etc/systemd/system/paddock.service").CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	start := time.Now()
	sh(t, "systemctl", "start", "paddock")
	waitReady(t)
	t.Logf("FIGURE serve-ready %.1fs after systemctl start (first start)", time.Since(start).Seconds())
	info := sh(t, "paddock", "info")
	t.Logf("paddock info:\n%s", info)
	for _, rt := range []string{"runc", "crun"} {
		if !runtimeAvailable(info, rt) {
			t.Errorf("%s is not available under systemd on cgroup v2:\n%s", rt, info)
		}
	}

	id := strings.TrimSpace(sh(t, "paddock", "create", "--image", "busybox"))
	cg := filepath.Join("/sys/fs/cgroup/paddock", id)
	pids := cgroupPids(t, cg)
	memMax := readTrim(t, filepath.Join(cg, "memory.max"))
	t.Logf("sandbox %s: pids %v, memory.max %s", id, pids, memMax)
	if memMax == "max" {
		t.Errorf("memory.max of the sandbox is unlimited")
	}

	start = time.Now()
	sh(t, "systemctl", "restart", "paddock")
	waitReady(t)
	t.Logf("FIGURE serve-ready %.1fs after systemctl restart (one sandbox to adopt)", time.Since(start).Seconds())
	checkAlive(t, pids)
	if got := strings.TrimSpace(sh(t, "paddock", "exec", id, "--", "echo", "adopted")); got != "adopted" {
		t.Errorf("exec after restart: %q", got)
	}
	if got := readTrim(t, filepath.Join(cg, "memory.max")); got != memMax {
		t.Errorf("memory.max after restart %s, was %s", got, memMax)
	}

	sh(t, "systemctl", "stop", "paddock")
	checkAlive(t, pids)
	if st := strings.TrimSpace(shAllowFail("systemctl", "is-active", "paddock")); st != "inactive" {
		t.Errorf("after stop the unit is %q", st)
	}
	sh(t, "systemctl", "start", "paddock")
	waitReady(t)
	if ls := sh(t, "paddock", "ls"); !strings.Contains(ls, id) || !strings.Contains(ls, "running") {
		t.Errorf("after stop and start the sandbox is not running:\n%s", ls)
	}
	sh(t, "paddock", "rm", id)
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left after rm: %v", cg, err)
	}
	sh(t, "systemctl", "stop", "paddock")
}

func install(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// sh runs a command and returns its stdout (the CLI's progress goes to
// stderr, shown only on failure).
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s\njournal:\n%s", name, strings.Join(args, " "), err, out, stderr.String(),
			shAllowFail("journalctl", "-u", "paddock", "--no-pager", "-n", "40"))
	}
	return string(out)
}

func shAllowFail(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	return string(out)
}

// waitReady waits for the daemon to answer on its default socket.
func waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if exec.Command("paddock", "info").Run() == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the daemon did not answer within 3 minutes; journal:\n%s",
		shAllowFail("journalctl", "-u", "paddock", "--no-pager", "-n", "60"))
}

// runtimeAvailable reads `paddock info`'s runtime table.
func runtimeAvailable(info, rt string) bool {
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == rt {
			return f[1] == "true"
		}
	}
	return false
}

func cgroupPids(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(readTrim(t, filepath.Join(dir, "cgroup.procs"))) {
		var p int
		for _, c := range f {
			p = p*10 + int(c-'0')
		}
		pids = append(pids, p)
	}
	if len(pids) == 0 {
		t.Fatalf("no process in %s", dir)
	}
	return pids
}

func checkAlive(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		if err := syscall.Kill(p, 0); err != nil {
			t.Errorf("sandbox process %d is gone: %v", p, err)
		}
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
