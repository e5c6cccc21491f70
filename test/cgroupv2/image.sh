#!/usr/bin/env bash
# Builds, or finds in its cache, the Debian 12 VM the cgroup v2 suite boots,
# and prints the directory holding it: vmlinuz, initrd.img and root.img (a
# raw ext4 root filesystem, never written to: each boot writes to a qcow2
# overlay of its own).
#
# The cache directory is named by a hash of this script, which holds every
# input (the package list, the files written into the image), so a change
# here builds a new image and an unchanged script reuses the old one. The
# image is built beside the cache under a lock and renamed into place only
# once complete; a build that fails or is interrupted leaves nothing.
set -euo pipefail

cache=${PADDOCK_CGROUPV2_CACHE:-/var/cache/paddock-test/cgroupv2}
mirror=${PADDOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(sha256sum "$0" | cut -c1-16)
dest=$cache/$key
if [ -f "$dest/root.img" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$dest/root.img" ]; then # built by another run while this one waited
	echo "$dest"
	exit 0
fi

work=$(mktemp -d "$cache/.build-$key.XXXXXX")
# An interrupted mmdebstrap may leave its chroot's /proc mounted: unmount
# whatever is under the build before removing it, and never cross into it.
cleanup() {
	findmnt -rn -o TARGET | grep -F "$work/" | sort -r | xargs -r -n1 umount -l || true
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
start=$(date +%s)
echo "building the cgroup v2 test VM image into $dest (a few minutes, once)" >&2

# What the suite needs inside: a kernel and systemd to boot, the three
# runtimes, and what the OCI backend and the daemon call (mkfs.ext4,
# losetup, ip, nft, iptables). busybox-static gives the tests their rootfs.
pkgs=linux-image-amd64,systemd,systemd-sysv,udev,kmod,initramfs-tools
pkgs+=,runc,crun,runsc,busybox-static,nftables,iptables,iproute2,e2fsprogs,util-linux,mount,procps

# The unit that runs the suite, then powers the VM off. It starts with the
# boot; the suite's script (from the shared directory, so changing it does
# not rebuild the image) waits for the boot to finish. Not ordered after
# multi-user.target, which wants it: that would be an ordering cycle.
runner='[Unit]
Description=Paddock cgroup v2 test run
[Service]
Type=simple
StandardOutput=journal+console
StandardError=journal+console
ExecStart=/usr/local/sbin/paddock-vmtest
ExecStopPost=/bin/systemctl poweroff --no-block
[Install]
WantedBy=multi-user.target'

# Mounts the shared directory and runs its inside.sh. As init= (the bare
# init mode) it first mounts what systemd would and powers off after.
vmtest='#!/bin/sh
if [ $$ = 1 ]; then
	mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
	mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
	mount -o remount,rw /; hostname paddock-vm; ip link set lo up
fi
modprobe 9pnet_virtio; modprobe 9p
mkdir -p /share
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 share /share
sh /share/inside.sh
if [ $$ = 1 ]; then sync; echo o > /proc/sysrq-trigger; sleep 60; fi'

mmdebstrap --variant=minbase --include="$pkgs" \
	--customize-hook='echo paddock-vm > "$1/etc/hostname"' \
	--customize-hook='printf "/dev/vda / ext4 rw,relatime 0 1\n" > "$1/etc/fstab"' \
	--customize-hook="printf '%s\n' '$runner' > \"\$1/etc/systemd/system/paddock-vmtest.service\"" \
	--customize-hook="printf '%s\n' '$vmtest' > \"\$1/usr/local/sbin/paddock-vmtest\"" \
	--customize-hook='chmod 0755 "$1/usr/local/sbin/paddock-vmtest"' \
	--customize-hook='chroot "$1" systemctl enable paddock-vmtest.service' \
	--customize-hook='chroot "$1" systemctl mask getty@tty1.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service systemd-timesyncd.service' \
	--customize-hook='cp "$1"/boot/vmlinuz-* "$1/../vmlinuz"; cp "$1"/boot/initrd.img-* "$1/../initrd.img"' \
	bookworm "$work/root" "$mirror" >&2

# A raw ext4 image with room for the sandboxes' disks, sparse on the host.
truncate -s 6G "$work/root.img"
mkfs.ext4 -q -L paddock-vm -d "$work/root" "$work/root.img"
rm -rf "$work/root"
echo "built in $(($(date +%s) - start)) s" >"$work/build-time"
mv "$work" "$dest"
trap - EXIT
echo "image built in $(($(date +%s) - start)) s" >&2
echo "$dest"
