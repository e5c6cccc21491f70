package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// hostLayout says how this host mounts cgroups, read independently of the
// daemon's own probe.
func hostLayout(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "unified"
	}
	if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
		return "hybrid"
	}
	return "legacy"
}

// TestInfoRuntimesSizesLimits: `paddock info` lists every runtime with a
// verdict that matches this host, the presets and the host's limits.
func TestInfoRuntimesSizesLimits(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	var in api.Info
	if err := json.Unmarshal([]byte(d.must("info", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.CgroupLayout != hostLayout(t) {
		t.Errorf("cgroup_layout = %q, host is %q", in.CgroupLayout, hostLayout(t))
	}
	byName := map[string]api.RuntimeInfo{}
	for _, r := range in.Runtimes {
		byName[r.Name] = r
	}
	if r := byName["runc"]; !r.Available || !r.Default || !strings.HasPrefix(r.Version, "runc version") {
		t.Errorf("runc: %+v", r)
	}
	_, runscErr := exec.LookPath(runscBin())
	if r := byName["gvisor"]; r.Available != (runscErr == nil) {
		t.Errorf("gvisor: %+v, runsc installed: %v", r, runscErr == nil)
	}
	// Which runsc is in use is shown: the pinned build names its version.
	if r := byName["gvisor"]; r.Available && r.Path != runscBin() {
		t.Errorf("gvisor runs %s, want %s", r.Path, runscBin())
	} else if filepath.Base(r.Path) == config.PinnedRunscName() &&
		(!strings.Contains(r.Version, config.PinnedRunscVersion()) || !strings.HasPrefix(r.Note, "pinned build")) {
		t.Errorf("gvisor: the pinned build's version and note are not shown: %+v", r)
	}
	cr, ok := byName["crun"]
	switch _, err := exec.LookPath("crun"); {
	case !ok:
		t.Error("crun is not listed")
	case err != nil:
		if cr.Available || !strings.Contains(cr.Reason, "not installed") {
			t.Errorf("crun without the binary: %+v", cr)
		}
	case hostLayout(t) != "unified":
		// crun 1.8 refuses hybrid and v1 layouts; the daemon must say so
		// and keep serving.
		if cr.Available || !strings.Contains(cr.Reason, "cgroup") || cr.Version == "" {
			t.Errorf("crun on a %s cgroup host: %+v", hostLayout(t), cr)
		}
		out, errOut, code := d.run("create", "--image", "busybox", "--runtime", "crun")
		if code == 0 || !strings.Contains(errOut, "not available") {
			t.Errorf("create on crun here: exit %d, %s%s", code, out, errOut)
		}
	default:
		if !cr.Available {
			t.Errorf("crun on a unified host: %+v", cr)
		}
	}
	if in.Limits.CPU != float64(goruntime.NumCPU()) {
		t.Errorf("limits.cpu = %g, host has %d", in.Limits.CPU, goruntime.NumCPU())
	}
	if len(in.Sizes) != 6 || in.Sizes[0].Name != "lite" || in.Sizes[5].Name != "standard-4" {
		t.Fatalf("sizes: %+v", in.Sizes)
	}
	for _, s := range in.Sizes {
		fits := s.Resources.CPU <= in.Limits.CPU && s.Resources.MemoryMB <= in.Limits.MemoryMB
		if s.Fits != fits {
			t.Errorf("%s: fits=%v, want %v (%s)", s.Name, s.Fits, fits, s.Reason)
		}
	}
	text := d.must("info")
	for _, want := range []string{"RUNTIME", "crun", "standard-4", "Host limits:"} {
		if !strings.Contains(text, want) {
			t.Errorf("paddock info lacks %q:\n%s", want, text)
		}
	}
}

// cgroupValue reads a sandbox's cgroup file, v2 or v1.
func cgroupValue(t *testing.T, id, v2file, v1ctrl, v1file string) string {
	t.Helper()
	p := filepath.Join("/sys/fs/cgroup/paddock", id, v2file)
	if hostLayout(t) != "unified" {
		p = filepath.Join("/sys/fs/cgroup", v1ctrl, "paddock", id, v1file)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read cgroup: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestSizePresetsEnforced: a preset reaches inspect and the cgroup files;
// explicit fields override it; beyond the host it is refused with numbers.
func TestSizePresetsEnforced(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	var sb api.Sandbox
	out := d.must("create", "--image", "busybox", "--size", "lite", "--pids", "100", "--json")
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		t.Fatal(err)
	}
	want := api.Resources{CPU: 0.0625, MemoryMB: 256, DiskMB: 2048, Pids: 100}
	if sb.Resources != want || sb.CreatedBy != api.CallerLocal {
		t.Fatalf("resources %+v created_by %q, want %+v local", sb.Resources, sb.CreatedBy, want)
	}
	if text := d.must("inspect", sb.ID); !strings.Contains(text, "cpu=0.0625 memory=256MiB disk=2048MiB pids=100") {
		t.Errorf("inspect:\n%s", text)
	}
	if hostLayout(t) == "unified" {
		if got := cgroupValue(t, sb.ID, "memory.max", "", ""); got != strconv.Itoa(256<<20) {
			t.Errorf("memory.max = %s", got)
		}
		if got := cgroupValue(t, sb.ID, "cpu.max", "", ""); got != "6200 100000" {
			t.Errorf("cpu.max = %s", got)
		}
	} else {
		if got := cgroupValue(t, sb.ID, "", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(256<<20) {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err == nil {
			if got := cgroupValue(t, sb.ID, "", "memory", "memory.memsw.limit_in_bytes"); got != strconv.Itoa(256<<20) {
				t.Errorf("memsw (no swap) = %s", got)
			}
		}
		if got := cgroupValue(t, sb.ID, "", "cpu", "cpu.cfs_quota_us"); got != "6200" {
			t.Errorf("cpu.cfs_quota_us = %s", got)
		}
	}
	if got := cgroupValue(t, sb.ID, "pids.max", "pids", "pids.max"); got != "100" {
		t.Errorf("pids.max = %s", got)
	}
	// The writable layer is capped at the preset's disk.
	df := d.must("exec", sb.ID, "--", "df", "-m", "/")
	if f := strings.Fields(strings.Split(strings.TrimSpace(df), "\n")[1]); len(f) < 2 {
		t.Fatalf("df: %s", df)
	} else if total, _ := strconv.Atoi(f[1]); total < 1500 || total > 2048 {
		t.Errorf("root filesystem is %d MiB, want about 2048:\n%s", total, df)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown preset", []string{"--size", "huge"}, `size "huge" is not a preset`},
		{"custom above the host", []string{"--cpu", strconv.Itoa(goruntime.NumCPU() + 1)},
			fmt.Sprintf("%d vCPUs requested, this host allows %d", goruntime.NumCPU()+1, goruntime.NumCPU())},
	}
	if goruntime.NumCPU() < 4 {
		tests = append(tests, struct {
			name string
			args []string
			want string
		}{"standard-4 on a small host", []string{"--size", "standard-4"},
			fmt.Sprintf("size standard-4: 4 vCPUs requested, this host allows %d", goruntime.NumCPU())})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := d.run(append([]string{"create", "--image", "busybox"}, tt.args...)...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stdout %s stderr %s; want a refusal with %q", code, out, errOut, tt.want)
			}
		})
	}
}

// TestSizePresetOnGVisor: presets apply to gVisor sandboxes too.
func TestSizePresetOnGVisor(t *testing.T) {
	requireHost(t)
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb, err := d.client.Create(ctxT(t, 2*time.Minute), api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, Size: api.SizeBasic})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Resources != (api.Resources{CPU: 0.25, MemoryMB: 1024, DiskMB: 4096, Pids: 512}) {
		t.Fatalf("resources %+v", sb.Resources)
	}
	// gVisor's sentry reports the memory limit as the sandbox's total memory.
	out := d.must("exec", sb.ID, "--", "cat", "/proc/meminfo")
	if !strings.Contains(out, "MemTotal:") {
		t.Fatalf("meminfo: %s", out)
	}
	kb, _ := strconv.Atoi(strings.Fields(strings.SplitN(out, "\n", 2)[0])[1])
	if kb > 1024*1024 {
		t.Errorf("MemTotal %d kB inside gVisor, want at most 1 GiB", kb)
	}
}

// TestAdmissionPolicyRules: every rule refuses with permission_denied
// naming it; the policy survives a restart; only the socket may change it.
func TestAdmissionPolicyRules(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	pol := filepath.Join(d.stateDir, "in.json")
	if err := os.WriteFile(pol, []byte(`{"allowed_images":["busybox"],"allowed_runtimes":["runc"],"max_size":"basic","max_lifetime":"1h","allow_network":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d.must("policy", "set", pol)
	tests := []struct {
		name string
		args []string
		rule string
	}{
		{"image not allowed", []string{"--image", "base"}, "allowed_images"},
		{"runtime not allowed", []string{"--image", "busybox", "--runtime", "gvisor"}, "allowed_runtimes"},
		{"size above max_size", []string{"--image", "busybox", "--size", "standard-1"}, "max_size basic"},
		{"field above max_size", []string{"--image", "busybox", "--size", "lite", "--memory", "2G"}, "max_size basic"},
		{"lifetime above max_lifetime", []string{"--image", "busybox", "--size", "lite", "--timeout", "2h"}, "max_lifetime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := d.run(append([]string{"create"}, tt.args...)...)
			if code == 0 || !strings.Contains(errOut, "rule "+tt.rule) || !strings.Contains(errOut, "permission") {
				t.Fatalf("exit %d, stdout %s stderr %s; want permission denied by %s", code, out, errOut, tt.rule)
			}
		})
	}
	// The SDK sees the stable code.
	_, err := d.client.Create(ctxT(t, time.Minute), api.CreateSandboxRequest{Image: "base"})
	if !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Fatalf("SDK create of a refused image: %v", err)
	}
	// Within the policy: admitted, and given max_lifetime as its timeout.
	sb, err := d.client.Create(ctxT(t, time.Minute), api.CreateSandboxRequest{Image: "busybox", Size: api.SizeLite})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Timeout != "1h0m0s" || sb.ExpiresAt == nil {
		t.Errorf("timeout %q expires %v, want max_lifetime 1h", sb.Timeout, sb.ExpiresAt)
	}
	// A bad document is refused whole.
	if err := os.WriteFile(pol, []byte(`{"max_sandboxes":3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.run("policy", "set", pol); code == 0 || !strings.Contains(errOut, "max_sandboxes") {
		t.Errorf("unknown field: exit %d %s", code, errOut)
	}
	if _, err := d.client.SetPolicy(ctxT(t, time.Minute), api.Policy{MaxSize: "xl"}); !errors.Is(err, paddock.ErrInvalidArgument) {
		t.Errorf("bad max_size: %v", err)
	}
	// An API key may read the policy but not change it.
	key, err := d.client.CreateKey(ctxT(t, time.Minute), "pol")
	if err != nil {
		t.Fatal(err)
	}
	tcp := &paddock.Client{URL: "http://" + d.listen, APIKey: key.Secret}
	if _, err := tcp.Policy(ctxT(t, time.Minute)); err != nil {
		t.Errorf("key reads policy: %v", err)
	}
	if _, err := tcp.SetPolicy(ctxT(t, time.Minute), api.Policy{}); !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Errorf("key replaces policy: %v, want permission denied", err)
	}
	// The policy is kept across a restart.
	d.stop()
	d.start()
	p, err := d.client.Policy(ctxT(t, time.Minute))
	if err != nil || p.MaxSize != "basic" || p.MaxLifetime != "1h" || len(p.AllowedImages) != 1 {
		t.Fatalf("policy after restart: %+v, %v", p, err)
	}
}

// TestPolicyFileFlag: serve --policy takes the file; a broken one stops
// the daemon at start with the reason.
func TestPolicyFileFlag(t *testing.T) {
	requireHost(t)
	dir, err := os.MkdirTemp(tmpRoot, "p")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"max_size":"enormous"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(paddockBin(t), "serve", "--state-dir", filepath.Join(dir, "s"), "--socket", filepath.Join(dir, "p.sock"), "--policy", bad)
	serve.Env = append(os.Environ(), "PADDOCK_NETWORK_RANGE="+testnet.DaemonRange(t))
	out, err := serve.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "max_size") {
		t.Fatalf("serve with a bad policy: %v\n%s", err, out)
	}
	cfgOut, err := exec.Command(paddockBin(t), "serve", "--print-config", "--policy", bad).CombinedOutput()
	if err != nil || !strings.Contains(string(cfgOut), `"policy_file": "`+bad+`"`) {
		t.Fatalf("print-config: %v\n%s", err, cfgOut)
	}
}

// TestQuotaUnderConcurrency: 20 concurrent creates by one key against a
// quota of 5 admit exactly 5; the rest are refused naming the rule.
func TestQuotaUnderConcurrency(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	key, err := d.client.CreateKey(ctx, "quota")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.SetPolicy(ctx, api.Policy{MaxSandboxesPerKey: 5}); err != nil {
		t.Fatal(err)
	}
	tcp := &paddock.Client{URL: "http://" + d.listen, APIKey: key.Secret}
	// Warm the image first so the race is about admission, not the build.
	warm, err := d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Size: api.SizeLite})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.client.Delete(ctx, warm.ID); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok      []string
		refused int
		other   []error
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := tcp.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Size: api.SizeLite})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok = append(ok, sb.ID)
			case errors.Is(err, paddock.ErrPermissionDenied) && strings.Contains(err.Error(), "max_sandboxes_per_key"):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(ok) != 5 || refused != 15 || len(other) != 0 {
		t.Fatalf("admitted %d, refused %d, other errors %v; want 5 and 15", len(ok), refused, other)
	}
	list, err := d.client.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, s := range list {
		if s.CreatedBy == key.ID {
			mine++
		}
	}
	if mine != 5 {
		t.Fatalf("%d sandboxes record key %s, want 5", mine, key.ID)
	}
	// A key cannot mint more quota while the rule is set.
	if _, err := tcp.CreateKey(ctx, "more"); !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Errorf("key creates a key under a quota: %v", err)
	}
	// The local caller is not counted against the key.
	if _, err := d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Size: api.SizeLite}); err != nil {
		t.Errorf("local create: %v", err)
	}
	// Freeing a slot admits the next create.
	if err := tcp.Delete(ctx, ok[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := tcp.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Size: api.SizeLite}); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
}
