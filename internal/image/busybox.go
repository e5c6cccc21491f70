package image

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxApplets bounds what is taken from `busybox --list-full`; real builds
// have a few hundred.
const maxApplets = 2000

// busyboxFiles are the small text files of the busybox image.
var busyboxFiles = []struct {
	path string
	mode os.FileMode
	body string
}{
	{"etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\n" +
		"user:x:1000:1000:user:/home/user:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
	{"etc/group", 0o644, "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"},
	{"etc/hosts", 0o644, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{"etc/hostname", 0o644, "localhost\n"},
	{"etc/resolv.conf", 0o644, ""},
}

// busyboxDirs are created with exact modes and owners, whatever the umask.
var busyboxDirs = []struct {
	path     string
	mode     os.FileMode
	uid, gid int
}{
	{"bin", 0o755, 0, 0},
	{"sbin", 0o755, 0, 0},
	{"usr", 0o755, 0, 0},
	{"usr/bin", 0o755, 0, 0},
	{"usr/sbin", 0o755, 0, 0},
	{"etc", 0o755, 0, 0},
	{"home", 0o755, 0, 0},
	{"home/user", 0o755, 1000, 1000},
	{"root", 0o700, 0, 0},
	{"tmp", os.ModeSticky | 0o777, 0, 0},
	{"var", 0o755, 0, 0},
	{"var/tmp", os.ModeSticky | 0o777, 0, 0},
	{"proc", 0o555, 0, 0},
	{"sys", 0o555, 0, 0},
	{"dev", 0o755, 0, 0},
	{"run", 0o755, 0, 0},
}

// buildBusybox makes a rootfs from one static busybox binary and a symlink
// per applet. It takes well under a second.
func (s *Store) buildBusybox(ctx context.Context, rootfs string, progress Progress) error {
	bin, err := s.checkBusybox()
	if err != nil {
		return err
	}
	applets, err := busyboxApplets(ctx, bin)
	if err != nil {
		return err
	}
	version := busyboxVersion(ctx, bin)
	progress(fmt.Sprintf("busybox %s with %d applets", version, len(applets)))

	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fmt.Errorf("busybox image: %w", err)
	}
	for _, d := range busyboxDirs {
		if err := mkdirExact(filepath.Join(rootfs, d.path), d.mode, d.uid, d.gid); err != nil {
			return fmt.Errorf("busybox image: %w", err)
		}
	}
	if err := copyFile(bin, filepath.Join(rootfs, "bin", "busybox"), 0o755); err != nil {
		return fmt.Errorf("busybox image: copying busybox: %w", err)
	}
	for _, a := range applets {
		dst := filepath.Join(rootfs, filepath.FromSlash(a))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("busybox image: %w", err)
		}
		if err := os.Symlink("/bin/busybox", dst); err != nil && !os.IsExist(err) {
			return fmt.Errorf("busybox image: applet %s: %w", a, err)
		}
	}
	if wgetLacksTimeout(ctx, bin) {
		// Replaces the applet's link; the shim runs the real applet.
		wget := filepath.Join(rootfs, "usr", "bin", "wget")
		if err := os.Remove(wget); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("busybox image: %w", err)
		}
		if err := writeFileExact(wget, []byte(wgetTimeoutShim), 0o755); err != nil {
			return fmt.Errorf("busybox image: %w", err)
		}
		progress("wget: -T runs under timeout (this busybox's wget has no -T of its own)")
	}
	files := append(busyboxFiles[:len(busyboxFiles):len(busyboxFiles)], struct {
		path string
		mode os.FileMode
		body string
	}{"etc/os-release", 0o644, osRelease(version)})
	for _, f := range files {
		if err := writeFileExact(filepath.Join(rootfs, f.path), []byte(f.body), f.mode); err != nil {
			return fmt.Errorf("busybox image: %w", err)
		}
	}
	return nil
}

