// Package e2bcompat runs the unmodified `e2b` and `@e2b/code-interpreter`
// npm packages (pinned in package-lock.json) against a real Paddock daemon:
// Node test suites that cover what E2B users call, and E2B's quick start
// configured by nothing but E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY.
package e2bcompat

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func requireTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon creates containers, mounts and cgroups")
	}
	for _, bin := range []string{"runc", "node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s on PATH", bin)
		}
	}
}

// syncBuffer collects a daemon's output (shared with internal/testdaemon).
type syncBuffer = testdaemon.LogBuffer

// daemon is a real `paddock serve` with a loopback TCP listener.
type daemon struct {
	bin, socket, addr string
	client            *paddock.Client
	logs              *syncBuffer
}

// startDaemon starts the daemon with env added to this process's.
func startDaemon(t *testing.T, env ...string) *daemon {
	t.Helper()
	// Short paths: agent sockets live under the state dir (107-byte limit).
	dir, err := os.MkdirTemp("/tmp", "pdc-")
	if err == nil {
		err = os.Chmod(dir, 0o711) // reachable for sandboxes in user namespaces
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "paddock")
	build := exec.Command("../../../scripts/build.sh", bin) // as `make build` does
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	images := os.Getenv("PADDOCK_TEST_IMAGE_CACHE")
	if images == "" {
		images = filepath.Join(dir, "images")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &daemon{bin: bin, socket: filepath.Join(dir, "p.sock"), addr: addr, logs: &syncBuffer{}}
	d.client = &paddock.Client{Socket: d.socket}
	cmd := exec.Command(bin, "serve", "--state-dir", filepath.Join(dir, "s"), "--socket", d.socket, "--listen", addr, "--log-level", "debug")
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PADDOCK_NETWORK_RANGE=") }) {
		// Every daemon claims its range on the host; the default one
		// would collide with other runs' daemons.
		env = append(slices.Clip(env), "PADDOCK_NETWORK_RANGE="+testnet.DaemonRange(t))
	}
	// Disks are admitted against the host's free space, which other runs
	// on the machine share.
	cmd.Env = append(append(os.Environ(), "PADDOCK_IMAGES_DIR="+images, "PADDOCK_PREPARE_DEFAULT_IMAGE=false", "PADDOCK_DISK_OVERCOMMIT=100"), env...)
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if list, err := d.client.List(ctx, nil); err == nil {
			for _, s := range list {
				_ = d.client.Delete(ctx, s.ID)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return d
		}
		select {
		case <-exited:
			t.Fatalf("daemon exited at start:\n%s", d.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer: %v\n%s", err, d.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// e2bKey issues a key the way a user would: `paddock keys create --e2b`.
func (d *daemon) e2bKey(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(d.bin, "keys", "create", "--e2b", "compat")
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("paddock keys create --e2b: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if !strings.HasPrefix(key, "e2b_") || len(key) != len("e2b_")+64 {
		t.Fatalf("key %q is not in E2B's e2b_<hex> format", key)
	}
	return key
}

// e2bEnv is the whole configuration an E2B user changes.
func (d *daemon) e2bEnv(key string) []string {
	url := "http://" + d.addr
	return []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key}
}

func npmCI(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

func TestE2BSDK(t *testing.T) {
	requireTools(t)
	up := newUpstream(t) // netstate_test.go
	d := startDaemon(t, up.env...)
	key := d.e2bKey(t)
	npmCI(t)
	// The SDK's requests time out after 60 s; build the images first so
	// the first create does not wait for Debian's packages.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for _, img := range []string{"base", "code-interpreter"} {
		if _, err := d.client.EnsureImage(ctx, img, nil); err != nil {
			t.Fatalf("build the %s image: %v", img, err)
		}
	}

	t.Run("suite", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "e2b.test.mjs")
		cmd.Env = append(os.Environ(), d.e2bEnv(key)...)
		out, err := cmd.CombinedOutput()
		t.Logf("node --test:\n%s", out)
		if err != nil {
			t.Fatalf("the E2B SDK suite failed: %v", err)
		}
	})

	t.Run("snapshots, fork, network and secrets", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "state.test.mjs")
		cmd.Env = append(append(os.Environ(), d.e2bEnv(key)...), up.nodeEnv()...)
		out, err := cmd.CombinedOutput()
		t.Logf("node --test:\n%s", out)
		if err != nil {
			t.Fatalf("the E2B SDK state suite failed: %v", err)
		}
	})

	t.Run("code interpreter", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "codeinterp.test.mjs")
		cmd.Env = append(os.Environ(), d.e2bEnv(key)...)
		out, err := cmd.CombinedOutput()
		t.Logf("node --test:\n%s", out)
		if err != nil {
			t.Fatalf("the code-interpreter SDK suite failed: %v", err)
		}
	})

	t.Run("quickstart with only the three variables", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		node, _ := exec.LookPath("node")
		cmd := exec.CommandContext(ctx, node, "quickstart.mjs")
		cmd.Env = d.e2bEnv(key)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("quickstart: %v\n%s%s", err, out, stderr.String())
		}
		if got, want := string(out), "42\nhello world\n"; got != want {
			t.Fatalf("quickstart printed %q, want %q", got, want)
		}
	})
}

