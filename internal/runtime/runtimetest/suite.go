// Package runtimetest is the behaviour suite every runtime.Backend must
// pass: the oci backend runs it for runc and for runsc, processbackend its
// Unisolated part. It starts real sandboxes with the real agent and checks
// what a user would see: lifecycle, persistence across stop, pause, clean
// destroy, and the isolation limits enforced from inside.
package runtimetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Options configure the suite. Zero fields get defaults.
type Options struct {
	// Layers form the image, lowest first; default: BusyboxRootfs.
	Layers []string
	// AgentBinary is the paddock binary; default: built by AgentBinary.
	AgentBinary string
	// Resources of every sandbox; default: half a CPU, 128 MiB memory,
	// 64 MiB disk, 128 pids.
	Resources runtime.Resources
	// ReadyTimeout bounds the wait for an agent's /health; default 30s.
	ReadyTimeout time.Duration
	// SandboxWideLimits says memory and process limits bind the sandbox
	// as a whole, not its processes one by one (gVisor: the host cgroup
	// holds the sentry, which has no OOM killer of its own), so going
	// over a limit may end the whole sandbox, and the process limit is
	// not visible inside.
	SandboxWideLimits bool
	// Unisolated says the backend isolates nothing (a test double such as
	// processbackend: the agent runs on the host as the test's user). The
	// suite then builds no image, leaves out every check that needs a
	// sandbox of its own (hostname, root filesystem, users, limits: the
	// Isolation tests) and writes only in the agent's working directory.
	// Real backends never set it.
	Unisolated bool
	// TasksLimitInside says that, even so, the process limit is enforced
	// inside: forks past it fail (gVisor releases with an in-sandbox
	// cgroup v2 tree; not Debian's runsc).
	TasksLimitInside bool
	// UserNamespace says root in the sandbox is a user namespace's, mapped
	// to an unprivileged range of 65,536 host ids (runc and crun).
	UserNamespace bool
}

type suite struct {
	opts       Options
	newBackend func(t *testing.T) runtime.Backend
}

// Run runs the behaviour suite against the backends newBackend makes.
// newBackend is called once per subtest and must register its own cleanup.
func Run(t *testing.T, newBackend func(t *testing.T) runtime.Backend, opts Options) {
	if len(opts.Layers) == 0 && !opts.Unisolated {
		opts.Layers = []string{BusyboxRootfs(t)}
	}
	if opts.AgentBinary == "" {
		opts.AgentBinary = AgentBinary(t)
	}
	if opts.Resources == (runtime.Resources{}) {
		opts.Resources = runtime.Resources{CPUMillis: 500, MemoryBytes: 128 << 20, DiskBytes: 64 << 20, Pids: 128}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	s := &suite{opts: opts, newBackend: newBackend}
	t.Run("InvalidIDs", s.testInvalidIDs)
	t.Run("Absent", s.testAbsent)
	t.Run("Lifecycle", s.testLifecycle)
	t.Run("TwoAtOnce", s.testTwoAtOnce)
	t.Run("Checkpoint", s.testCheckpoint)
	if !opts.Unisolated {
		t.Run("Isolation", s.testIsolation)
	}
}

// NewID returns a fresh sandbox id no other run can collide with, so
// leak checks may search the whole host for it.
func NewID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "rt" + hex.EncodeToString(b)
}

func (s *suite) spec(id string) runtime.Spec {
	return runtime.Spec{
		ID:          id,
		Layers:      s.opts.Layers,
		AgentBinary: s.opts.AgentBinary,
		Env:         []string{"PADDOCK_TEST=1"},
		Resources:   s.opts.Resources,
	}
}

// start starts a sandbox, registers its destruction, and waits until its
// agent answers.
func (s *suite) start(ctx context.Context, t *testing.T, b runtime.Backend, spec runtime.Spec) runtime.Info {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Destroy(ctx, spec.ID); err != nil {
			t.Errorf("cleanup: destroy %s: %v", spec.ID, err)
		}
	})
	info, err := b.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%s): %v", spec.ID, err)
	}
	if info.AgentSocket == "" {
		t.Fatalf("Start(%s): no agent socket in %+v", spec.ID, info)
	}
	s.waitHealthy(ctx, t, info.AgentSocket)
	return info
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Scaled(d))
	t.Cleanup(cancel)
	return ctx
}

// maxTimeScale bounds $PADDOCK_TEST_TIME_SCALE.
const maxTimeScale = 20

