package oci

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// seccompProfile is the sandbox's profile for this runtime.
//
// gVisor applies an OCI profile's errno rules with EPERM whatever errnoRet
// says (runsc 20221219, Debian 12's, and still the pinned build of
// 2026-09; checked: clone3 returns EPERM under the profile). The clone3
// rule exists to return ENOSYS, which makes glibc fall back to clone,
// whose flags the profile checks; EPERM instead makes every
// pthread_create fail, so curl's resolver, Python threads and most
// servers break. runsc gets the profile without that rule: Debian's
// sentry answers clone3 with ENOSYS by itself, the pinned one implements
// it (checked), and namespaces made inside gVisor are the sentry's, not
// the host kernel's, which is what the rule keeps sandboxes away from.
func (r *Runtime) seccompProfile() *specs.LinuxSeccomp {
	sc := defaultSeccomp()
	if r.kind != KindRunsc {
		return sc
	}
	sc.Syscalls = slices.DeleteFunc(sc.Syscalls, func(s specs.LinuxSyscall) bool {
		return slices.Equal(s.Names, []string{"clone3"})
	})
	return sc
}