// wgetTimeoutShim stands in for wget when busybox was built without wget's
// -T (Debian's busybox-static before 1.36.1-5), whose wget then crashes
// with SIGSEGV on -T: the shim takes -T SECONDS (or --timeout=SECONDS) off
// the arguments and runs wget under busybox's timeout, which bounds the
// whole download rather than each network step.
const wgetTimeoutShim = `#!/bin/sh
# This busybox's wget has no -T; it runs under timeout instead.
t=
n=$#
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	n=$((n - 1))
	case $a in
	--)
		set -- "$@" "$a"
		while [ "$n" -gt 0 ]; do set -- "$@" "$1"; shift; n=$((n - 1)); done
		;;
	-T | --timeout)
		if [ "$n" -gt 0 ]; then t=$1; shift; n=$((n - 1)); fi
		;;
	-T*) t=${a#-T} ;;
	--timeout=*) t=${a#--timeout=} ;;
	*) set -- "$@" "$a" ;;
	esac
done
if [ -n "$t" ]; then
	exec /bin/busybox timeout "$t" /bin/busybox wget "$@"
fi
exec /bin/busybox wget "$@"
`

// wgetLacksTimeout reports whether busybox's wget was built without -T:
// its usage then does not name it.
func wgetLacksTimeout(ctx context.Context, bin string) bool {
	out, _ := exec.CommandContext(ctx, bin, "wget", "--help").CombinedOutput()
	return strings.Contains(string(out), "Usage: wget") && !strings.Contains(string(out), "-T SEC")
}

func osRelease(version string) string {
	return fmt.Sprintf("NAME=\"Paddock busybox\"\nID=busybox\nVERSION_ID=%q\nPRETTY_NAME=\"Paddock busybox %s\"\n", version, version)
}

// checkBusybox insists on a static binary: a dynamic one would need the
// host's libraries, which the image does not have.
func (s *Store) checkBusybox() (string, error) {
	info, err := os.Stat(s.busybox)
	if err != nil {
		return "", fmt.Errorf("busybox image: %s not found (install busybox-static): %w", s.busybox, errdefs.ErrFailedPrecondition)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("busybox image: %s is not a regular file: %w", s.busybox, errdefs.ErrFailedPrecondition)
	}
	static, err := isStaticELF(s.busybox)
	if err != nil {
		return "", fmt.Errorf("busybox image: %s: %v: %w", s.busybox, err, errdefs.ErrFailedPrecondition)
	}
	if !static {
		return "", fmt.Errorf("busybox image: %s is dynamically linked; install busybox-static: %w", s.busybox, errdefs.ErrFailedPrecondition)
	}
	return s.busybox, nil
}

// busyboxApplets returns the applet paths relative to /, e.g. "bin/sh".
func busyboxApplets(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list-full").Output()
	prefix := ""
	if err != nil {
		// Builds without --list-full still have --list: put them in bin/.
		out, err = exec.CommandContext(ctx, bin, "--list").Output()
		prefix = "bin/"
	}
	if err != nil {
		return nil, fmt.Errorf("busybox image: listing applets: %w", err)
	}
	return parseApplets(out, prefix)
}

// parseApplets validates busybox's applet list: each must be a clean
// relative path that stays inside the rootfs and does not replace busybox.
func parseApplets(out []byte, prefix string) ([]string, error) {
	var applets []string
	seen := make(map[string]bool)
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p := prefix + line
		if len(p) > 255 || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") ||
			strings.ContainsAny(p, "\x00\\") {
			return nil, fmt.Errorf("busybox image: unexpected applet path %q", printable(p))
		}
		if p == "bin/busybox" || seen[p] {
			continue
		}
		seen[p] = true
		applets = append(applets, p)
		if len(applets) > maxApplets {
			return nil, fmt.Errorf("busybox image: more than %d applets", maxApplets)
		}
	}
	if !seen["bin/sh"] {
		return nil, fmt.Errorf("busybox image: busybox has no sh applet")
	}
	return applets, nil
}

// busyboxVersion reads "v1.35.0" from the banner busybox prints; the image
// is still usable without it.
func busyboxVersion(ctx context.Context, bin string) string {
	out, _ := exec.CommandContext(ctx, bin).CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	for _, f := range strings.Fields(first) {
		if len(f) > 1 && f[0] == 'v' && f[1] >= '0' && f[1] <= '9' && len(f) < 40 {
			return strings.TrimPrefix(f, "v")
		}
	}
	return "unknown"
}

func isStaticELF(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, fmt.Errorf("not an ELF executable")
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

func mkdirExact(p string, mode os.FileMode, uid, gid int) error {
	if err := os.Mkdir(p, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

func writeFileExact(p string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
