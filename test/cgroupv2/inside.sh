#!/bin/sh
# Runs inside the cgroup v2 VM, as root, from the directory the host shares
# (mounted at /share): the test binaries the host built are in /share/bin,
# what to run in /share/env, and every result goes to /share/out, which the
# host reads once the VM has powered off.
set -u
share=/share
out=$share/out
mkdir -p "$out"
. "$share/env"
export PADDOCK_TEST_RUNTIMES PADDOCK_TEST_TIME_SCALE
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root CGO_ENABLED=0
export PADDOCK_TEST_AGENT=$share/bin/paddock-agent PADDOCK_TEST_BIN=$share/bin/paddock PADDOCK_TEST_PROBE=$share/bin/probe
export PADDOCK_CGROUPV2_INSIDE=1 PADDOCK_CGROUPV2_SHARE=$share
if [ -x "$share/bin/runsc-pinned" ]; then
	export PADDOCK_RUNSC=$share/bin/runsc-pinned
fi
# Under systemd, start once the boot has finished, as a user's daemon would.
if [ "$(cat /proc/1/comm)" = systemd ]; then
	systemctl is-system-running --wait >"$out/system-state" 2>&1
else
	# The bare init loads no module on demand, and its /tmp is a tmpfs,
	# which Debian 12's kernel (6.1) cannot mount idmapped: the tests'
	# state directories go to the disk, as on a systemd host.
	modprobe loop
	if [ "$(stat -f -c %T /tmp)" = tmpfs ]; then umount /tmp; fi
fi
{
	echo "uptime $(cut -d' ' -f1 /proc/uptime)"
	echo "pid1 $(cat /proc/1/comm)"
	echo "cgroupfs $(stat -f -c %T /sys/fs/cgroup)"
	echo "kernel $(uname -r)"
	echo "runc $(runc --version | head -1)"
	echo "crun $(crun --version | head -1)"
	echo "runsc $(runsc --version | head -1)"
} >"$out/vm-info"

# Each suite runs from a copy on the VM's own disk, in a directory named as
# the package, with a bound; its -test.v output goes to <name>.log and its
# exit status to <name>.rc.
suite() {
	name=$1 bin=$2 run=$3 timeout=$4 skip=${5:-^$}
	dir=/var/tmp/paddock-vmtest/$name
	mkdir -p "$dir"
	cp "$share/bin/$bin" "$dir/$bin"
	start=$(cut -d' ' -f1 /proc/uptime)
	(cd "$dir" && "./$bin" -test.v -test.count=1 -test.timeout="$timeout" -test.run "$run" -test.skip "$skip") >"$out/$name.log" 2>&1
	echo $? >"$out/$name.rc"
	echo "$name $start $(cut -d' ' -f1 /proc/uptime)" >>"$out/times"
}
for s in $SUITES; do
	case $s in
	oci) suite oci oci.test "$OCI_RUN" 40m "$OCI_SKIP" ;;
	e2e) suite e2e e2e.test "$E2E_RUN" 30m ;;
	e2e-crun) (export PADDOCK_DEFAULT_RUNTIME=crun && suite e2e-crun e2e.test "$E2E_CRUN_RUN" 30m) ;;
	adversarial) suite adversarial adversarial.test "$ADVERSARIAL_RUN" 30m ;;
	unit) suite unit cgroupv2.test '^(TestInsideSystemdUnit|TestInsideOOMKill)$' 15m ;;
	esac
done
echo "done $(cut -d' ' -f1 /proc/uptime)" >>"$out/times"
sync
