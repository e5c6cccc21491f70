// Package testdaemon runs the real paddock binary as a daemon for tests
// outside test/e2e (the adversarial suite and the soak): it builds the
// binary once per test process, starts `paddock serve` on a fresh state
// dir, runs the CLI against it, and on cleanup destroys what the daemon
// made and checks the host for leftovers. helpers.go holds what tests of
// a daemon share (API keys as tenants, raw calls, short execs). It is
// imported by tests only.
package testdaemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// RequireHost skips unless the machine can run sandboxes: root and runc,
// and runsc when gvisor is set. CI has all of them, so nothing skips there.
func RequireHost(t testing.TB, gvisor bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon creates containers, mounts and cgroups")
	}
	tools := []string{"runc"}
	if gvisor {
		tools = append(tools, config.RunscFromEnv(os.Getenv))
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install %s)", tool, filepath.Base(tool))
		}
	}
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// repoRoot is the module's root, found from this file's path.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Binary builds bin/paddock as `make build` does, once per test process,
// into a directory removed by Cleanup; $PADDOCK_TEST_BIN names a prebuilt
// one instead (the cgroup v2 VM has no Go toolchain).
func Binary(t testing.TB) string {
	t.Helper()
	if prebuilt := os.Getenv("PADDOCK_TEST_BIN"); prebuilt != "" {
		return prebuilt
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "pdbin")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "paddock")
		cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "build.sh"), binPath)
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Cleanup removes the binary; call it from TestMain after m.Run.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Options change how a daemon starts.
type Options struct {
	// Env is added to the daemon's environment.
	Env []string
	// Args are added to `paddock serve`.
	Args []string
	// Listen serves the API on a free TCP address of 127.0.0.1 too
	// (Daemon.Listen), for API keys.
	Listen bool
	// ImagesDir, when set, replaces the image store the run shares (for
	// tests that delete or fill images).
	ImagesDir string
}

// Daemon is one running `paddock serve`.
type Daemon struct {
	t        testing.TB
	opts     Options
	StateDir string
	Socket   string
	Listen   string // the TCP listener's address, with Options.Listen
	Client   *paddock.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	logs   LogBuffer
}

// LogBuffer collects a daemon's output; it is safe for the process's
// writers and a test reading it at once.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ImagesDir is the image store every daemon of the run shares, so Debian's
// base image is built once per machine (PADDOCK_TEST_IMAGE_CACHE: a
// test-only hook, not a daemon setting, so not part of config.Config).
func ImagesDir(t testing.TB) string {
	if d := os.Getenv("PADDOCK_TEST_IMAGE_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "paddock-test-images")
}

// Start runs a daemon on a fresh state dir under a short path (agent
// socket paths must fit in 107 bytes). t.Cleanup destroys its sandboxes,
// stops it and fails the test if a container or mount of it is left.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	RequireHost(t, false)
	state, err := os.MkdirTemp("/tmp", "pa")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(o.Env, func(e string) bool { return strings.HasPrefix(e, "PADDOCK_NETWORK_RANGE=") }) {
		// Each daemon claims its range on the host and refuses one that
		// overlaps another's: a range of its own, also when the test
		// never makes a networked sandbox.
		o.Env = append(slices.Clip(o.Env), "PADDOCK_NETWORK_RANGE="+testnet.DaemonRange(t))
	}
	d := &Daemon{t: t, opts: o, StateDir: state, Socket: filepath.Join(state, "paddock.sock")}
	if o.Listen {
		d.Listen = FreeAddr(t)
	}
	d.Client = &paddock.Client{Socket: d.Socket}
	d.Restart()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if !d.Running() {
			d.Restart()
		}
		// Pools refill in the background: remove them first, or a refill
		// could start a sandbox after the list below.
		if pools, err := d.Client.Pools(ctx); err == nil {
			for _, p := range pools {
				_ = d.Client.DeletePool(ctx, p.Name)
			}
		}
		for range 3 {
			list, err := d.Client.List(ctx, nil)
			if err != nil || len(list) == 0 {
				break
			}
			for _, s := range list {
				_ = d.Client.Delete(ctx, s.ID)
			}
		}
		d.Stop()
		if left := Leftovers(state); len(left) > 0 {
			t.Errorf("left behind by the daemon: %s", strings.Join(left, "; "))
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.Logs())
		}
		_ = os.RemoveAll(state)
	})
	return d
}

// Logs is everything the daemon printed.
func (d *Daemon) Logs() string { return d.logs.String() }

// LogBuffer is where the daemon's output goes, for a test to read as it
// comes.
func (d *Daemon) LogBuffer() *LogBuffer { return &d.logs }

// Env is what the daemon's environment gets beyond the test's own, its
// network range included.
func (d *Daemon) Env() []string { return slices.Clone(d.opts.Env) }

// Process is the running daemon's process, nil while it is stopped.
func (d *Daemon) Process() *os.Process {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	return d.cmd.Process
}

