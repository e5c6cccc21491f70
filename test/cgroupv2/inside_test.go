//go:build cgroupv2vm

package cgroupv2

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestInsideSystemdUnit runs inside the VM only (inside.sh selects it): it
// installs deploy/systemd/paddock.service, starts it, creates a sandbox,
// restarts and stops the daemon and checks the sandbox lived through both,
// as the unit's KillMode promises, with its cgroup limits still in force.
func TestInsideSystemdUnit(t *testing.T) {
	installUnit(t)
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

// TestInsideOOMKill runs inside the VM only, on the daemon of the systemd
// unit: a memory hog in a sandbox of 64 MiB is ended by the kernel's OOM
// killer, the kill is counted in the sandbox's own cgroup (oom_kill in
// memory.events, which the daemon reads), the exec says it was killed for
// memory, and the sandbox lives on.
func TestInsideOOMKill(t *testing.T) {
	installUnit(t)
	sh(t, "systemctl", "start", "paddock")
	waitReady(t)
	id := strings.TrimSpace(sh(t, "paddock", "create", "--image", "busybox", "--memory", "64M"))
	t.Cleanup(func() { _ = exec.Command("paddock", "rm", id).Run() })
	cg := filepath.Join("/sys/fs/cgroup/paddock", id)
	if got := readTrim(t, filepath.Join(cg, "memory.max")); got != strconv.Itoa(64<<20) {
		t.Errorf("memory.max %s, want %d", got, 64<<20)
	}
	// The VM's kernel accounts swap: the sandbox gets none.
	if got := readTrim(t, filepath.Join(cg, "memory.swap.max")); got != "0" {
		t.Errorf("memory.swap.max %s, want 0", got)
	}
	t.Logf("FIGURE limits read back: memory.max %s, memory.swap.max %s, pids.max %s, cpu.max %s",
		readTrim(t, filepath.Join(cg, "memory.max")), readTrim(t, filepath.Join(cg, "memory.swap.max")),
		readTrim(t, filepath.Join(cg, "pids.max")), readTrim(t, filepath.Join(cg, "cpu.max")))
	before := oomKills(t, cg)
	c := &paddock.Client{Socket: paddock.DefaultSocket}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	// busybox sort holds its whole input line: /dev/zero has no newline.
	res, err := c.Exec(ctx, id, paddock.ExecOptions{Cmd: []string{"sort", "/dev/zero"}})
	if err != nil {
		t.Fatalf("exec of the hog: %v", err)
	}
	after := oomKills(t, cg)
	t.Logf("FIGURE oom-kill hog ended after %.1fs: %+v; oom_kill in memory.events %d, was %d", time.Since(start).Seconds(), *res, after, before)
	if res.Signal != "SIGKILL" || !res.OOMKilled {
		t.Errorf("hog ended %+v, want SIGKILL with OOMKilled", *res)
	}
	if after <= before {
		t.Errorf("oom_kill in %s/memory.events is %d, was %d: the kill was not counted in the sandbox's cgroup", cg, after, before)
	}
	if got := strings.TrimSpace(sh(t, "paddock", "exec", id, "--", "echo", "alive")); got != "alive" {
		t.Errorf("exec after the hog: %q", got)
	}
	if sb, err := c.Get(ctx, id); err != nil || sb.State != api.StateRunning {
		t.Errorf("sandbox after its hog was killed: %+v %v", sb, err)
	}
	sh(t, "paddock", "rm", id)
	sh(t, "systemctl", "stop", "paddock")
}

// installUnit installs the binary and deploy/systemd/paddock.service from
// the shared directory, with a drop-in for the VM; t.Cleanup stops and
// removes the unit.
func installUnit(t *testing.T) {
	t.Helper()
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
}

// oomKills reads oom_kill from a cgroup's memory.events.
func oomKills(t *testing.T, dir string) int {
	t.Helper()
	for _, line := range strings.Split(readTrim(t, filepath.Join(dir, "memory.events")), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("memory.events: %q", line)
			}
			return n
		}
	}
	t.Fatalf("no oom_kill in %s/memory.events", dir)
	return 0
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
