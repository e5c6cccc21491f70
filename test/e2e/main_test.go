// Package e2e drives the real paddock binary (CLI and daemon) against real
// runc and runsc containers, a real SQLite store and real images. Every test
// here needs root and runc; without them they skip with the reason.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	tmpRoot   string
)

func TestMain(m *testing.M) {
	// Short paths: a sandbox's agent socket lives under the state dir, and
	// unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("/tmp", "pd")
	if err == nil {
		// Searchable, as a daemon's state dir's parents must be for its
		// sandboxes to run in user namespaces.
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireHost skips unless the machine can run sandboxes.
func requireHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon creates containers, mounts and cgroups")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("needs runc (apt-get install runc)")
	}
}

func requireGVisor(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(runscBin()); err != nil {
		t.Skipf("needs runsc (%s; apt-get install runsc, or scripts/install-deps.sh for the pinned build)", runscBin())
	}
}

// runscBin is the runsc the test daemons run ($PADDOCK_RUNSC, else the
// pinned build, else Debian's in PATH).
func runscBin() string { return config.RunscFromEnv(os.Getenv) }

// paddockBin builds the real binary once, or takes the one built ahead
// in $PADDOCK_TEST_BIN (the cgroup v2 VM has no Go toolchain).
func paddockBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if prebuilt := os.Getenv("PADDOCK_TEST_BIN"); prebuilt != "" {
			binPath = prebuilt
			return
		}
		binPath = filepath.Join(tmpRoot, "paddock")
		cmd := exec.Command("../../scripts/build.sh", binPath) // as `make build` does
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// imagesDir is shared by every daemon of the test run (and, through
// PADDOCK_TEST_IMAGE_CACHE, by every run on the machine), so Debian's
// base image is built once.
func imagesDir() string {
	if d := os.Getenv("PADDOCK_TEST_IMAGE_CACHE"); d != "" {
		return d
	}
	return filepath.Join(tmpRoot, "images")
}

// daemon is one real `paddock serve` process.
type daemon struct {
	t        *testing.T
	stateDir string
	socket   string
	listen   string
	cmd      *exec.Cmd
	exited   chan struct{}
	logs     *syncBuffer
	client   *paddock.Client
	images   string // "" = imagesDir()
	env      []string
}

// syncBuffer collects a daemon's output (shared with internal/testdaemon).
type syncBuffer = testdaemon.LogBuffer

type daemonOpts struct {
	listen bool
	// imagesDir, when set, replaces the image cache shared by the tests
	// (for tests that delete images).
	imagesDir string
	// env is added to the daemon's environment.
	env []string
}

// startDaemon starts a daemon on a fresh state dir; t.Cleanup stops it and
// destroys every sandbox it has.
func startDaemon(t *testing.T, o daemonOpts) *daemon {
	t.Helper()
	requireHost(t)
	state, err := os.MkdirTemp(tmpRoot, "s")
	if err != nil {
		t.Fatal(err)
	}
	env := o.env
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PADDOCK_NETWORK_RANGE=") }) {
		// Each daemon claims its range on the host: one of its own, also
		// when the test never makes a networked sandbox.
		env = append(slices.Clip(env), "PADDOCK_NETWORK_RANGE="+testnet.DaemonRange(t))
	}
	d := &daemon{t: t, stateDir: state, socket: filepath.Join(state, "paddock.sock"), images: o.imagesDir, env: env}
	if o.listen {
		d.listen = freeAddr(t)
	}
	d.client = &paddock.Client{Socket: d.socket}
	d.start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if d.cmd == nil {
			d.start()
		}
		// Pools refill in the background: remove them first, or a refill
		// could start a sandbox after the list below.
		if pools, err := d.client.Pools(ctx); err == nil {
			for _, p := range pools {
				_ = d.client.DeletePool(ctx, p.Name)
			}
		}
		for range 3 {
			list, err := d.client.List(ctx, nil)
			if err != nil || len(list) == 0 {
				break
			}
			for _, s := range list {
				_ = d.client.Delete(ctx, s.ID)
			}
		}
		d.stop()
		sweepState(t, state)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs.String())
		}
		_ = os.RemoveAll(state)
	})
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	args := []string{"serve", "--state-dir", d.stateDir, "--socket", d.socket, "--log-level", "debug"}
	if d.listen != "" {
		args = append(args, "--listen", d.listen)
	}
	cmd := exec.Command(paddockBin(d.t), args...)
	// Port 0: daemons of parallel tests must not fight over the preview port.
	images := imagesDir()
	if d.images != "" {
		images = d.images
	}
	// Disks are admitted against the host's free space, which other runs
	// on the machine share; tests of disk admission set their own ratio.
	cmd.Env = append(os.Environ(), "PADDOCK_IMAGES_DIR="+images, "PADDOCK_PREPARE_DEFAULT_IMAGE=false", "PADDOCK_DISK_OVERCOMMIT=100")
	if os.Getenv("PADDOCK_PREVIEW_LISTEN") == "" { // a test may pick its own
		cmd.Env = append(cmd.Env, "PADDOCK_PREVIEW_LISTEN=127.0.0.1:0")
	}
	cmd.Env = append(cmd.Env, d.env...)
	if d.logs == nil {
		d.logs = &syncBuffer{}
	}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, d.exited)
	// Budgets stretch on slow hosts (PADDOCK_TEST_TIME_SCALE, as in the
	// cgroup v2 VM's emulation).
	deadline := time.Now().Add(runtimetest.Scaled(60 * time.Second))
	for {
		select {
		case <-d.exited:
			d.cmd = nil
			d.t.Fatalf("daemon exited at start:\n%s", d.logs.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			// Not left running: it would hold its network range and
			// fail the next test's daemon.
			_ = d.cmd.Process.Kill()
			<-d.exited
			d.cmd = nil
			d.t.Fatalf("daemon did not answer: %v\n%s", err, d.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the daemon gracefully (sandboxes keep running).
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(runtimetest.Scaled(20 * time.Second)):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

// kill9 ends the daemon the hard way.
func (d *daemon) kill9() {
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.cmd = nil
}

// run runs the CLI against this daemon and returns stdout, stderr and the
// exit code.
func (d *daemon) run(args ...string) (string, string, int) {
	d.t.Helper()
	return d.runStdin(nil, args...)
}

func (d *daemon) runStdin(stdin []byte, args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, paddockBin(d.t), args...)
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket)
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

// must runs the CLI and fails the test unless it exits 0.
func (d *daemon) must(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.run(args...)
	if code != 0 {
		d.t.Fatalf("paddock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func freeAddr(t *testing.T) string { return testdaemon.FreeAddr(t) }

func uniqueName(prefix string) string { return testdaemon.UniqueName(prefix) }

// sweepState removes whatever a test daemon left running under its state
// dir (the daemon leaves sandboxes running when it stops, by design):
// containers, then mounts, deepest first. It logs what it had to remove.
func sweepState(t *testing.T, state string) {
	t.Helper()
	for _, left := range testdaemon.Leftovers(state) {
		t.Logf("cleanup: %s was still there", left)
	}
}
