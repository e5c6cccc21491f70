package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ipv6Conf is where the kernel keeps per-interface IPv6 settings; it is
// absent when the kernel has no IPv6 at all.
const ipv6Conf = "/proc/sys/net/ipv6/conf"

// kernelIPv6 reports whether the kernel has an IPv6 stack.
func kernelIPv6() bool {
	_, err := os.Stat(ipv6Conf)
	return err == nil
}

// ipv6Off turns IPv6 off on both ends of a sandbox's veth and reads the
// settings back. The firewall drops a sandbox's IPv6 packets too, but a
// sandbox is networked only when both layers hold: a failure here fails
// the sandbox's network setup rather than leaving an end with a
// link-local address next to IPv4-only accept rules.
func ipv6Off(nsPath, hostIf string) error {
	if !kernelIPv6() {
		return nil
	}
	if err := disableIPv6(hostIf); err != nil {
		return fmt.Errorf("netns: host end of the veth: %w", err)
	}
	err := inNetns(nsPath, func() error {
		// "all" reaches every interface there is (lo, eth0), "default"
		// every one made later; eth0 is checked by name as well.
		for _, name := range []string{"all", "default", "eth0"} {
			if err := disableIPv6(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netns: sandbox namespace %s: %w", filepath.Base(nsPath), err)
	}
	return nil
}

// disableIPv6 sets disable_ipv6 of one interface (or "all", "default") of
// the calling thread's namespace and checks that it reads back as set.
func disableIPv6(name string) error {
	p := filepath.Join(ipv6Conf, name, "disable_ipv6")
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("cannot disable IPv6 on %s: %w", name, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("cannot read back IPv6 setting of %s: %w", name, err)
	}
	if v := strings.TrimSpace(string(b)); v != "1" {
		return fmt.Errorf("IPv6 stays on at %s (disable_ipv6 reads %q)", name, v)
	}
	return nil
}

// inNetns runs fn on an OS thread that has joined the network namespace
// bind-mounted at path. /proc/sys/net shows the calling thread's
// namespace, so fn's sysctl reads and writes are the namespace's.
//
// The thread goes back to its own namespace before anything else may run
// on it. Ending the goroutine locked would end the thread, except when
// the thread is the process's main thread, which Go keeps (parked) for
// the life of the process; and /proc/self and /proc/net show the main
// thread's namespace, so a main thread left in a sandbox's namespace made
// the daemon take that sandbox's namespace for its own (a gVisor start
// then refused it as "the host's"). If the way back fails the thread
// stays locked and goes with its goroutine.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer own.Close()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("join network namespace: %w", err)
			return
		}
		err = fn()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
