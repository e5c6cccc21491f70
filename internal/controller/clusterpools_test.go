package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
	"github.com/paddock-dev/paddock/internal/store"
)

// poolingBackend is a processbackend that says it keeps warm pools
// itself (runtime.WarmPooler), as the kubernetes backend does, and
// records what the controller asks of it. Its pools hold nothing real:
// ready is what it reports, and a start "from a pool" is a plain start.
type poolingBackend struct {
	*processbackend.Backend
	mu      sync.Mutex
	sizes   map[string]int
	specs   map[string]runtime.Spec
	ready   int
	starts  []runtime.Spec
	deleted []string
	// gate, when set, holds starts whose spec carries GATE=1 until it is
	// closed.
	gate chan struct{}
}

func (p *poolingBackend) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	p.mu.Lock()
	p.starts = append(p.starts, spec)
	p.mu.Unlock()
	if p.gate != nil && slices.Contains(spec.Env, "GATE=1") {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return runtime.Info{}, ctx.Err()
		}
	}
	return p.Backend.Start(ctx, spec)
}

func (p *poolingBackend) SetWarmPool(_ context.Context, name string, spec runtime.Spec, replicas int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sizes[name], p.specs[name] = replicas, spec
	return nil
}

func (p *poolingBackend) WarmPoolReady(_ context.Context, name string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.sizes[name]; !ok {
		return 0, nil
	}
	return p.ready, nil
}

func (p *poolingBackend) DeleteWarmPool(_ context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.sizes[name]; ok {
		p.deleted = append(p.deleted, name)
	}
	delete(p.sizes, name)
	return nil
}

func (p *poolingBackend) WarmPools(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.sizes {
		out = append(out, n)
	}
	return out, nil
}

func (p *poolingBackend) size(name string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.sizes[name]
	return n, ok
}

func (p *poolingBackend) lastStart() runtime.Spec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts[len(p.starts)-1]
}

