package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	"github.com/paddock-dev/paddock/proto/gen/filesystem/filesystemconnect"
)

// Bounds on ListDir, which a client could otherwise point at / with a
// huge depth.
const (
	maxListDepth   = 64
	maxListEntries = 100_000
)

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// idNames caches uid and gid names for one request.
type idNames struct {
	db     users.DB
	users  map[uint32]string
	groups map[uint32]string
	// mdLeft, when mdLimited, is what one response may still spend on
	// file metadata: a listing of many files, each with large attributes
	// set from inside the sandbox, must not become a huge message.
	mdLeft    int
	mdLimited bool
}

// maxResponseMetadata bounds the metadata in one listing or event batch;
// entries past it are reported without their metadata.
const maxResponseMetadata = 4 << 20

func (n *idNames) limitMetadata() {
	n.mdLeft, n.mdLimited = maxResponseMetadata, true
}

// metadata reads path's metadata within the response's budget.
func (n *idNames) metadata(path string) map[string]string {
	if n == nil || !n.mdLimited {
		return readMetadata(path)
	}
	if n.mdLeft <= 0 {
		return nil
	}
	md := readMetadata(path)
	for k, v := range md {
		n.mdLeft -= len(k) + len(v)
	}
	return md
}

func newIDNames(db users.DB) *idNames {
	return &idNames{db: db, users: map[uint32]string{}, groups: map[uint32]string{}}
}

func (n *idNames) user(id uint32) string {
	if s, ok := n.users[id]; ok {
		return s
	}
	s := n.db.UserName(id)
	n.users[id] = s
	return s
}

func (n *idNames) group(id uint32) string {
	if s, ok := n.groups[id]; ok {
		return s
	}
	s := n.db.GroupName(id)
	n.groups[id] = s
	return s
}

// entryInfo describes path without following a final symlink, as envd does.
func entryInfo(path string, names *idNames) (*filesystem.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, safefs.Error("stat", path, err)
	}
	return entryFromInfo(path, fi, names), nil
}

// entryFromInfo describes one entry as envd does. A symlink is described
// by its own name, size and permission string, with the absolute path it
// resolves to as its target (itself when it does not resolve), and the
// type, mode and metadata of what it points to (no type and mode 0 when
// that is missing).
func entryFromInfo(path string, fi fs.FileInfo, names *idNames) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if path == "/" {
		e.Name = "/"
	}
	mode := fi.Mode()
	if mode&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			target = path
		}
		e.SymlinkTarget = &target
		e.Mode, mode = 0, fs.ModeIrregular // what it points to is unknown
		if ti, err := os.Stat(target); err == nil {
			mode = ti.Mode()
			e.Mode = uint32(mode.Perm())
		}
	}
	switch {
	case mode.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
		e.Metadata = names.metadata(path)
	case mode.IsRegular():
		e.Type = filesystem.FileType_FILE_TYPE_FILE
		e.Metadata = names.metadata(path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && names != nil {
		e.Owner = names.user(st.Uid)
		e.Group = names.group(st.Gid)
	}
	return e
}

func (s *Service) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	_, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, reply.RPC(err)
	}
	e, err := entryInfo(path, newIDNames(s.users))
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (s *Service) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	u, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, reply.RPC(err)
	}
	// As envd: a directory (or a symlink to one) already there is
	// AlreadyExists, which the SDKs read as "not created"; anything else
	// there is a caller's mistake.
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, reply.RPC(fmt.Errorf("directory %s already exists: %w", path, errdefs.ErrConflict))
		}
		return nil, reply.RPC(errdefs.Invalid("path %s already exists but it is not a directory", path))
	}
	if err := mkdirAllOwned(path, u); err != nil {
		return nil, reply.RPC(err)
	}
	e, err := entryInfo(path, newIDNames(s.users))
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (s *Service) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	u, src, err := s.userPath(ctx, req.Msg.GetSource())
	if err != nil {
		return nil, reply.RPC(err)
	}
	dst, err := users.ResolvePath(u, req.Msg.GetDestination())
	if err != nil {
		return nil, reply.RPC(err)
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, reply.RPC(safefs.Error("move", src, err))
	}
	if err := mkdirAllOwned(filepath.Dir(dst), u); err != nil {
		return nil, reply.RPC(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, reply.RPC(safefs.Error("move", src, err))
	}
	e, err := entryInfo(dst, newIDNames(s.users))
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (s *Service) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	_, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, reply.RPC(err)
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	if depth > maxListDepth {
		return nil, reply.RPC(errdefs.Invalid("depth must be at most %d", maxListDepth))
	}
	// The directory asked for may itself be a symlink; entries below are
	// described, not followed.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, reply.RPC(safefs.Error("list", path, err))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, reply.RPC(safefs.Error("list", path, err))
	}
	if !fi.IsDir() {
		return nil, reply.RPC(errdefs.Invalid("%s is not a directory", path))
	}
	names := newIDNames(s.users)
	names.limitMetadata()
	var entries []*filesystem.EntryInfo
	var walk func(dir, shown string, level int) error
	walk = func(dir, shown string, level int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		des, err := os.ReadDir(dir)
		if err != nil {
			if level > 1 && (errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist)) {
				return nil
			}
			return safefs.Error("list", shown, err)
		}
		for _, de := range des {
			if len(entries) >= maxListEntries {
				return fmt.Errorf("more than %d entries; list a smaller tree: %w", maxListEntries, errdefs.ErrResourceExhausted)
			}
			info, err := de.Info()
			if err != nil {
				continue
			}
			p := filepath.Join(shown, de.Name())
			e := entryFromInfo(filepath.Join(dir, de.Name()), info, names)
			e.Path = p
			entries = append(entries, e)
			if de.IsDir() && level < depth {
				if err := walk(filepath.Join(dir, de.Name()), p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(real, path, 1); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&filesystem.ListDirResponse{Entries: entries}), nil
}

func (s *Service) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	_, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, reply.RPC(err)
	}
	if path == "/" {
		return nil, reply.RPC(errdefs.Invalid("refusing to remove /"))
	}
	// A path that is not there is removed already, as envd answers.
	if err := os.RemoveAll(path); err != nil {
		return nil, reply.RPC(safefs.Error("remove", path, err))
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

func (s *Service) userPath(ctx context.Context, p string) (*users.User, string, error) {
	u, err := s.userFor(ctx, "")
	if err != nil {
		return nil, "", err
	}
	path, err := users.ResolvePath(u, p)
	if err != nil {
		return nil, "", err
	}
	return u, path, nil
}
