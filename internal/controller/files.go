package controller

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// The file operations of the REST API. Each resolves the sandbox as any
// other request does (starting a stopped one, resuming a paused or
// hibernated one), checks the path and user, calls the sandbox's agent and
// records what changed files in the sandbox's ledger.

// maxFilePath bounds a path in a file operation.
const maxFilePath = 4096

// FileRef names a file in a sandbox: the sandbox (id or name), the path
// (relative paths are under the user's home) and the user the agent acts
// as ("" for the sandbox's default user).
type FileRef struct {
	Sandbox, Path, User string
}

// check validates the path and user; needPath makes an empty path an
// error.
func (f FileRef) check(needPath bool) error {
	if needPath && f.Path == "" {
		return errdefs.Invalid("the path query parameter is required")
	}
	if err := checkFilePath("path", f.Path); err != nil {
		return err
	}
	if len(f.User) > 32 || strings.ContainsAny(f.User, ":\x00/") {
		return errdefs.Invalid("user %q is not a valid user name", rules.Truncate(f.User, 40))
	}
	return nil
}

func checkFilePath(what, p string) error {
	if len(p) > maxFilePath || strings.ContainsRune(p, 0) {
		return errdefs.Invalid("%s is longer than %d bytes or contains NUL", what, maxFilePath)
	}
	return nil
}

// withFileAgent checks f and runs fn with the sandbox's agent and id.
func (c *Controller) withFileAgent(ctx context.Context, f FileRef, needPath bool, fn func(ag *client.Client, id string) error) error {
	if err := f.check(needPath); err != nil {
		return err
	}
	ag, id, done, err := c.Agent(ctx, f.Sandbox)
	if err != nil {
		return err
	}
	defer done()
	return fn(ag, id)
}

// recordFile adds a file change to the sandbox's ledger.
func (c *Controller) recordFile(ctx context.Context, id, kind, path string, data map[string]string) {
	_ = c.Record(ctx, id, api.LedgerEntry{Kind: kind, Path: path, Data: data})
}

// ReadFile writes the file's bytes to w.
func (c *Controller) ReadFile(ctx context.Context, f FileRef, w io.Writer) error {
	return c.withFileAgent(ctx, f, true, func(ag *client.Client, _ string) error {
		return ag.ReadFile(ctx, f.Path, f.User, w)
	})
}

// WriteFile replaces the file with r's bytes (mode 0: the agent's
// default) and returns what it now is.
func (c *Controller) WriteFile(ctx context.Context, f FileRef, mode os.FileMode, r io.Reader) (api.FileInfo, error) {
	if mode&^os.ModePerm != 0 {
		return api.FileInfo{}, errdefs.Invalid("mode %o: want permission bits only", mode)
	}
	var out api.FileInfo
	err := c.withFileAgent(ctx, f, true, func(ag *client.Client, id string) error {
		if err := ag.WriteFileMode(ctx, f.Path, f.User, mode, r); err != nil {
			return err
		}
		e, err := ag.Stat(ctx, f.Path, f.User)
		if err != nil {
			return err
		}
		out = toFileInfo(e)
		c.recordFile(ctx, id, api.LedgerFileWrite, f.Path, map[string]string{"size_bytes": strconv.FormatInt(e.GetSize(), 10)})
		return nil
	})
	return out, err
}

// RemoveFile removes a file or a directory tree; a missing path is
// not found (the agent, as envd, removes one without complaint).
func (c *Controller) RemoveFile(ctx context.Context, f FileRef) error {
	return c.withFileAgent(ctx, f, true, func(ag *client.Client, id string) error {
		if _, err := ag.Stat(ctx, f.Path, f.User); err != nil {
			return err
		}
		if err := ag.Remove(ctx, f.Path, f.User); err != nil {
			return err
		}
		c.recordFile(ctx, id, api.LedgerFileRemove, f.Path, nil)
		return nil
	})
}

// ListDir lists a directory ("" is the user's home).
func (c *Controller) ListDir(ctx context.Context, f FileRef) ([]api.FileInfo, error) {
	if f.Path == "" {
		f.Path = "."
	}
	out := []api.FileInfo{}
	err := c.withFileAgent(ctx, f, false, func(ag *client.Client, _ string) error {
		entries, err := ag.ListDir(ctx, f.Path, f.User)
		if err != nil {
			return err
		}
		for _, e := range entries {
			out = append(out, toFileInfo(e))
		}
		return nil
	})
	return out, err
}

// StatFile describes a file.
func (c *Controller) StatFile(ctx context.Context, f FileRef) (api.FileInfo, error) {
	var out api.FileInfo
	err := c.withFileAgent(ctx, f, true, func(ag *client.Client, _ string) error {
		e, err := ag.Stat(ctx, f.Path, f.User)
		if err == nil {
			out = toFileInfo(e)
		}
		return err
	})
	return out, err
}

// MakeDir makes a directory and its parents.
func (c *Controller) MakeDir(ctx context.Context, f FileRef) (api.FileInfo, error) {
	var out api.FileInfo
	err := c.withFileAgent(ctx, f, true, func(ag *client.Client, id string) error {
		e, err := ag.MakeDir(ctx, f.Path, f.User)
		if err != nil {
			return err
		}
		out = toFileInfo(e)
		c.recordFile(ctx, id, api.LedgerMkdir, f.Path, nil)
		return nil
	})
	return out, err
}

// MoveFile moves source to f.Path.
func (c *Controller) MoveFile(ctx context.Context, f FileRef, source string) (api.FileInfo, error) {
	if source == "" || f.Path == "" {
		return api.FileInfo{}, errdefs.Invalid("source and destination are required")
	}
	if err := checkFilePath("source", source); err != nil {
		return api.FileInfo{}, err
	}
	var out api.FileInfo
	err := c.withFileAgent(ctx, f, true, func(ag *client.Client, id string) error {
		e, err := ag.Move(ctx, source, f.Path, f.User)
		if err != nil {
			return err
		}
		out = toFileInfo(e)
		c.recordFile(ctx, id, api.LedgerFileMove, f.Path, map[string]string{"source": source})
		return nil
	})
	return out, err
}

// TarOut writes a tar of the path to w.
func (c *Controller) TarOut(ctx context.Context, f FileRef, w io.Writer) error {
	return c.withFileAgent(ctx, f, true, func(ag *client.Client, _ string) error {
		return ag.TarOut(ctx, f.Path, f.User, w)
	})
}

// TarIn extracts the tar r into the path.
func (c *Controller) TarIn(ctx context.Context, f FileRef, r io.Reader) error {
	return c.withFileAgent(ctx, f, true, func(ag *client.Client, id string) error {
		if err := ag.TarIn(ctx, f.Path, f.User, r); err != nil {
			return err
		}
		c.recordFile(ctx, id, api.LedgerTarUpload, f.Path, nil)
		return nil
	})
}