// Scaled stretches a test's time budget by $PADDOCK_TEST_TIME_SCALE (a
// whole number from 1 to 20; unset, empty or invalid is 1), for hosts that
// run everything several times slower than a real machine, such as the
// emulated cgroup v2 VM (test/cgroupv2). Budgets only: no assertion on a
// duration is scaled. A test-only hook: no daemon reads it, so it is not
// part of config.Config.
func Scaled(d time.Duration) time.Duration {
	n, err := strconv.Atoi(os.Getenv("PADDOCK_TEST_TIME_SCALE"))
	if err != nil || n < 1 || n > maxTimeScale {
		return d
	}
	return d * time.Duration(n)
}

func (s *suite) testInvalidIDs(t *testing.T) {
	b := s.newBackend(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, id := range []string{"", "UPPER", "a/b", "../x", "a b", "with-dash", strings.Repeat("a", 33), "é", "a\x00"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			calls := map[string]error{
				"Start":   func() error { _, err := b.Start(ctx, s.spec(id)); return err }(),
				"Status":  func() error { _, err := b.Status(ctx, id); return err }(),
				"Info":    func() error { _, err := b.Info(ctx, id); return err }(),
				"Stop":    b.Stop(ctx, id),
				"Destroy": b.Destroy(ctx, id),
			}
			for name, err := range calls {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Errorf("%s(%q) = %v, want ErrInvalidArgument", name, id, err)
				}
			}
		})
	}
	t.Run("BadSizes", func(t *testing.T) {
		for _, res := range []runtime.Resources{
			{CPUMillis: -1, MemoryBytes: 128 << 20, DiskBytes: 64 << 20},
			{CPUMillis: 500, MemoryBytes: 0, DiskBytes: 64 << 20},
			{CPUMillis: 500, MemoryBytes: 128 << 20, DiskBytes: 1 << 62},
			{CPUMillis: 500, MemoryBytes: 128 << 20, DiskBytes: 64 << 20, Pids: -5},
		} {
			spec := s.spec(NewID(t))
			spec.Resources = res
			if _, err := b.Start(ctx, spec); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("Start with %+v = %v, want ErrInvalidArgument", res, err)
				_ = b.Destroy(ctx, spec.ID)
			}
		}
	})
}

func (s *suite) testAbsent(t *testing.T) {
	b := s.newBackend(t)
	ctx := ctxFor(t, 30*time.Second)
	id := NewID(t)
	_, err := b.Status(ctx, id)
	if !errors.Is(err, runtime.ErrNotFound) || !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Status of absent sandbox = %v, want runtime.ErrNotFound and errdefs.ErrNotFound", err)
	}
	if _, err := b.Info(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Info of absent sandbox = %v, want ErrNotFound", err)
	}
	if err := b.Stop(ctx, id); err != nil {
		t.Errorf("Stop of absent sandbox = %v, want nil", err)
	}
	if err := b.Destroy(ctx, id); err != nil {
		t.Errorf("Destroy of absent sandbox = %v, want nil", err)
	}
}

func wantStatus(ctx context.Context, t *testing.T, b runtime.Backend, id string, want runtime.Status) {
	t.Helper()
	got, err := b.Status(ctx, id)
	if err != nil || got != want {
		t.Fatalf("Status(%s) = %q, %v; want %q", id, got, err, want)
	}
}

func (s *suite) testLifecycle(t *testing.T) {
	b := s.newBackend(t)
	ctx := ctxFor(t, 3*time.Minute)
	id := NewID(t)
	spec := s.spec(id)

	info := s.start(ctx, t, b, spec)
	wantStatus(ctx, t, b, id, runtime.StatusRunning)
	if got, err := b.Info(ctx, id); err != nil || got.AgentSocket != info.AgentSocket {
		t.Errorf("Info = %+v, %v; want socket %s", got, err, info.AgentSocket)
	}
	if _, err := b.Start(ctx, spec); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second Start of a running sandbox = %v, want ErrConflict", err)
	}
	if ids, err := b.List(ctx); err != nil || !slices.Contains(ids, id) {
		t.Errorf("List = %v, %v; want it to contain %s", ids, err, id)
	}
	ex := newExecer(t, info.AgentSocket)
	// keep is the file that must survive Stop; without isolation only the
	// agent's working directory is the sandbox's own.
	keep, user := "/home/user/keep", "user"
	if s.opts.Unisolated {
		keep, user = "keep", ""
	} else {
		if out := ex.ok(ctx, t, "root", "hostname"); strings.TrimSpace(out) != id {
			t.Errorf("hostname = %q, want %q", out, id)
		}
		ex.ok(ctx, t, "root", "rm", "/etc/hostname")
	}
	ex.ok(ctx, t, user, "sh", "-c", "echo kept > "+keep)

	if err := b.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	wantStatus(ctx, t, b, id, runtime.StatusStopped)
	if err := b.Stop(ctx, id); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if ids, err := b.List(ctx); err != nil || !slices.Contains(ids, id) {
		t.Errorf("List after Stop = %v, %v; want it to contain %s", ids, err, id)
	}
	if le, ok := b.(runtime.LayerExporter); ok {
		checkLayer(ctx, t, le, id)
	}

	info = s.start(ctx, t, b, spec)
	wantStatus(ctx, t, b, id, runtime.StatusRunning)
	ex = newExecer(t, info.AgentSocket)
	if out := ex.ok(ctx, t, user, "cat", keep); strings.TrimSpace(out) != "kept" {
		t.Errorf("file written before Stop reads %q after Start, want %q", out, "kept")
	}

	if p, ok := b.(runtime.Pauser); ok {
		if err := p.Pause(ctx, id); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		wantStatus(ctx, t, b, id, runtime.StatusPaused)
		if err := p.Resume(ctx, id); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		wantStatus(ctx, t, b, id, runtime.StatusRunning)
		s.waitHealthy(ctx, t, info.AgentSocket)
	}

	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	CheckGone(ctx, t, b, id)
	if err := b.Destroy(ctx, id); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

