//go:build cgroupv2vm

package cgroupv2

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Which tests run inside, as -test.run patterns (overridable for a
// narrower run while working on one).
const (
	defaultOCIRun = "."
	// defaultOCISkip leaves out the one shared-suite check that measures
	// speed rather than the kernel: PidsLimit's children exit after 2 s,
	// and under emulation they exit faster than the shell starts them, so
	// the limit is never reached (docs/cgroupv2.md). pids.max is checked in
	// the VM by TestHostCgroupLimits.
	defaultOCISkip = "^TestSuite$/./^Isolation$/^PidsLimit$"
	defaultE2ERun  = "^(TestInfoRuntimesSizesLimits|TestPauseResume|TestDaemonKill9|TestStoppedSandboxStartsOnUse|TestUserNamespaces)$"
	// defaultE2ECrunRun is the e2e subset run again with crun as the
	// daemon's default runtime (suite e2e-crun).
	defaultE2ECrunRun = "^(TestPauseResume|TestDaemonKill9|TestStoppedSandboxStartsOnUse|TestUserNamespaces)$"
	// defaultAdversarialRun: what a hostile sandbox does that the kernel's
	// cgroup v2 and user namespaces must hold: the in-sandbox escape
	// probes, an OOM kill inside (the sandbox lives on) and a fork bomb
	// against pids.max, on runc (the daemon's default runtime), and a
	// gVisor sandbox whose sentry is killed reported as dead.
	// TestProbesCanSucceed, which runs the probes on the host where each
	// must succeed, runs on the build host only: in the VM it failed, for
	// a reason not yet looked into (docs/cgroupv2.md).
	// The probes and the fork bomb on gVisor are left out: under emulation
	// gVisor's fork bomb alone ran for over six minutes.
	defaultAdversarialRun = "^(TestEscapeProbes|TestSandboxProcsForkBomb)$/^runc$|^(TestSandboxDeathOOM|TestExecOOMKilled|TestSandboxDeathGVisor)$"
)

// defaultRuntimes are those the OCI suite runs on in the VM. gVisor is
// left out by default: under software emulation it is several times slower
// than runc and crun (docs/cgroupv2.md has the figures).
const defaultRuntimes = "runc,crun"

// defaultVMTimeout bounds one VM's whole life: boot, every suite,
// power-off (PADDOCK_CGROUPV2_VM_TIMEOUT, a Go duration, for a subset).
const defaultVMTimeout = 75 * time.Minute

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// TestCgroupV2 boots the VM once, with systemd as PID 1 (or, with
// PADDOCK_CGROUPV2_INIT=bare, a shell script that mounts what the suites
// need), and replays every test that ran inside as a subtest named
// <suite>/<test>.
func TestCgroupV2(t *testing.T) {
	bare := os.Getenv("PADDOCK_CGROUPV2_INIT") == "bare"
	if os.Geteuid() != 0 {
		t.Fatal("needs root: the image build runs mmdebstrap as root")
	}
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img", "mmdebstrap", "mkfs.ext4", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("needs %s: run PADDOCK_CGROUPV2_DEPS=1 scripts/install-deps.sh", bin)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	image := run(t, repo, nil, "test/cgroupv2/image.sh")
	image = strings.TrimSpace(image)
	t.Logf("image %s ready after %s", image, time.Since(t0).Round(time.Second))
	if b, err := os.ReadFile(filepath.Join(image, "build-time")); err == nil {
		t.Logf("image %s", strings.TrimSpace(string(b)))
	}

	vmTimeout, err := time.ParseDuration(envOr("PADDOCK_CGROUPV2_VM_TIMEOUT", defaultVMTimeout.String()))
	if err != nil {
		t.Fatalf("PADDOCK_CGROUPV2_VM_TIMEOUT: %v", err)
	}
	share := t.TempDir()
	buildBinaries(t, repo, share)
	suites := envOr("PADDOCK_CGROUPV2_SUITES", "oci e2e e2e-crun unit adversarial")
	if bare { // the unit needs systemd
		suites = strings.ReplaceAll(suites, "unit", "")
	}
	// Emulation runs several times slower than the host: the shared
	// runtime suite's time budgets are stretched (runtimetest.Scaled).
	env := fmt.Sprintf("SUITES=%q\nOCI_RUN=%q\nOCI_SKIP=%q\nE2E_RUN=%q\nE2E_CRUN_RUN=%q\nADVERSARIAL_RUN=%q\nPADDOCK_TEST_RUNTIMES=%q\nPADDOCK_TEST_TIME_SCALE=%q\n", suites,
		envOr("PADDOCK_CGROUPV2_OCI_RUN", defaultOCIRun), envOr("PADDOCK_CGROUPV2_OCI_SKIP", defaultOCISkip),
		envOr("PADDOCK_CGROUPV2_E2E_RUN", defaultE2ERun), envOr("PADDOCK_CGROUPV2_E2E_CRUN_RUN", defaultE2ECrunRun),
		envOr("PADDOCK_CGROUPV2_ADVERSARIAL_RUN", defaultAdversarialRun),
		envOr("PADDOCK_CGROUPV2_RUNTIMES", defaultRuntimes), envOr("PADDOCK_CGROUPV2_TIME_SCALE", "4"))
	if err := os.WriteFile(filepath.Join(share, "env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}

	bootStart := time.Now()
	console, stuck := boot(t, image, share, bare, vmTimeout)
	if stuck {
		// The emulator, not a test: the guest kernel's watchdog saw a
		// virtual CPU make no progress for minutes (seen once, in a page
		// fault of a runc process, both CPUs stuck for 13 minutes). The VM is booted
		// once more from a fresh overlay; a second lockup fails.
		t.Logf("the emulated CPU was stuck for minutes after %s (the guest kernel's soft lockup watchdog); booting the VM once more. The console's end:\n%s",
			time.Since(bootStart).Round(time.Second), tail(console, 30))
		if err := os.RemoveAll(filepath.Join(share, "out")); err != nil {
			t.Fatal(err)
		}
		bootStart = time.Now()
		if console, stuck = boot(t, image, share, bare, vmTimeout); stuck {
			t.Fatalf("the emulated CPU locked up again; the console:\n%s", tail(console, 80))
		}
	}
	t.Logf("VM ran %s", time.Since(bootStart).Round(time.Second))
	out := filepath.Join(share, "out")
	info, err := os.ReadFile(filepath.Join(out, "vm-info"))
	if err != nil {
		t.Fatalf("the VM wrote no results (%v); its console:\n%s", err, tail(console, 60))
	}
	t.Logf("VM:\n%s", info)
	if times, err := os.ReadFile(filepath.Join(out, "times")); err == nil {
		t.Logf("suite start and end, seconds of VM uptime:\n%s", times)
	}
	wantInit := "pid1 systemd"
	if bare {
		wantInit = "pid1 paddock-vmtest"
	}
	if !bytes.Contains(info, []byte("cgroupfs cgroup2fs")) || !bytes.Contains(info, []byte(wantInit)) {
		t.Fatalf("the VM is not what the suite promises (cgroup2 only, %s):\n%s", wantInit, info)
	}
	for _, s := range strings.Fields(suites) {
		replay(t, s, out)
	}
}

// run runs a command in dir and returns its stdout; stderr goes to the log.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(stderr.String(), 40))
	}
	return stdout.String()
}

// buildBinaries compiles, on the host, everything the VM runs: it has no
// Go toolchain. The binaries are static (CGO_ENABLED=0).
func buildBinaries(t *testing.T, repo, share string) {
	t.Helper()
	bin := filepath.Join(share, "bin")
	env := []string{"CGO_ENABLED=0"}
	run(t, repo, env, "scripts/build.sh", filepath.Join(bin, "paddock"))
	run(t, repo, env, "go", "build", "-o", filepath.Join(bin, "paddock-agent"), "./cmd/paddock-agent")
	// The daemon hands sandboxes a sealed, read-only agent; the tests too.
	if err := os.Chmod(filepath.Join(bin, "paddock-agent"), 0o555); err != nil {
		t.Fatal(err)
	}
	run(t, repo, env, "go", "test", "-c", "-o", filepath.Join(bin, "oci.test"), "./internal/runtime/oci")
	run(t, repo, env, "go", "test", "-c", "-o", filepath.Join(bin, "e2e.test"), "./test/e2e")
	run(t, repo, env, "go", "test", "-c", "-o", filepath.Join(bin, "adversarial.test"), "./test/adversarial")
	run(t, filepath.Join(repo, "test", "adversarial"), env, "go", "build", "-o", filepath.Join(bin, "probe"), "./probe")
	run(t, repo, env, "go", "test", "-c", "-tags", "cgroupv2vm", "-o", filepath.Join(bin, "cgroupv2.test"), "./test/cgroupv2")
	// Paddock's pinned runsc, when the host has it, goes in beside the
	// image's Debian runsc: the suites run gVisor on both, as on the host.
	if p := os.Getenv("PADDOCK_RUNSC"); filepath.IsAbs(p) {
		if b, err := os.ReadFile(p); err == nil {
			if err := os.WriteFile(filepath.Join(bin, "runsc-pinned"), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for src, dst := range map[string]string{
		"test/cgroupv2/inside.sh":        "inside.sh",
		"deploy/systemd/paddock.service": "paddock.service",
	} {
		b, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(share, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// softLockup matches what the guest kernel's watchdog prints, again every
// half minute or so, while a CPU makes no progress.
var softLockup = regexp.MustCompile(`watchdog: BUG: soft lockup - CPU#[0-9]+ stuck for ([0-9]+)s!`)

// lockedUp says whether console shows a CPU stuck for at least two
// minutes: a host too busy to run the emulator for a while makes shorter
// ones, which pass.
func lockedUp(console []byte) bool {
	for _, m := range softLockup.FindAllSubmatch(console, -1) {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n >= 120 {
			return true
		}
	}
	return false
}

// boot runs the VM to its power-off and returns its serial console. The VM
// gets no network device at all (-nic none): its tests use loopback and
// the network namespaces they make, never the host's network. Writes go to
// a throwaway qcow2 overlay; the cached image is only read. A VM whose
// console shows a CPU stuck for minutes (lockedUp) is stopped then, and
// stuck says so.
func boot(t *testing.T, image, share string, bare bool, vmTimeout time.Duration) (console string, stuck bool) {
	t.Helper()
	cmdline := "root=/dev/vda rw console=ttyS0 panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 systemd.show_status=0"
	if bare {
		cmdline += " init=/usr/local/sbin/paddock-vmtest"
	}
	dir := t.TempDir()
	overlay := filepath.Join(dir, "disk.qcow2")
	run(t, dir, nil, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", filepath.Join(image, "root.img"), overlay)
	consolePath := filepath.Join(dir, "console.log")
	ctx, cancel := context.WithTimeout(context.Background(), vmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-name", "paddock-cgroupv2-"+filepath.Base(dir),
		"-accel", "tcg", "-cpu", "max", "-m", envOr("PADDOCK_CGROUPV2_MEM", "3G"), "-smp", "2",
		"-nodefaults", "-no-reboot", "-display", "none", "-monitor", "none",
		"-serial", "file:"+consolePath,
		"-nic", "none",
		"-kernel", filepath.Join(image, "vmlinuz"), "-initrd", filepath.Join(image, "initrd.img"),
		"-append", cmdline,
		"-drive", "file="+overlay+",if=virtio,format=qcow2,cache=unsafe",
		"-virtfs", "local,path="+share+",mount_tag=share,security_model=none,id=share",
	)
	// Should this test binary die first (go test's -timeout panics), the
	// VM goes with it rather than running on unwatched.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	var locked atomic.Bool
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if b, err := os.ReadFile(consolePath); err == nil && lockedUp(b) {
				locked.Store(true)
				cancel()
				return
			}
		}
	}()
	err := cmd.Wait()
	cancel()
	<-watchDone
	raw, _ := os.ReadFile(consolePath)
	console = string(raw)
	if locked.Load() {
		return console, true
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("the VM did not power off within %s; its console:\n%s", vmTimeout, tail(console, 80))
	}
	if err != nil {
		t.Fatalf("qemu: %v\n%s\nconsole:\n%s", err, stderr.String(), tail(console, 80))
	}
	return console, false
}

// event is one line of test2json's output.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// replay turns one suite's -test.v output into subtests of t: each
// top-level test that ran inside passes, fails or skips here, with its
// output, so go test's log and scripts/test.sh's summary count them.
func replay(t *testing.T, suite, out string) {
	raw, err := os.ReadFile(filepath.Join(out, suite+".log"))
	if err != nil {
		t.Errorf("%s: no output from the VM: %v", suite, err)
		return
	}
	rcText, _ := os.ReadFile(filepath.Join(out, suite+".rc"))
	rc, err := strconv.Atoi(strings.TrimSpace(string(rcText)))
	if err != nil {
		t.Errorf("%s: no exit status from the VM (%q); output:\n%s", suite, rcText, tail(string(raw), 60))
		return
	}
	cmd := exec.Command("go", "tool", "test2json", "-t")
	cmd.Stdin = bytes.NewReader(raw)
	js, err := cmd.Output()
	if err != nil {
		t.Fatalf("test2json: %v", err)
	}
	type result struct {
		action  string
		output  strings.Builder
		elapsed float64
	}
	results := map[string]*result{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(js))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		r := results[top]
		if r == nil {
			r = &result{}
			results[top] = r
			order = append(order, top)
		}
		switch e.Action {
		case "output":
			r.output.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == top {
				r.action, r.elapsed = e.Action, e.Elapsed
			}
		}
	}
	failed := false
	for _, name := range order {
		r := results[name]
		t.Run(suite+"/"+name, func(t *testing.T) {
			switch r.action {
			case "pass":
				t.Logf("passed in the VM in %.1fs", r.elapsed)
				// Figures a passing test measured (lines marked FIGURE).
				for _, line := range strings.Split(r.output.String(), "\n") {
					if strings.Contains(line, "FIGURE ") {
						t.Log(strings.TrimSpace(line))
					}
				}
			case "skip":
				t.Skipf("skipped in the VM:\n%s", r.output.String())
			case "fail":
				failed = true
				t.Errorf("failed in the VM after %.1fs:\n%s", r.elapsed, r.output.String())
			default:
				failed = true
				t.Errorf("did not finish in the VM (timeout or crash); its output:\n%s", r.output.String())
			}
		})
	}
	if rc != 0 && !failed {
		t.Errorf("%s: exited %d in the VM without a failing test; output:\n%s", suite, rc, tail(string(raw), 60))
	}
	if len(order) == 0 {
		t.Errorf("%s: no test ran in the VM; output:\n%s", suite, tail(string(raw), 60))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
