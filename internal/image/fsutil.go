package image

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// removeTree deletes dir and everything in it, but first detaches any mount
// below it. A builder killed half-way (mmdebstrap mounts /proc, /sys and
// device nodes into its chroot) can leave such mounts behind, and a plain
// recursive delete would walk through them into the host's files.
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := detachMounts(dir); err != nil {
		return err
	}
	return removeAllRetry(dir)
}

// detachMounts detaches every mount at or below dir, deepest first, so a
// parent is never detached from over its children, and returns the mount
// points it found. A mount point is unmounted only while its path, resolved
// again, is still itself, and never through a final symlink: a path that
// has come to pass through a link is not followed out of dir.
func detachMounts(dir string) ([]string, error) {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return nil, err
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		if real, err := filepath.EvalSymlinks(m); err != nil || real != m {
			return mounts, fmt.Errorf("mount point %s no longer resolves to itself; not unmounting through it", m)
		}
		err := unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return mounts, fmt.Errorf("unmounting %s: %w", m, err)
		}
	}
	if left, err := mountsUnder(dir); err != nil {
		return mounts, err
	} else if len(left) > 0 {
		return mounts, fmt.Errorf("%d mounts remain under %s; not deleting it", len(left), dir)
	}
	return mounts, nil
}

// mountsUnder lists the mount points at or below dir in this process's
// mount namespace.
func mountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mp, ok := mountPoint(sc.Text())
		if !ok {
			continue
		}
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	return out, nil
}

// mountPoint extracts the fifth field of a mountinfo line, undoing the
// kernel's octal escapes (\040 for a space and so on).
func mountPoint(line string) (string, bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return "", false
	}
	return unescapeOctal(fields[4]), true
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
