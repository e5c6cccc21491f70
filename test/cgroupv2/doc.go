// Package cgroupv2 runs Paddock's runtime suite and an end-to-end subset
// inside a Debian 12 VM booted under QEMU with only the cgroup v2 hierarchy
// mounted, systemd as PID 1, and brings the results back as Go test
// results. Its tests build only with the tag cgroupv2vm (`make
// test-cgroupv2`); see docs/cgroupv2.md.
package cgroupv2
