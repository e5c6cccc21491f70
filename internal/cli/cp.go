package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/spf13/cobra"
)

var (
	errUploadEnded    = errors.New("upload ended")
	errExtractStopped = errors.New("extraction stopped")
)

func newCpCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this machine and a sandbox",
		Long: `cp copies a file or a directory tree; one side is SANDBOX:/absolute/path.

  paddock cp ./dir dev:/home/user/dir     creates /home/user/dir with the contents of ./dir
  paddock cp dev:/etc/os-release .        copies the file into the current directory
  paddock cp dev:/var/log ./logs          copies the directory tree

When DST is an existing directory or ends in '/', SRC is copied into it under
its own name. Symlinks inside a copied directory are copied as links and never
followed. A local name containing ':' is written ./name.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst, err := parseCpArgs(args[0], args[1])
			if err != nil {
				return err
			}
			c := g.client()
			if dst.sandbox != "" {
				return copyIn(cmd, c, src.path, dst)
			}
			return copyOut(cmd, c, src, dst.path)
		},
	}
}

// copyIn copies a local file or directory into a sandbox.
func copyIn(cmd *cobra.Command, c *paddock.Client, local string, dst cpArg) error {
	ctx := cmd.Context()
	abs, err := filepath.Abs(local)
	if err != nil {
		return err
	}
	// The argument itself may be a symlink: the user named it, so follow it
	// (as cp does), but nothing below it.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	target, err := remoteTarget(ctx, c, dst, filepath.Base(abs))
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		parent, name := path.Dir(target), path.Base(target)
		if target == "/" {
			parent, name = "/", ""
		}
		pr, pw := io.Pipe()
		tarErr := make(chan error, 1)
		go func() {
			err := writeTarDir(pw, real, name, cmd.ErrOrStderr())
			pw.CloseWithError(err)
			tarErr <- err
		}()
		err := c.TarIn(ctx, dst.sandbox, parent, pr)
		// Unblock the archiver when the upload ended early.
		pr.CloseWithError(errUploadEnded)
		if terr := <-tarErr; terr != nil && !errors.Is(terr, errUploadEnded) {
			return fmt.Errorf("cp: %w", terr)
		}
		return err
	case st.Mode().IsRegular():
		f, err := os.Open(real)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		defer f.Close()
		_, err = c.WriteFile(ctx, dst.sandbox, target, f, st.Mode().Perm())
		return err
	}
	return fmt.Errorf("cp: %s is not a regular file or a directory", local)
}

// remoteTarget applies cp's rule: into an existing directory (or a path
// ending in '/') under the source's name, else onto the path itself.
func remoteTarget(ctx context.Context, c *paddock.Client, dst cpArg, base string) (string, error) {
	if strings.HasSuffix(dst.path, "/") {
		return path.Join(dst.path, base), nil
	}
	p := path.Clean(dst.path)
	st, err := c.Stat(ctx, dst.sandbox, p)
	switch {
	case err == nil && st.Type == "dir":
		return path.Join(p, base), nil
	case err == nil, errors.Is(err, paddock.ErrNotFound):
		return p, nil
	}
	return "", err
}

// copyOut copies a file or directory from a sandbox to this machine; a
// DST of "-" writes a file to stdout.
func copyOut(cmd *cobra.Command, c *paddock.Client, src cpArg, local string) error {
	ctx := cmd.Context()
	st, err := c.Stat(ctx, src.sandbox, src.path)
	if err != nil {
		return err
	}
	if local == "-" {
		if st.Type == "dir" {
			return fmt.Errorf("cp: %s:%s is a directory; give a local directory to copy it to", src.sandbox, src.path)
		}
		return c.ReadFile(ctx, src.sandbox, src.path, cmd.OutOrStdout())
	}
	target := local
	if lst, err := os.Stat(local); (err == nil && lst.IsDir()) || strings.HasSuffix(local, string(filepath.Separator)) {
		base := path.Base(path.Clean(src.path))
		if base == "/" {
			base = "."
		}
		target = filepath.Join(local, base)
	}
	if st.Type == "dir" {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := extractTar(pr, target)
			// Fail the download's writes, so it ends instead of blocking.
			pr.CloseWithError(errExtractStopped)
			done <- err
		}()
		derr := c.TarOut(ctx, src.sandbox, src.path, pw)
		pw.CloseWithError(derr)
		xerr := <-done
		switch {
		case derr != nil && !errors.Is(derr, errExtractStopped):
			return derr
		case xerr != nil:
			return fmt.Errorf("cp: %w", xerr)
		}
		return nil
	}
	return downloadFile(ctx, c, src, target, os.FileMode(st.Mode)&os.ModePerm)
}

// downloadFile writes to a temporary file beside target and renames it, so
// a failed copy never leaves a truncated file under the target's name.
func downloadFile(ctx context.Context, c *paddock.Client, src cpArg, target string, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := c.ReadFile(ctx, src.sandbox, src.path, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if perm == 0 {
		perm = 0o644
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}
