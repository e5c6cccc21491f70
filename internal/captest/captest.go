// Package captest runs test code with fewer capabilities than the test
// process has, as the daemon runs where a container runtime drops them
// (a Kubernetes pod without CAP_SYS_ADMIN).
package captest

import (
	"errors"
	"runtime"

	"golang.org/x/sys/unix"
)

// WithoutSysAdmin runs f on an OS thread of its own whose effective
// capabilities lack CAP_SYS_ADMIN, so that f's system calls (made on that
// thread: f must not hand its work to other goroutines) may not set
// trusted.* extended attributes. The thread is never handed back to the
// Go runtime: it ends with f's goroutine. It fails when the thread could
// still set such an attribute afterwards (in scratch, a directory), so a
// caller never believes it tested the unprivileged path when it did not.
func WithoutSysAdmin(scratch string, f func()) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked (above)
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err = unix.Capget(&hdr, &data[0]); err != nil {
			return
		}
		data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
		if err = unix.Capset(&hdr, &data[0]); err != nil {
			return
		}
		if e := unix.Setxattr(scratch, "trusted.paddock-captest", []byte("y"), 0); !errors.Is(e, unix.EPERM) {
			if e == nil {
				_ = unix.Removexattr(scratch, "trusted.paddock-captest")
			}
			err = errors.New("captest: trusted.* attributes are still settable without CAP_SYS_ADMIN")
			return
		}
		f()
	}()
	<-done
	return err
}