// Exited is closed when the daemon process started last ends (nil while
// none was started).
func (d *Daemon) Exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exited
}

// Forget marks the daemon as stopped once a test has ended its process
// itself (Exited is closed), so the next Restart starts it afresh.
func (d *Daemon) Forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmd = nil
}

// CLI runs the paddock CLI against the daemon's socket, with stdin when
// it is not nil, and returns stdout, stderr and the exit code.
func (d *Daemon) CLI(stdin []byte, args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(d.t), args...)
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.Socket)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("paddock %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

// NetTag is the tag the daemon drew for its state dir: it names the
// daemon's namespaces, veths, nftables table and iptables chains.
func (d *Daemon) NetTag() string {
	d.t.Helper()
	tag, err := readNetTag(d.StateDir)
	if err != nil {
		d.t.Fatalf("the daemon's network tag: %v", err)
	}
	return tag
}

// readNetTag reads the network tag a daemon drew for its state dir.
func readNetTag(state string) (string, error) {
	b, err := os.ReadFile(filepath.Join(state, "network", "links", "tag"))
	return strings.TrimSpace(string(b)), err
}

// Running says whether the daemon process is up.
func (d *Daemon) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd != nil
}

// Restart starts the daemon (again) and waits until it answers.
func (d *Daemon) Restart() {
	d.t.Helper()
	args := []string{"serve", "--state-dir", d.StateDir, "--socket", d.Socket, "--log-level", "debug"}
	if d.Listen != "" {
		args = append(args, "--listen", d.Listen)
	}
	args = append(args, d.opts.Args...)
	cmd := exec.Command(Binary(d.t), args...)
	// Disks are admitted against the host's free space, which other runs
	// on the machine share; Options.Env may set another ratio.
	images := ImagesDir(d.t)
	if d.opts.ImagesDir != "" {
		images = d.opts.ImagesDir
	}
	cmd.Env = append(os.Environ(), "PADDOCK_IMAGES_DIR="+images, "PADDOCK_PREPARE_DEFAULT_IMAGE=false", "PADDOCK_PREVIEW_LISTEN=127.0.0.1:0", "PADDOCK_DISK_OVERCOMMIT=100")
	cmd.Env = append(cmd.Env, d.opts.Env...)
	cmd.Stdout, cmd.Stderr = &d.logs, &d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	d.mu.Lock()
	d.cmd, d.exited = cmd, exited
	d.mu.Unlock()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-exited:
			d.mu.Lock()
			d.cmd = nil
			d.mu.Unlock()
			d.t.Fatalf("daemon exited at start:\n%s", d.Logs())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.Client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("daemon did not answer: %v\n%s", err, d.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the daemon with SIGTERM (sandboxes keep running).
func (d *Daemon) Stop() { d.end(syscall.SIGTERM) }

// Kill9 ends the daemon with SIGKILL, as a crash would.
func (d *Daemon) Kill9() { d.end(syscall.SIGKILL) }

func (d *Daemon) end(sig syscall.Signal) {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Leftovers lists the containers and mounts under a state dir: after a
// daemon destroyed all its sandboxes and stopped, there must be none.
// They are removed as they are found, so one failure does not leak into
// the next test.
func Leftovers(state string) []string {
	var left []string
	for _, rt := range []string{"runc", "runsc"} {
		root := filepath.Join(state, "runtime", rt, "state")
		if _, err := os.Stat(root); err != nil {
			continue
		}
		bin := rt
		if rt == "runsc" {
			bin = config.RunscFromEnv(os.Getenv) // the daemon's own
		}
		out, err := exec.Command(bin, "--root", root, "list", "--quiet").Output() // runsc has no -q
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			left = append(left, rt+" container "+id)
			_ = exec.Command(bin, "--root", root, "delete", "--force", id).Run()
		}
	}
	left = append(left, networkLeftovers(state)...)
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return left
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], state+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		left = append(left, "mount "+mounts[i])
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	return left
}

// networkLeftovers lists what of the daemon's networking (named by its
// tag) is still on the host: its nftables table, iptables chains and
// sandbox namespaces. The table and namespaces are removed; the next
// daemon removes chains that protect nothing.
func networkLeftovers(state string) []string {
	tag, err := readNetTag(state)
	if err != nil || tag == "" || strings.ContainsAny(tag, " /\n") {
		return nil
	}
	var left []string
	if exec.Command("nft", "list", "table", "inet", "paddock_"+tag).Run() == nil {
		left = append(left, "nftables table inet paddock_"+tag)
		_ = exec.Command("nft", "delete", "table", "inet", "paddock_"+tag).Run()
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(line, ":"); ok && strings.HasPrefix(c, "PADDOCK-") && strings.Contains(c, "-"+tag+" ") {
				left = append(left, "iptables chain "+strings.Fields(c)[0])
			}
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "paddock-"+tag+"-") {
			left = append(left, "network namespace "+e.Name())
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
	return left
}
