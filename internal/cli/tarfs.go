package cli

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// writeTarDir archives the tree at dir, naming entries prefix/<relative
// path> (or just the relative path when prefix is empty). Symlinks are
// archived as links and never followed, and files are opened through an
// os.Root, so nothing outside dir is read even if the tree changes while it
// is walked. Sockets, devices and pipes are skipped with a warning.
func writeTarDir(w io.Writer, dir, prefix string, warn io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := prefix
		if rel != "." {
			name = path.Join(prefix, rel)
		}
		if name == "" {
			return nil // the root itself, extracted onto an existing directory
		}
		info, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		var link string
		switch mode := info.Mode(); {
		case mode.IsDir(), mode.IsRegular():
		case mode&fs.ModeSymlink != 0:
			if link, err = root.Readlink(rel); err != nil {
				return err
			}
		default:
			fmt.Fprintf(warn, "paddock: cp: skipping %s: not a file, directory or symlink\n", filepath.Join(dir, rel))
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if info.IsDir() {
			hdr.Name += "/"
		}
		// Local owners mean nothing inside the sandbox; the daemon decides.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		return copyRegular(tw, root, rel, hdr.Size)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func copyRegular(w io.Writer, root *os.Root, rel string, size int64) error {
	f, err := root.OpenFile(rel, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(w, f, size)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s shrank while being copied (%d of %d bytes)", rel, n, size)
		}
		return err
	}
	return nil
}

// extractTar unpacks an archive from a sandbox (untrusted) into dir. Every
// name must stay inside dir; all writes go through an os.Root, which also
// refuses to follow any symlink, including ones the archive itself made,
// out of dir. Modes keep only permission bits; owners are not restored.
func extractTar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name, ok := cleanTarName(hdr.Name)
		if !ok {
			return fmt.Errorf("archive entry %q: unsafe name", hdr.Name)
		}
		if name == "." {
			continue
		}
		if err := extractEntry(root, tr, hdr, name); err != nil {
			return fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
	}
}

// cleanTarName makes an archive name relative and refuses any that would
// climb out of the target directory.
func cleanTarName(n string) (string, bool) {
	if n == "" || strings.ContainsRune(n, 0) || strings.Contains(n, `\`) {
		return "", false
	}
	c := path.Clean(strings.TrimLeft(n, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	if c == "" {
		c = "."
	}
	return c, true
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string) error {
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err := root.Mkdir(name, perm|0o700)
		if errors.Is(err, fs.ErrExist) {
			if st, serr := root.Lstat(name); serr == nil && st.IsDir() {
				return nil
			}
		}
		return err
	case tar.TypeReg:
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, perm)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		return root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		target, ok := cleanTarName(hdr.Linkname)
		if !ok || target == "." {
			return fmt.Errorf("unsafe hard link target %q", hdr.Linkname)
		}
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		return root.Link(target, name)
	default:
		// Devices, pipes and the like are not made on the client; the
		// rest of the archive is still useful.
		return nil
	}
}

// removeNonDir clears the way for a new file, so that writing it never
// goes through an existing symlink or into another file's inode.
func removeNonDir(root *os.Root, name string) error {
	st, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("a directory is in the way")
	}
	return root.Remove(name)
}