// TestPoolOnAWarmPoolingBackend: on a backend that keeps warm pools, the
// pool loop sizes the backend's pool instead of starting sandboxes; a
// create from the pool takes from it when it has one ready (its first
// start names the pool) and is cold otherwise; a template with a start
// command keeps Paddock's own pool; pools the store no longer has are
// removed from the backend, and a deleted pool goes from it at once.
func TestPoolOnAWarmPoolingBackend(t *testing.T) {
	var pb *poolingBackend
	env := controllertest.New(t, controllertest.Options{Wrap: func(b *processbackend.Backend) runtime.Backend {
		pb = &poolingBackend{Backend: b, sizes: map[string]int{}, specs: map[string]runtime.Spec{}}
		return pb
	}})
	c := env.Controller
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	img := env.Images[controllertest.Image]
	for _, tpl := range []*store.Template{
		{Name: "plain", Image: img.Name, ImageDigest: img.Digest, BuildID: "b1", Spec: api.TemplateSpec{Env: map[string]string{"FROM": "template"}}},
		{Name: "served", Image: img.Name, ImageDigest: img.Digest, BuildID: "b2", Spec: api.TemplateSpec{Start: []string{"sleep", "600"}, Cwd: "/tmp",
			Ready: &api.Readiness{Log: "up", Timeout: "7s"}}},
		{Name: "layered", Image: img.Name, ImageDigest: img.Digest, BuildID: "b3", Layers: []string{"sha256:" + strings.Repeat("a", 64)}},
	} {
		if err := env.Store.PutTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
	}
	pb.mu.Lock()
	pb.sizes["left-behind"] = 1 // a pool a previous daemon kept there
	pb.mu.Unlock()
	if _, err := env.Pools.Set(ctx, "wp", api.SetPoolRequest{Template: "plain", MinReady: 3, Resources: api.Resources{CPU: 0.5, MemoryMB: 256}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pools.Set(ctx, "started", api.SetPoolRequest{Template: "served", MinReady: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pools.Set(ctx, "own", api.SetPoolRequest{Template: "layered", MinReady: 0}); err != nil {
		t.Fatal(err)
	}
	go env.Pools.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, ok := pb.size("wp")
		_, stale := pb.size("left-behind")
		if ok && n == 3 && !stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend's pools: %v", pb.sizes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := pb.size("own"); ok {
		t.Error("a template with build layers went to the backend's pool")
	}
	// A start command goes with the pool, for its agents to run at boot.
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, ok := pb.size("started"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a template with a start command did not go to the backend's pool")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pb.mu.Lock()
	st, plain := pb.specs["started"].Start, pb.specs["wp"].Start
	pb.mu.Unlock()
	if st == nil || !slices.Equal(st.Cmd, []string{"sleep", "600"}) || st.Cwd != "/tmp" || st.User != "user" || st.ReadyLog != "up" || st.ReadyTimeoutMs != 7000 {
		t.Errorf("the backend's pool's start command: %+v", st)
	}
	if plain != nil {
		t.Errorf("a template without a start command gave its pool one: %+v", plain)
	}
	pb.mu.Lock()
	spec := pb.specs["wp"]
	pb.mu.Unlock()
	if spec.Image.Digest != img.Digest || !slices.Contains(spec.Env, "FROM=template") || spec.Resources.CPUMillis != 500 || spec.Resources.MemoryBytes != 256<<20 {
		t.Errorf("the backend's pool keeps %+v", spec)
	}
	if sbs, err := c.List(ctx, nil); err != nil || len(sbs) != 0 {
		t.Fatalf("the controller started sandboxes of its own for the pool: %v, %v", sbs, err)
	}

	// None ready on the backend: a create from the pool is a cold one.
	cold, err := c.Create(ctx, api.CreateSandboxRequest{Pool: "wp"})
	if err != nil {
		t.Fatal(err)
	}
	if s := pb.lastStart(); s.WarmPool != "" || s.ID != cold.ID {
		t.Errorf("a create with the backend's pool empty started %+v", s)
	}
	if cold.Labels["paddock.dev/cluster-pool"] != "" || cold.Labels["paddock.dev/pool"] != "wp" {
		t.Errorf("cold create's labels: %v", cold.Labels)
	}

	// Two ready: the create takes from the backend's pool.
	pb.mu.Lock()
	pb.ready = 2
	pb.mu.Unlock()
	warm, err := c.Create(ctx, api.CreateSandboxRequest{Pool: "wp", Name: "from-pool", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := pb.lastStart(); s.WarmPool != "wp" || s.ID != warm.ID {
		t.Errorf("a create from the backend's pool started %+v", s)
	}
	if warm.Labels["paddock.dev/cluster-pool"] != "wp" || warm.Labels["team"] != "a" || warm.Name != "from-pool" || warm.State != api.StateRunning ||
		warm.Resources.CPU != 0.5 || warm.Resources.MemoryMB != 256 {
		t.Errorf("sandbox from the backend's pool: %+v", warm)
	}
	if out, code := execOut(ctx, t, c, warm.ID, "sh", "-c", "echo $FROM"); code != 0 || out != "template\n" {
		t.Errorf("exec in the pooled sandbox: %q, exit %d", out, code)
	}
	p, err := env.Pools.Get(ctx, "wp")
	if err != nil || p.Ready != 2 || p.Served != 1 {
		t.Errorf("GetPool = %+v, %v; want 2 ready (the backend's) and 1 served", p, err)
	}
	// A later start names the pool again; the backend takes from it only
	// for a sandbox it has not got (runtime.Spec.WarmPool).
	if _, err := c.Stop(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSandbox(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	if s := pb.lastStart(); s.ID != warm.ID || s.WarmPool != "wp" {
		t.Errorf("restart spec %+v", s)
	}

	// A caller may not claim the label for itself.
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Labels: map[string]string{"paddock.dev/cluster-pool": "wp"}}); err == nil {
		t.Error("a create set the reserved label paddock.dev/cluster-pool")
	}

	if err := env.Pools.Delete(ctx, "wp"); err != nil {
		t.Fatal(err)
	}
	pb.mu.Lock()
	deleted := slices.Clone(pb.deleted)
	pb.mu.Unlock()
	if !slices.Contains(deleted, "wp") || !slices.Contains(deleted, "left-behind") {
		t.Errorf("pools deleted from the backend: %v", deleted)
	}
	if got, err := c.Get(ctx, warm.ID); err != nil || got.State != api.StateRunning {
		t.Errorf("the served sandbox after the pool's deletion: %+v, %v", got, err)
	}
}

// TestClusterPoolClaimTakesNoCreateSlot: a create served by the cluster's
// pool starts nothing on this host, so, like a claim from Paddock's own
// pool, it does not wait for the caller's create slots: with the one slot
// held by a cold create that waits for its start, a claim goes ahead.
func TestClusterPoolClaimTakesNoCreateSlot(t *testing.T) {
	var pb *poolingBackend
	gate := make(chan struct{})
	env := controllertest.New(t, controllertest.Options{
		Config: func(c *config.Config) { c.CreatesPerCaller = 1 },
		Wrap: func(b *processbackend.Backend) runtime.Backend {
			pb = &poolingBackend{Backend: b, sizes: map[string]int{}, specs: map[string]runtime.Spec{}, gate: gate, ready: 1}
			return pb
		},
	})
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(gate)
		}
	}
	t.Cleanup(open)
	c := env.Controller
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	env.PutTemplate(ctx, t, "plain", "b1")
	if _, err := env.Pools.Set(ctx, "wp", api.SetPoolRequest{Template: "plain", MinReady: 1}); err != nil {
		t.Fatal(err)
	}
	pb.mu.Lock()
	pb.sizes["wp"] = 1 // as the pool loop would set it
	pb.mu.Unlock()

	coldDone := make(chan error, 1)
	go func() {
		_, err := c.Create(ctx, api.CreateSandboxRequest{Image: controllertest.Image, Env: map[string]string{"GATE": "1"}})
		coldDone <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pb.mu.Lock()
		n := len(pb.starts)
		pb.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cold create never reached the runtime")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
	defer ccancel()
	warm, err := c.Create(cctx, api.CreateSandboxRequest{Pool: "wp"})
	if err != nil {
		t.Fatalf("a claim from the cluster's pool while the caller's one create slot is held: %v", err)
	}
	if warm.Labels["paddock.dev/cluster-pool"] != "wp" {
		t.Fatalf("the create was not served by the cluster's pool: %v", warm.Labels)
	}
	select {
	case err := <-coldDone:
		t.Fatalf("the cold create ended before its start was let go: %v", err)
	default:
	}
	open()
	if err := <-coldDone; err != nil {
		t.Fatalf("the cold create: %v", err)
	}
}

// TestClusterPoolGrowsWithDemand: a pool kept by the backend grows as
// Paddock's own pools do: a burst of creates that found it short sets the
// backend's pool to the burst's size (up to max_ready), which it keeps
// while the burst is remembered, then it goes back to min_ready.
func TestClusterPoolGrowsWithDemand(t *testing.T) {
	var pb *poolingBackend
	var skew atomic.Int64
	env := controllertest.New(t, controllertest.Options{
		Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
		Wrap: func(b *processbackend.Backend) runtime.Backend {
			pb = &poolingBackend{Backend: b, sizes: map[string]int{}, specs: map[string]runtime.Spec{}}
			return pb
		},
	})
	c := env.Controller
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	env.PutTemplate(ctx, t, "plain", "b1")
	if _, err := env.Pools.Set(ctx, "grow", api.SetPoolRequest{Template: "plain", MinReady: 1, MaxReady: 3}); err != nil {
		t.Fatal(err)
	}
	go env.Pools.Run(ctx)
	waitSize := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if n, ok := pb.size("grow"); ok && n == want {
				return
			}
			if time.Now().After(deadline) {
				n, _ := pb.size("grow")
				t.Fatalf("the backend's pool has size %d, want %d", n, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSize(1)
	// Five creates in a burst, none ready on the backend: all cold, and
	// the pool grows to max_ready (3), not 5.
	for range 5 {
		sb, err := c.Create(ctx, api.CreateSandboxRequest{Pool: "grow"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.WithoutCancel(ctx), sb.ID) })
	}
	waitSize(3)
	if p, err := env.Pools.Get(ctx, "grow"); err != nil || p.Target != 3 {
		t.Fatalf("GetPool = %+v, %v; want target 3", p, err)
	}
	// Past the burst's memory, back to min_ready.
	skew.Store(int64(11 * time.Minute))
	waitSize(1)
}
