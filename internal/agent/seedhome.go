package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Kubernetes pod's home directory is a volume mounted over the image's,
// which hides what the image holds there (a template's build steps'
// files). A container run before the agent's (an init container of the
// same image, the volume mounted elsewhere) copies the image's home into
// the volume while the volume is fresh: SeedHome.

// seedWork is the directory a seed is copied into inside the volume
// before its entries are moved into place, so that a copy cut short is
// found and done again rather than taken for the sandbox's own files.
const seedWork = ".paddock-seeding"

// SeedHome copies the directory tree from (where it leads, if a symlink)
// into the directory to, when to holds nothing yet (besides a
// filesystem's lost+found and a seed cut short), and reports whether it
// did. Directories, regular files and symlinks are copied with their
// owners, permission bits and times; symlinks within the tree are copied,
// never followed; other kinds of file (devices, sockets, fifos) are left
// out and counted in skipped; a file linked twice is copied twice.
func SeedHome(from, to string) (seeded bool, skipped int, err error) {
	if !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return false, 0, fmt.Errorf("seed home: %s and %s must be absolute paths", from, to)
	}
	// An image whose home is a symlink has its home where the link
	// leads, in the image's own tree (where the volume is mounted too).
	if resolved, err := filepath.EvalSymlinks(from); err == nil {
		from = resolved
	}
	st, err := os.Lstat(from)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil // nothing to seed
	}
	if err != nil {
		return false, 0, fmt.Errorf("seed home: %w", err)
	}
	if !st.IsDir() {
		return false, 0, fmt.Errorf("seed home: %s is not a directory", from)
	}
	entries, err := os.ReadDir(to)
	if err != nil {
		return false, 0, fmt.Errorf("seed home: %w", err)
	}
	for _, e := range entries {
		if e.Name() != "lost+found" && e.Name() != seedWork {
			return false, 0, nil // the sandbox's own files
		}
	}
	work := filepath.Join(to, seedWork)
	if err := os.RemoveAll(work); err != nil {
		return false, 0, fmt.Errorf("seed home: clear a seed cut short: %w", err)
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return false, 0, fmt.Errorf("seed home: %w", err)
	}
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		ok, err := copyEntry(p, filepath.Join(work, rel))
		if !ok {
			skipped++
		}
		return err
	})
	if err != nil {
		return false, skipped, fmt.Errorf("seed home: %w", err)
	}
	// Directories' times last: writing into one changes its own.
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == from {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		return copyTimes(p, filepath.Join(work, rel))
	})
	if err != nil {
		return false, skipped, fmt.Errorf("seed home: %w", err)
	}
	moved, err := os.ReadDir(work)
	if err != nil {
		return false, skipped, fmt.Errorf("seed home: %w", err)
	}
	for _, e := range moved {
		if err := os.Rename(filepath.Join(work, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return false, skipped, fmt.Errorf("seed home: %w", err)
		}
	}
	if err := os.Remove(work); err != nil {
		return false, skipped, fmt.Errorf("seed home: %w", err)
	}
	return true, skipped, nil
}

// copyEntry copies one directory, regular file or symlink src to dst,
// which does not exist, with src's owner and permission bits (and times,
// but for a directory's). ok is false for any other kind of file, which
// is not copied.
func copyEntry(src, dst string) (ok bool, err error) {
	st, err := os.Lstat(src)
	if err != nil {
		return false, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false, fmt.Errorf("%s: no owner to copy", src)
	}
	uid, gid := int(sys.Uid), int(sys.Gid)
	mode := st.Mode()
	switch {
	case mode.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return false, err
		}
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return false, err
		}
		if err := os.Symlink(target, dst); err != nil {
			return false, err
		}
		if err := os.Lchown(dst, uid, gid); err != nil {
			return false, err
		}
		return true, copyTimes(src, dst)
	case mode.IsRegular():
		if err := copyFile(src, dst); err != nil {
			return false, err
		}
	default:
		return false, nil
	}
	if err := os.Lchown(dst, uid, gid); err != nil {
		return false, err
	}
	// After the chown, which clears setuid and setgid bits.
	if err := os.Chmod(dst, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return false, err
	}
	if mode.IsDir() {
		return true, nil
	}
	return true, copyTimes(src, dst)
}

// copyFile copies the content of the regular file src to the new file
// dst, neither followed if a symlink.
func copyFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyTimes gives dst src's access and modification times, neither
// followed if a symlink.
func copyTimes(src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// parseSeedHome splits the --seed-home flag's FROM:TO.
func parseSeedHome(v string) (from, to string, err error) {
	from, to, ok := strings.Cut(v, ":")
	if !ok || !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return "", "", fmt.Errorf("--seed-home %q: want FROM:TO, two absolute paths", v)
	}
	return filepath.Clean(from), filepath.Clean(to), nil
}

// SeedHomeCommand is `paddock agent --seed-home FROM:TO`: SeedHome, with
// what it did written to log.
func SeedHomeCommand(v string, log io.Writer) error {
	from, to, err := parseSeedHome(v)
	if err != nil {
		return err
	}
	seeded, skipped, err := SeedHome(from, to)
	if err != nil {
		return err
	}
	switch {
	case seeded:
		fmt.Fprintf(log, "seed home: copied %s into %s (%d special files left out)\n", from, to, skipped)
	default:
		fmt.Fprintf(log, "seed home: %s already holds files, or %s is absent: nothing copied\n", to, from)
	}
	return nil
}
