package oci

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

func testSpec(t *testing.T) runtime.Spec {
	t.Helper()
	layer := t.TempDir()
	agent := filepath.Join(t.TempDir(), "paddock")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	return runtime.Spec{
		ID: "abc123", Layers: []string{layer}, AgentBinary: agent, Env: []string{"A=1"},
		Resources: runtime.Resources{CPUMillis: 1500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, Pids: 64},
	}
}

func TestBuildSpec(t *testing.T) {
	for _, host := range []hostInfo{
		{nofileHard: 20000, swapAccounting: true, cgroupNS: true, lowerOOMScore: true},
		{nofileHard: 1 << 20, swapAccounting: false, cgroupNS: false},
	} {
		r := &Runtime{kind: KindRunc, cgroupParent: "paddock", host: host}
		spec := testSpec(t)
		s := r.buildSpec(spec, bundlePaths{rootfs: "/r/rootfs", runDir: "/r/run", agentBinary: spec.AgentBinary})

		if got := strings.Join(s.Process.Args, " "); got != "/.paddock/bin/paddock agent --socket /.paddock/run/agent.sock" {
			t.Errorf("args = %q", got)
		}
		if !slices.Contains(s.Process.Env, "A=1") || !slices.ContainsFunc(s.Process.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
			t.Errorf("env = %v, want A=1 and a PATH", s.Process.Env)
		}
		if s.Hostname != "abc123" || s.Root.Path != "/r/rootfs" || s.Root.Readonly || s.Process.NoNewPrivileges {
			t.Errorf("hostname %q root %+v nnp %v", s.Hostname, s.Root, s.Process.NoNewPrivileges)
		}
		if host.lowerOOMScore && (s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != agentOOMScoreAdj) {
			t.Errorf("oomScoreAdj = %v, want %d (the agent is the OOM killer's last choice)", s.Process.OOMScoreAdj, agentOOMScoreAdj)
		}
		if !host.lowerOOMScore && s.Process.OOMScoreAdj != nil {
			t.Errorf("oomScoreAdj = %d on a host that cannot lower scores", *s.Process.OOMScoreAdj)
		}
		if s.Linux.CgroupsPath != "/paddock/abc123" {
			t.Errorf("cgroupsPath = %q", s.Linux.CgroupsPath)
		}
		if len(s.Process.Capabilities.Inheritable) != 0 || len(s.Process.Capabilities.Ambient) != 0 ||
			slices.Contains(s.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") || len(s.Process.Capabilities.Bounding) != 10 {
			t.Errorf("capabilities = %+v", s.Process.Capabilities)
		}
		for _, rl := range s.Process.Rlimits {
			if rl.Type == "RLIMIT_NOFILE" && (rl.Hard > host.nofileHard || rl.Hard > nofileCeiling || rl.Soft != rl.Hard) {
				t.Errorf("nofile %+v exceeds host hard %d", rl, host.nofileHard)
			}
			if rl.Type == "RLIMIT_CORE" && rl.Hard != 0 {
				t.Errorf("core %+v, want 0", rl)
			}
		}
		res := s.Linux.Resources
		if *res.CPU.Quota != 150000 || *res.CPU.Period != 100000 {
			t.Errorf("cpu %d/%d, want 150000/100000", *res.CPU.Quota, *res.CPU.Period)
		}
		if *res.Memory.Limit != 256<<20 || (res.Memory.Swap != nil) != host.swapAccounting {
			t.Errorf("memory %+v with swap accounting %v", res.Memory, host.swapAccounting)
		}
		if *res.Pids.Limit != 64 {
			t.Errorf("pids %d", *res.Pids.Limit)
		}
		if res.Devices[0].Allow || res.Devices[0].Access != "rwm" {
			t.Errorf("first device rule %+v, want deny all", res.Devices[0])
		}
		hasNS := func(typ specs.LinuxNamespaceType) bool {
			return slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == typ && n.Path == "" })
		}
		for _, ns := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace, specs.NetworkNamespace} {
			if !hasNS(ns) {
				t.Errorf("missing new %s namespace", ns)
			}
		}
		if hasNS(specs.CgroupNamespace) != host.cgroupNS {
			t.Errorf("cgroup namespace %v, host supports %v", hasNS(specs.CgroupNamespace), host.cgroupNS)
		}
		mounts := map[string]specs.Mount{}
		for _, m := range s.Mounts {
			mounts[m.Destination] = m
		}
		for dst, opts := range map[string][]string{
			"/.paddock/bin/paddock": {"ro", "nosuid", "nodev"},
			"/.paddock/run":         {"rw", "nosuid", "nodev", "noexec"},
			"/sys":                  {"ro"},
			"/sys/fs/cgroup":        {"ro"},
			"/dev/shm":              {"nosuid", "nodev", "noexec"},
		} {
			m, ok := mounts[dst]
			if !ok {
				t.Errorf("no mount at %s", dst)
				continue
			}
			for _, o := range opts {
				if !slices.Contains(m.Options, o) {
					t.Errorf("mount %s lacks %s: %v", dst, o, m.Options)
				}
			}
		}
		if mounts["/.paddock/run"].Source != "/r/run" || mounts["/.paddock/bin/paddock"].Source != spec.AgentBinary {
			t.Errorf("bind sources wrong: %+v", mounts)
		}
		if !slices.Contains(s.Linux.MaskedPaths, "/proc/kcore") || !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
			t.Errorf("masked %v readonly %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
		}
	}
}