// TestE2BConformance runs conformance.test.mjs, fileurls.test.mjs,
// mcp.test.mjs and templates.test.mjs
// against the oldest and the newest `e2b` release E2B documents (npm
// aliases in package.json): each test there pins a behaviour of E2B's own
// that Paddock once did not match.
func TestE2BConformance(t *testing.T) {
	requireTools(t)
	d := startDaemon(t)
	key := d.e2bKey(t)
	npmCI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, img := range []string{"busybox", "base"} {
		if _, err := d.client.EnsureImage(ctx, img, nil); err != nil {
			t.Fatalf("build the %s image: %v", img, err)
		}
	}
	for _, sdk := range []string{"e2b-2-45", "e2b"} {
		t.Run(sdk, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "conformance.test.mjs", "fileurls.test.mjs", "mcp.test.mjs", "templates.test.mjs")
			cmd.Env = append(append(os.Environ(), d.e2bEnv(key)...), "E2B_SDK="+sdk)
			out, err := cmd.CombinedOutput()
			t.Logf("node --test (%s):\n%s", sdk, out)
			if err != nil {
				t.Fatalf("the conformance suite failed with %s: %v", sdk, err)
			}
		})
	}
}

// TestE2BCodeInterpreterCharts runs charts.test.mjs against the oldest
// `@e2b/code-interpreter` release that works here (2.7.0: earlier ones
// send runCode to https://49999-<id>.<domain> whatever E2B_SANDBOX_URL
// says, and the 1.x releases need an `e2b` 1.x, which reads neither
// E2B_API_URL nor E2B_SANDBOX_URL) and the newest pinned one
// (npm aliases in package.json): matplotlib charts come back as PNG and
// DataFrames as text and HTML, from the SDK's default template.
func TestE2BCodeInterpreterCharts(t *testing.T) {
	requireTools(t)
	d := startDaemon(t)
	key := d.e2bKey(t)
	npmCI(t)
	// The SDK's requests time out after 60 s; build the image first so the
	// first create does not wait for Debian's packages.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := d.client.EnsureImage(ctx, "code-interpreter", nil); err != nil {
		t.Fatalf("build the code-interpreter image: %v", err)
	}
	for _, sdk := range []string{"code-interpreter-2-7", "@e2b/code-interpreter"} {
		t.Run(sdk, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "charts.test.mjs")
			cmd.Env = append(append(os.Environ(), d.e2bEnv(key)...), "E2B_CI_SDK="+sdk)
			out, err := cmd.CombinedOutput()
			t.Logf("node --test (%s):\n%s", sdk, out)
			if err != nil {
				t.Fatalf("the charts suite failed with %s: %v", sdk, err)
			}
		})
	}
}
