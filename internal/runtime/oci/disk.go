package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// createDisk makes a sparse ext4 image of size bytes at path. It fails if
// the file exists: an existing disk holds a stopped sandbox's files.
func createDisk(ctx context.Context, path string, size int64) error {
	return formatDisk(ctx, path, size, false)
}

// formatDisk is createDisk; a background format runs at the lowest CPU
// priority so that it never slows the starts it is made ahead for.
func formatDisk(ctx context.Context, path string, size int64, background bool) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("oci: create disk image: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("oci: size disk image: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("oci: create disk image: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// No reserved blocks: the sandbox owns the whole disk. Lazy init and
	// no discard keep mkfs fast on a sparse file.
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	if err == nil {
		if background {
			_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, 19)
		}
		err = cmd.Wait()
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("oci: mkfs.ext4: %s: %w", strings.TrimSpace(out.String()), err)
	}
	return nil
}

// attachLoop binds the image at path to a free loop device with
// autoclear set, so the device goes away by itself once the filesystem
// on it is unmounted. It returns the device path and an open fd on it,
// which the caller closes after mounting.
func attachLoop(path string, log *slog.Logger) (string, *os.File, error) {
	if err := waitDiskReleased(path, diskReleaseTimeout, log); err != nil {
		return "", nil, err
	}
	img, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("oci: open disk image: %w", err)
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("oci: open loop-control: %w", errdefs.ErrUnavailable)
	}
	defer ctl.Close()
	// Another process may take the free device between GET_FREE and
	// configuring it; that shows as EBUSY and we ask again.
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("oci: no free loop device: %w", errdefs.ErrResourceExhausted)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		if err := ensureLoopNode(dev, n); err != nil {
			return "", nil, err
		}
		lf, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", nil, fmt.Errorf("oci: open %s: %w", dev, err)
		}
		err = configureLoop(int(lf.Fd()), int(img.Fd()))
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		if errors.Is(err, unix.EBUSY) {
			time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
			continue
		}
		return "", nil, fmt.Errorf("oci: configure %s: %w", dev, err)
	}
	return "", nil, fmt.Errorf("oci: loop devices stay busy: %w", errdefs.ErrResourceExhausted)
}

// diskReleaseTimeout bounds how long a mount waits for the previous
// mount of the same disk image to go away.
const diskReleaseTimeout = 15 * time.Second

// waitDiskReleased waits until no loop device is backed by the image at
// path. A stop whose unmount found the disk busy detaches it lazily
// (unmount): that file system lives on, and writes back, until its last
// user goes, and only then does autoclear free its loop device. Mounting
// the image a second time meanwhile puts two ext4 instances on one file,
// which corrupts it (a start right after such a stop read "bad message").
//
// Past a second of waiting it looks for what holds the disk: a runtime
// process of this very sandbox (its command line names the sandbox's
// directory, as a gVisor gofer or sentry that outlived a failed checkpoint
// does) is killed, since the sandbox is stopped and nothing of it may run;
// any other holder is named in the error.
func waitDiskReleased(path string, timeout time.Duration, log *slog.Logger) error {
	start := time.Now()
	deadline := start.Add(timeout)
	sandboxDir := filepath.Dir(path)
	var lastLook time.Time
	var others []diskHolder
	for {
		dev, err := loopBacking(path)
		if err != nil || dev == "" {
			return err
		}
		if time.Since(start) > time.Second && time.Since(lastLook) > time.Second {
			lastLook, others = time.Now(), nil
			for _, h := range diskHolders(dev) {
				if h.ownedBy(sandboxDir) {
					if log != nil {
						log.Warn("killing a runtime process of a stopped sandbox that still holds its disk", "holder", h.String(), "device", dev)
					}
					_ = unix.Kill(h.pid, unix.SIGKILL)
					continue
				}
				others = append(others, h)
			}
		}
		if time.Now().After(deadline) {
			held := "something kept a file of the stopped sandbox open"
			if len(others) > 0 {
				held = fmt.Sprintf("held by %v", others)
			}
			return fmt.Errorf("oci: the disk image is still attached to %s by its previous mount (%s); try again: %w", dev, held, errdefs.ErrUnavailable)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loopBacking returns the loop device whose backing file is path, or "".
func loopBacking(path string) (string, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // the kernel shows the resolved path
	}
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return "", nil // no sysfs to ask (a container without it): nothing to wait for that can be seen
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile("/sys/block/" + e.Name() + "/loop/backing_file")
		if err != nil {
			continue // not attached, or detached meanwhile
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == path {
			return "/dev/" + e.Name(), nil
		}
	}
	return "", nil
}

func configureLoop(loopFD, imgFD int) error {
	cfg := unix.LoopConfig{Fd: uint32(imgFD)}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	err := unix.IoctlLoopConfigure(loopFD, &cfg)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	// Kernels before 5.8 have no LOOP_CONFIGURE.
	if err := unix.IoctlSetInt(loopFD, unix.LOOP_SET_FD, imgFD); err != nil {
		return err
	}
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
	if err := unix.IoctlLoopSetStatus64(loopFD, &info); err != nil {
		_ = unix.IoctlSetInt(loopFD, unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// ensureLoopNode creates /dev/loopN when no device manager made it (in a
// container, /dev is often static).
func ensureLoopNode(dev string, n int) error {
	if _, err := os.Stat(dev); err == nil {
		return nil
	}
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("oci: create %s: %w", dev, err)
	}
	return nil
}

// mountDisk loop-mounts the ext4 image at dir; log (nil: none) hears of
// a leftover runtime process killed to free the disk (waitDiskReleased).
func mountDisk(img, dir string, log *slog.Logger) error {
	dev, lf, err := attachLoop(img, log)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		// Autoclear only fires on the last close after a mount; with no
		// mount, detach explicitly.
		_ = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("oci: mount writable layer: %w", err)
	}
	return nil
}

// mountOverlay mounts the root filesystem: layers are given lowest first,
// overlayfs wants them top first.
func mountOverlay(layers []string, upper, work, target string) error {
	lower := make([]string, len(layers))
	for i, l := range layers {
		lower[len(layers)-1-i] = l
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if len(opts) > maxOverlayOpts {
		return errdefs.Invalid("image has too many layers or too long layer paths for overlayfs")
	}
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("oci: mount root filesystem: %w", err)
	}
	return nil
}

// unmount unmounts p if it is a mount point. A busy mount gets a few
// retries, then a lazy detach so Stop always makes progress; the
// loop device's autoclear then fires when the last user goes away.
func unmount(p string) error {
	for i := 0; i < 10; i++ {
		mounted, err := isMountPoint(p)
		if err != nil {
			return err
		}
		if !mounted {
			return nil
		}
		err = unix.Unmount(p, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			continue
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("oci: unmount: %w", err)
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("oci: unmount: %w", err)
	}
	return nil
}