func TestSeccompProfile(t *testing.T) {
	sc := defaultSeccomp()
	if sc.DefaultAction != specs.ActAllow {
		t.Fatalf("default action %s", sc.DefaultAction)
	}
	denied := map[string]bool{}
	for _, s := range sc.Syscalls {
		if s.Action != specs.ActErrno || s.ErrnoRet == nil {
			t.Errorf("rule %+v is not an errno rule", s)
		}
		if len(s.Args) == 0 {
			for _, n := range s.Names {
				denied[n] = true
			}
		}
	}
	for _, n := range []string{"mount", "umount2", "pivot_root", "bpf", "keyctl", "unshare", "setns", "ptrace",
		"kexec_load", "init_module", "open_by_handle_at", "userfaultfd", "perf_event_open", "clone3"} {
		if !denied[n] {
			t.Errorf("%s is not denied", n)
		}
	}
	for _, n := range []string{"clone", "personality", "execve", "read"} {
		if denied[n] {
			t.Errorf("%s is denied outright", n)
		}
	}
	for _, d := range deniedSyscalls {
		if d.why == "" {
			t.Errorf("%v has no documented reason", d.names)
		}
	}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*runtime.Spec)
		ok     bool
	}{
		{"valid", func(*runtime.Spec) {}, true},
		{"no pids limit", func(s *runtime.Spec) { s.Resources.Pids = 0 }, true},
		{"bad id", func(s *runtime.Spec) { s.ID = "Bad" }, false},
		{"id too long", func(s *runtime.Spec) { s.ID = strings.Repeat("a", 33) }, false},
		{"no layers", func(s *runtime.Spec) { s.Layers = nil }, false},
		{"relative layer", func(s *runtime.Spec) { s.Layers = []string{"rel"} }, false},
		{"layer with colon", func(s *runtime.Spec) { s.Layers = []string{"/a:b"} }, false},
		{"unclean layer", func(s *runtime.Spec) { s.Layers = []string{s.Layers[0] + "/../x"} }, false},
		{"missing layer", func(s *runtime.Spec) { s.Layers = []string{"/nonexistent/layer"} }, false},
		{"agent is dir", func(s *runtime.Spec) { s.AgentBinary = s.Layers[0] }, false},
		{"agent missing", func(s *runtime.Spec) { s.AgentBinary = "/nonexistent/paddock" }, false},
		{"env without =", func(s *runtime.Spec) { s.Env = []string{"NOEQUALS"} }, false},
		{"env with NUL", func(s *runtime.Spec) { s.Env = []string{"A=\x00"} }, false},
		{"zero cpu", func(s *runtime.Spec) { s.Resources.CPUMillis = 0 }, false},
		{"tiny memory", func(s *runtime.Spec) { s.Resources.MemoryBytes = 1024 }, false},
		{"huge disk", func(s *runtime.Spec) { s.Resources.DiskBytes = 1 << 62 }, false},
		{"negative pids", func(s *runtime.Spec) { s.Resources.Pids = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSpec(t)
			tt.mutate(&s)
			err := validateSpec(s)
			if tt.ok && err != nil {
				t.Fatalf("validateSpec: %v", err)
			}
			if !tt.ok && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("validateSpec = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestParseMountinfoLine(t *testing.T) {
	tests := []struct {
		line    string
		mp, typ string
		ok      bool
	}{
		{`36 35 98:0 /mnt1 /mnt/with\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue`, "/mnt/with space", "ext3", true},
		{`42 27 7:0 / /tmp/x/scratch rw,nosuid - ext4 /dev/loop0 rw`, "/tmp/x/scratch", "ext4", true},
		{`no separator here`, "", "", false},
		{`1 2 3 - ext4`, "", "", false},
	}
	for _, tt := range tests {
		e, err := parseMountinfoLine(tt.line)
		if (err == nil) != tt.ok || (tt.ok && (e.mountPoint != tt.mp || e.fsType != tt.typ)) {
			t.Errorf("parseMountinfoLine(%q) = %+v, %v", tt.line, e, err)
		}
	}
}

func TestParseState(t *testing.T) {
	tests := []struct {
		in     string
		status string
		ok     bool
	}{
		{`{"id":"a","pid":12,"status":"running"}`, "running", true},
		{`{"id":"a","pid":0,"status":"stopped"}`, "stopped", true},
		{`{"status":"exploded"}`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		st, err := parseState([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && st.Status != tt.status) {
			t.Errorf("parseState(%s) = %+v, %v", tt.in, st, err)
		}
	}
	ids, err := parseList([]byte(`[{"id":"abc"},{"id":"../x"},{"id":"Upper"}]`))
	if err != nil || !slices.Equal(ids, []string{"abc"}) {
		t.Errorf("parseList = %v, %v; want only the valid id", ids, err)
	}
	if ids, err := parseList([]byte(`null`)); err != nil || len(ids) != 0 {
		t.Errorf("parseList(null) = %v, %v", ids, err)
	}
}

func FuzzValidID(f *testing.F) {
	for _, s := range []string{"abc", "", "A", "../x", strings.Repeat("a", 33)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !validID(id) {
			return
		}
		if len(id) > 32 || strings.ContainsAny(id, "/.\x00") || filepath.Base(id) != id {
			t.Fatalf("validID accepted %q", id)
		}
	})
}

func FuzzParseMountinfoLine(f *testing.F) {
	f.Add(`36 35 98:0 /mnt1 /mnt/a\040b rw master:1 - ext3 /dev/root rw`)
	f.Add(`1 2 3:4 / / rw - x y z`)
	f.Add(`\\\`)
	f.Fuzz(func(t *testing.T, line string) {
		e, err := parseMountinfoLine(line)
		if err == nil && strings.Contains(line, " - ") && e.fsType == "" {
			t.Fatalf("parsed %q without fstype", line)
		}
	})
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"id":"a","pid":1,"status":"running"}`))
	f.Add([]byte(`[{"id":"a"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := parseState(b); err == nil && st.Status == "" {
			t.Fatal("accepted a state without status")
		}
		ids, err := parseList(b)
		if err == nil {
			for _, id := range ids {
				if !validID(id) {
					t.Fatalf("parseList returned invalid id %q", id)
				}
			}
		}
	})
}
