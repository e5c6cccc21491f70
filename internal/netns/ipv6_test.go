package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIPv6Off runs ipv6Off on a veth between two namespaces of the test's
// own, one standing for the host and one for the sandbox: afterwards
// neither end has IPv6, even once both are up, and a failure is an error
// that names the end.
func TestIPv6Off(t *testing.T) {
	host, sandbox := scratchNetns(t), scratchNetns(t)
	if !kernelIPv6() {
		t.Skip("the kernel has no IPv6")
	}
	sh := func(ns string, args ...string) string {
		t.Helper()
		var out []byte
		inScratch(t, ns, func(context.Context) error {
			var err error
			out, err = exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
			}
			return nil
		})
		return strings.TrimSpace(string(out))
	}
	sh(host, "ip", "link", "add", "pdt0", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(sandbox))
	inScratch(t, host, func(context.Context) error { return ipv6Off(sandbox, "pdt0") })
	sh(host, "ip", "link", "set", "pdt0", "up")
	sh(sandbox, "ip", "link", "set", "eth0", "up")
	sh(sandbox, "ip", "link", "set", "lo", "up")
	for _, c := range []struct{ ns, file string }{
		{host, "pdt0"}, {sandbox, "eth0"}, {sandbox, "lo"}, {sandbox, "all"}, {sandbox, "default"},
	} {
		if got := sh(c.ns, "cat", filepath.Join(ipv6Conf, c.file, "disable_ipv6")); got != "1" {
			t.Errorf("%s in %s: disable_ipv6 = %q", c.file, filepath.Base(c.ns), got)
		}
	}
	if got := sh(host, "ip", "-6", "addr", "show", "dev", "pdt0"); got != "" {
		t.Errorf("host end has IPv6 addresses: %s", got)
	}
	if got := sh(sandbox, "ip", "-6", "addr"); got != "" {
		t.Errorf("sandbox end has IPv6 addresses: %s", got)
	}

	var err error
	inScratch(t, host, func(context.Context) error { err = ipv6Off(sandbox, "pdt9"); return nil })
	if err == nil || !strings.Contains(err.Error(), "host end of the veth") || !strings.Contains(err.Error(), "pdt9") {
		t.Errorf("missing host end: err %v", err)
	}
	// Inside the test's "host" namespace: the host end is written first.
	inScratch(t, host, func(context.Context) error {
		err = ipv6Off(filepath.Join(t.TempDir(), "nonamespace"), "pdt0")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "sandbox namespace") {
		t.Errorf("missing namespace: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(ipv6Conf, "pdt0")); err == nil {
		t.Error("the test's veth is visible in the host's namespace")
	}
}

// TestInNetnsThreadGoesHome: the thread that ran a function inside a
// sandbox's namespace is back in its own namespace afterwards and free
// for other goroutines (alive, not ended with its goroutine), so neither
// a pooled thread nor the process's main thread (whose namespace
// /proc/self shows) ever stays in a sandbox's namespace.
func TestInNetnsThreadGoesHome(t *testing.T) {
	ns := scratchNetns(t)
	var home, inside unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &home); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(ns, &inside); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		var tid int
		var during unix.Stat_t
		if err := inNetns(ns, func() error {
			tid = unix.Gettid()
			return unix.Stat("/proc/thread-self/ns/net", &during)
		}); err != nil {
			t.Fatal(err)
		}
		if during.Ino != inside.Ino {
			t.Fatalf("round %d: fn ran in namespace %d, want the sandbox's %d", i, during.Ino, inside.Ino)
		}
		var after unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", tid), &after); err != nil {
			t.Fatalf("round %d: thread %d ended with its goroutine (%v); want it back in its namespace and free", i, tid, err)
		}
		if after.Ino != home.Ino || after.Dev != home.Dev {
			t.Fatalf("round %d: thread %d stays in namespace %d after fn, want its own %d", i, tid, after.Ino, home.Ino)
		}
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil || self.Ino != home.Ino {
		t.Errorf("/proc/self/ns/net is namespace %d (%v), want the process's own %d", self.Ino, err, home.Ino)
	}
}
