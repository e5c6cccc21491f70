package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
)

// usernsBase reads the sandbox's uid map from inside and returns the host
// id its root is, failing unless root maps to a range of 65,536 ids.
func usernsBase(t *testing.T, d *daemon, id string) uint64 {
	t.Helper()
	out, code := execOut(t, d, id, "cat", "/proc/self/uid_map", "/proc/self/gid_map")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("uid_map and gid_map: exit %d, %q", code, out)
	}
	var base uint64
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "0" || f[2] != "65536" {
			t.Fatalf("root maps as %q, want 0 <host id> 65536", l)
		}
		b, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil || b == 0 {
			t.Fatalf("root is host id %q", f[1])
		}
		if base != 0 && b != base {
			t.Fatalf("uid and gid maps differ: %q", out)
		}
		base = b
	}
	return base
}

// TestUserNamespaces: a sandbox of the daemon's default runtime (runc; in
// the cgroup v2 VM also crun) has a root that is an id of a range of its
// own on the host, its files keep the owners the sandbox sees (the image's
// layers are not changed), its /sys shows its own network only, and its
// range is given back when it stops.
func TestUserNamespaces(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	var in api.Info
	if err := json.Unmarshal([]byte(d.must("info", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	var def api.RuntimeInfo
	for _, r := range in.Runtimes {
		if r.Default {
			def = r
		}
		if r.Name == "gvisor" && r.UserNamespaces != "" {
			t.Errorf("gvisor: user namespaces %q, want none said", r.UserNamespaces)
		}
	}
	if def.Binary != "runc" && def.Binary != "crun" || def.UserNamespaces != "on" {
		t.Fatalf("default runtime %+v: want runc or crun with user namespaces on (kernel 5.19 or later, which this suite's hosts have)", def)
	}
	if !strings.Contains(d.must("info"), "user namespaces on") {
		t.Error("paddock info does not say user namespaces are on")
	}

	a := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	b := create(t, d, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{Mode: api.NetworkEgress}})
	baseA, baseB := usernsBase(t, d, a.ID), usernsBase(t, d, b.ID)
	if baseA == baseB {
		t.Fatalf("two sandboxes share the host range at %d", baseA)
	}
	for _, base := range []uint64{baseA, baseB} {
		if base < 0x40000000 || (base-0x40000000)%65536 != 0 {
			t.Errorf("range at %d: want a multiple of 65536 from 0x40000000", base)
		}
	}

	// The agent, root inside, is the range's first id on the host.
	if n := hostProcsOwnedBy(t, baseA); n == 0 {
		t.Errorf("no host process runs as %d: the sandbox's root is not its range's first id", baseA)
	}
	// Inside, root and the default user are who they always were, and
	// the image's files are root's.
	if out, _ := execOut(t, d, a.ID, "sh", "-c", "id -u; stat -c %u /bin/busybox"); out != "1000\n0\n" {
		t.Errorf("inside: id -u and the owner of /bin/busybox: %q", out)
	}
	if out, _, code := d.run("exec", "-u", "root", a.ID, "--", "sh", "-c", "id -u && touch /by-root && mkdir -p /home/user/d && chown 1000 /home/user/d && stat -c %u /by-root /home/user/d"); code != 0 || out != "0\n0\n1000\n" {
		t.Errorf("as root: exit %d, %q", code, out)
	}
	// Once it runs, its directory is closed to its own ids: a process
	// that escaped as one of them reaches none of its mounts.
	sbDir := filepath.Join(d.stateDir, "runtime", def.Binary, "sandboxes", a.ID)
	var dst unix.Stat_t
	if err := unix.Stat(sbDir, &dst); err != nil {
		t.Fatal(err)
	}
	if dst.Mode&0o777 != 0o700 || dst.Uid != 0 || dst.Gid != 0 {
		t.Errorf("the running sandbox's directory: mode %#o, owner %d:%d, want 0700 root:root", dst.Mode&0o777, dst.Uid, dst.Gid)
	}
	// On the host the sandbox's disk keeps the ids the sandbox sees.
	upper := filepath.Join(sbDir, "scratch", "upper")
	for p, want := range map[string]uint32{"by-root": 0, "home/user/d": 1000} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(upper, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != want {
			t.Errorf("%s on the sandbox's disk is owned by %d, want %d", p, st.Uid, want)
		}
	}

	// /sys shows the sandbox's own network namespace, in both modes.
	for _, id := range []string{a.ID, b.ID} {
		out, code := execOut(t, d, id, "sh", "-c", "ls /sys/class/net | sort | tr '\\n' ' '; echo; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || strings.TrimSpace(lines[0]) != strings.TrimSpace(lines[1]) {
			t.Errorf("%s: /sys/class/net and /proc/net/dev differ: %q", id, out)
		}
	}

	// Stop gives the range back; a start claims one again, files kept.
	d.must("stop", a.ID)
	if claims := ownClaims(t, d, def.Binary, a.ID); len(claims) != 0 {
		t.Errorf("a stopped sandbox still claims %v", claims)
	}
	d.must("start", a.ID)
	usernsBase(t, d, a.ID)
	if out, code := execOut(t, d, a.ID, "ls", "/by-root"); code != 0 {
		t.Errorf("after a restart: %q", out)
	}
	if claims := ownClaims(t, d, def.Binary, a.ID); len(claims) != 1 {
		t.Errorf("a running sandbox claims %v, want one range", claims)
	}
	d.must("rm", a.ID)
	// The removal finishes in the background.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		claims := ownClaims(t, d, def.Binary, a.ID)
		if len(claims) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a removed sandbox still claims %v", claims)
		}
	}
}

