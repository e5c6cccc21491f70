package adversarial

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// soakScale is how hard the soak pushes: PADDOCK_SOAK="sandboxes,execs,kills".
// The default fits CI's time; `make soak` runs 100,10000,100 and records
// the figures.
func soakScale(t *testing.T) (sandboxes, execs, kills int) {
	sandboxes, execs, kills = 100, 10000, 25
	if v := os.Getenv("PADDOCK_SOAK"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d,%d", &sandboxes, &execs, &kills); err != nil || sandboxes < 1 || kills < 1 || execs < kills {
			t.Fatalf("PADDOCK_SOAK=%q: want sandboxes,execs,kills", v)
		}
	}
	return
}

// soakFigures are what the soak measured.
type soakFigures struct {
	execsOK, execsFailed atomic.Int64
	createsOK            atomic.Int64
	restarts             []time.Duration
	execLatency          []time.Duration
	mu                   sync.Mutex
}

func (f *soakFigures) addExec(d time.Duration) {
	f.mu.Lock()
	f.execLatency = append(f.execLatency, d)
	f.mu.Unlock()
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestSoak keeps many sandboxes busy with commands and kills the daemon
// with SIGKILL at random points, over and over. After every restart no
// sandbox may be lost, every command the daemon acknowledged must have
// left its mark, and no container, mount, cgroup or network namespace may
// be left for a sandbox that does not exist.
func TestSoak(t *testing.T) {
	testdaemon.RequireHost(t, false)
	nSandboxes, nExecs, nKills := soakScale(t)
	d := testdaemon.Start(t, testdaemon.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	var fig soakFigures

	// The sandboxes, every tenth with a network of its own.
	ids := make([]string, nSandboxes)
	egress := map[string]bool{}
	var createErr atomic.Value
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// Small disks: admission counts every sandbox's disk
				// against the host's free space.
				req := api.CreateSandboxRequest{Image: "busybox", KeepAlive: true, Resources: api.Resources{DiskMB: 64}}
				if i%10 == 0 {
					req.Network = &api.NetworkPolicy{Mode: "egress"}
				}
				sb, err := d.Client.Create(ctx, req)
				if err != nil {
					createErr.Store(err)
					continue
				}
				ids[i] = sb.ID
			}
		}()
	}
	start := time.Now()
	for i := range nSandboxes {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := createErr.Load().(error); err != nil {
		t.Fatalf("creating the sandboxes: %v", err)
	}
	for i, id := range ids {
		if i%10 == 0 {
			egress[id] = true
		}
	}
	t.Logf("%d sandboxes created in %v", nSandboxes, time.Since(start).Round(time.Millisecond))

	acked := make([]atomic.Int64, nSandboxes) // the last line each sandbox acknowledged
	next := make([]atomic.Int64, nSandboxes)
	locks := make([]sync.Mutex, nSandboxes) // one command per sandbox at a time: lines stay in order
	gone := map[string]bool{}               // ids of sandboxes the churn created and destroyed
	perRound := nExecs / nKills
	for round := range nKills {
		rctx, stop := context.WithCancel(ctx)
		var done, working atomic.Int64
		var rwg sync.WaitGroup
		for range 4 {
			rwg.Add(1)
			working.Add(1)
			go func() {
				defer rwg.Done()
				defer working.Add(-1)
				for rctx.Err() == nil && done.Load() < int64(perRound) {
					i := rand.IntN(nSandboxes)
					if !locks[i].TryLock() {
						continue
					}
					n := next[i].Add(1)
					t0 := time.Now()
					res, err := d.Client.Exec(rctx, ids[i], paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo " + strconv.FormatInt(n, 10) + " >> /home/user/log"}})
					if err == nil && res.ExitCode == 0 {
						acked[i].Store(n)
						fig.execsOK.Add(1)
						done.Add(1)
						fig.addExec(time.Since(t0))
					} else {
						// Cut by the kill: this worker's round is over.
						fig.execsFailed.Add(1)
						locks[i].Unlock()
						return
					}
					locks[i].Unlock()
				}
			}()
		}
		// Churn: sandboxes made and destroyed, so kills land mid-create
		// and mid-delete too.
		type churned struct {
			id      string
			deleted bool // the daemon acknowledged its delete
		}
		var churn []churned
		var churnMu sync.Mutex
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for rctx.Err() == nil && done.Load() < int64(perRound) {
				sb, err := d.Client.Create(rctx, api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{DiskMB: 64}})
				if err != nil {
					continue
				}
				fig.createsOK.Add(1)
				err = d.Client.Delete(rctx, sb.ID)
				churnMu.Lock()
				churn = append(churn, churned{sb.ID, err == nil})
				churnMu.Unlock()
			}
		}()
		// The kill lands at a random point of the round's work.
		killAt := rand.IntN(perRound)
		for done.Load() < int64(killAt) && working.Load() > 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		d.Kill9()
		stop()
		rwg.Wait()
		t0 := time.Now()
		d.Restart()
		fig.restarts = append(fig.restarts, time.Since(t0))
		if testing.Verbose() && time.Since(t0) > 10*time.Second {
			t.Logf("round %d: slow restart; daemon log:\n%s", round, d.Logs())
		}

		// Churned sandboxes either still exist or are gone entirely.
		list, err := d.Client.List(ctx, nil)
		if err != nil {
			t.Fatalf("round %d: list: %v", round, err)
		}
		live := map[string]api.Sandbox{}
		for _, s := range list {
			live[s.ID] = s
		}
		for _, c := range churn {
			_, ok := live[c.id]
			// A delete cut by the kill may or may not have happened;
			// one the daemon acknowledged must have.
			if ok && c.deleted {
				t.Errorf("round %d: sandbox %s is back after its delete was acknowledged", round, c.id)
			}
			if ok {
				_ = d.Client.Delete(ctx, c.id) // the kill came before its delete
				delete(live, c.id)
			}
			gone[c.id] = true
		}
		// Finish the work of this round, then check.
		for int(done.Load()) < perRound {
			i := rand.IntN(nSandboxes)
			n := next[i].Add(1)
			res, err := d.Client.Exec(ctx, ids[i], paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo " + strconv.FormatInt(n, 10) + " >> /home/user/log"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("round %d: exec after the restart in %s: %+v, %v\n%s", round, ids[i], res, err, d.Logs())
			}
			acked[i].Store(n)
			fig.execsOK.Add(1)
			done.Add(1)
		}
		checkSoak(ctx, t, d, round, ids, live, egress, gone, acked)
		t.Logf("round %d: killed after %d of %d commands, ready again in %v, checked", round, killAt, perRound, fig.restarts[len(fig.restarts)-1].Round(time.Millisecond))
		if t.Failed() {
			return
		}
	}
	lat := fig.execLatency
	t.Logf("soak: %d sandboxes, %d execs acknowledged (%d cut by a kill), %d kills; churn %d creates; restart to ready p50 %v max %v; exec p50 %v p99 %v",
		nSandboxes, fig.execsOK.Load(), fig.execsFailed.Load(), nKills, fig.createsOK.Load(),
		percentile(fig.restarts, 0.5).Round(time.Millisecond), percentile(fig.restarts, 1).Round(time.Millisecond),
		percentile(lat, 0.5).Round(time.Microsecond), percentile(lat, 0.99).Round(time.Microsecond))
	if out := os.Getenv("PADDOCK_SOAK_OUT"); out != "" {
		host, _ := os.Hostname()
		rec := fmt.Sprintf("host=%s cores=%d sandboxes=%d execs_ok=%d execs_cut=%d kills=%d churn_creates=%d restart_p50_ms=%d restart_max_ms=%d exec_p50_us=%d exec_p99_us=%d lost_sandboxes=0 leftovers=0\n",
			host, numCPU(), nSandboxes, fig.execsOK.Load(), fig.execsFailed.Load(), nKills, fig.createsOK.Load(),
			percentile(fig.restarts, 0.5).Milliseconds(), percentile(fig.restarts, 1).Milliseconds(),
			percentile(lat, 0.5).Microseconds(), percentile(lat, 0.99).Microseconds())
		if err := os.WriteFile(out, []byte(rec), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return bytes.Count(b, []byte("\nprocessor")) + 1
}

// checkSoak is the check after one restart.
func checkSoak(ctx context.Context, t *testing.T, d *testdaemon.Daemon, round int, ids []string, live map[string]api.Sandbox, egress, gone map[string]bool, acked []atomic.Int64) {
	t.Helper()
	for i, id := range ids {
		s, ok := live[id]
		if !ok {
			t.Errorf("round %d: sandbox %s was lost", round, id)
			continue
		}
		if s.State != api.StateRunning {
			t.Errorf("round %d: sandbox %s is %s (%s), want running", round, id, s.State, s.ErrorReason)
			continue
		}
		// Every acknowledged line is there, in order, with nothing after
		// it but lines of commands cut by the kill.
		var buf bytes.Buffer
		if err := d.Client.ReadFile(ctx, id, "/home/user/log", &buf); err != nil && acked[i].Load() > 0 {
			t.Errorf("round %d: reading %s's log: %v", round, id, err)
			continue
		}
		lines := strings.Fields(buf.String())
		want := strconv.FormatInt(acked[i].Load(), 10)
		if acked[i].Load() > 0 && !slices.Contains(lines, want) {
			t.Errorf("round %d: %s acknowledged line %s, its log has %d lines ending %q", round, id, want, len(lines), lines[max(0, len(lines)-3):])
		}
		if egress[id] {
			var out bytes.Buffer
			res, err := d.Client.Exec(ctx, id, paddock.ExecOptions{Cmd: []string{"ls", "/sys/class/net"}, Stdout: &out})
			if err != nil || res.ExitCode != 0 || len(strings.Fields(out.String())) < 2 {
				t.Errorf("round %d: egress sandbox %s has interfaces %q (%v): its network is gone", round, id, out.String(), err)
			}
		}
	}
	// What the daemon made for sandboxes that no longer exist is gone.
	for _, left := range leftoversOf(d.StateDir, live, gone) {
		t.Errorf("round %d: left behind: %s", round, left)
	}
}

// leftoversOf lists containers, mounts, cgroups and network namespaces of
// the daemon that belong to no live sandbox.
func leftoversOf(state string, live map[string]api.Sandbox, gone map[string]bool) []string {
	var left []string
	root := filepath.Join(state, "runtime", "runc", "state")
	if out, err := exec.Command("runc", "--root", root, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			if _, ok := live[id]; !ok {
				left = append(left, "runc container "+id)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		prefix := filepath.Join(state, "runtime", "runc", "sandboxes") + "/"
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || !strings.HasPrefix(f[4], prefix) {
				continue
			}
			id, _, _ := strings.Cut(strings.TrimPrefix(f[4], prefix), "/")
			if _, ok := live[id]; !ok {
				left = append(left, "mount "+f[4])
			}
		}
	}
	netns, _ := os.ReadDir("/run/netns")
	for id := range gone {
		for _, c := range []string{"memory", "pids", "cpu", "freezer"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "paddock", id)); err == nil {
				left = append(left, c+" cgroup of "+id)
			}
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/paddock", id)); err == nil {
			left = append(left, "cgroup of "+id)
		}
		for _, n := range netns {
			if strings.HasSuffix(n.Name(), id) {
				left = append(left, "netns "+n.Name())
			}
		}
	}
	return left
}