// CheckGone verifies nothing of a destroyed sandbox is left on the host:
// no status, no List entry, no mount and no cgroup naming it.
func CheckGone(ctx context.Context, t *testing.T, b runtime.Backend, id string) {
	t.Helper()
	if _, err := b.Status(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status after Destroy = %v, want ErrNotFound", err)
	}
	if ids, err := b.List(ctx); err != nil || slices.Contains(ids, id) {
		t.Errorf("List after Destroy = %v, %v; want no %s", ids, err, id)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, field := range strings.Fields(sc.Text()) {
			if slices.Contains(strings.Split(field, "/"), id) {
				t.Errorf("mount left after Destroy: %s", sc.Text())
				break
			}
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*/*/" + id, "/sys/fs/cgroup/*/" + id, "/sys/fs/cgroup/*/*/*/" + id} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			t.Errorf("cgroup left after Destroy: %v", m)
		}
	}
}

func (s *suite) testTwoAtOnce(t *testing.T) {
	b := s.newBackend(t)
	ctx := ctxFor(t, 2*time.Minute)
	ids := []string{NewID(t), NewID(t)}
	infos := make([]runtime.Info, len(ids))
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := b.Destroy(ctx, id); err != nil {
				t.Errorf("cleanup: destroy %s: %v", id, err)
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = b.Start(ctx, s.spec(id))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Start(%s): %v", ids[i], err)
		}
	}
	if infos[0].AgentSocket == infos[1].AgentSocket {
		t.Fatalf("two sandboxes share the agent socket %s", infos[0].AgentSocket)
	}
	answers := map[string]bool{}
	for i, info := range infos {
		s.waitHealthy(ctx, t, info.AgentSocket)
		ex := newExecer(t, info.AgentSocket)
		if s.opts.Unisolated {
			// No hostname of its own: each answers from its own directory.
			answers[strings.TrimSpace(ex.ok(ctx, t, "", "pwd"))] = true
		} else if out := ex.ok(ctx, t, "root", "hostname"); strings.TrimSpace(out) != ids[i] {
			t.Errorf("sandbox %s answers as %q", ids[i], out)
		}
	}
	if s.opts.Unisolated && len(answers) != len(ids) {
		t.Errorf("two sandboxes answered from the same directory: %v", answers)
	}
	// Destroying one leaves the other running.
	if err := b.Destroy(ctx, ids[0]); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	CheckGone(ctx, t, b, ids[0])
	wantStatus(ctx, t, b, ids[1], runtime.StatusRunning)
	s.waitHealthy(ctx, t, infos[1].AgentSocket)

	// SIGKILL to init ends the sandbox's container.
	if err := b.Signal(ctx, ids[1], syscall.SIGKILL); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := b.Status(ctx, ids[1])
		if err == nil && st == runtime.StatusStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status after SIGKILL = %s, %v; want stopped", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHealthy polls the agent's GET /health until it answers 2xx.
func (s *suite) waitHealthy(ctx context.Context, t *testing.T, socket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
	defer cancel()
	hc := unixHTTPClient(socket)
	defer hc.CloseIdleConnections()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("agent at %s not healthy within %v: %v", socket, s.opts.ReadyTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func unixHTTPClient(socket string) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
}