// hostProcsOwnedBy counts the host's processes whose real uid is uid.
func hostProcsOwnedBy(t *testing.T, uid uint64) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	want := "Uid:\t" + strconv.FormatUint(uid, 10) + "\t"
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err == nil && strings.Contains(string(b), "\n"+want) {
			n++
		}
	}
	return n
}

// ownClaims lists the host's range claims that name sandbox id of d's
// runtime binary.
func ownClaims(t *testing.T, d *daemon, binary, id string) []string {
	t.Helper()
	const dir = "/run/paddock/userns"
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	want := filepath.Join(d.stateDir, "runtime", binary) + "\n" + id + "\n"
	var out []string
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && string(b) == want {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestGVisorLimitsInside: a gVisor sandbox reads its limits where
// docs/admission.md says: the memory limit as /proc/meminfo's MemTotal
// (gVisor sizes its memory to it) and the process limit in its own cgroup
// of gVisor's cgroupfs, pids.max under /sys/fs/cgroup at the path
// /proc/self/cgroup names.
func TestGVisorLimitsInside(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, Resources: api.Resources{MemoryMB: 256, Pids: 100}})
	out, code := execOut(t, d, sb.ID, "sh", "-c", "awk '/^MemTotal:/ {print $2}' /proc/meminfo; cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/pids.max 2>/dev/null || echo none")
	f := strings.Fields(out)
	if code != 0 || len(f) != 2 {
		t.Fatalf("exit %d: %q", code, out)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kb > 256<<10 || kb < 240<<10 {
		t.Errorf("MemTotal %s kB, want about 256 MiB (the limit)", f[0])
	}
	// Debian's runsc (2022) has no cgroup of the sandbox's own inside.
	var in api.Info
	if err := json.Unmarshal([]byte(d.must("info", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	pinned := false
	for _, r := range in.Runtimes {
		pinned = pinned || r.Name == api.RuntimeGVisor && strings.HasPrefix(r.Note, "pinned build")
	}
	if pinned && f[1] != "100" {
		t.Errorf("pids.max %q, want 100 (the pinned runsc enforces it inside)", f[1])
	} else if !pinned {
		t.Logf("runsc from PATH: the process limit is not readable inside (%q)", f[1])
	}
}
