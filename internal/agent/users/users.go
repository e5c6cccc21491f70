// Package users resolves the accounts of a sandbox as the agent serves
// them: names, uids and OCI image user forms against the sandbox's own
// passwd and group files (read fresh, bounded, never blocking on a planted
// pipe), and request paths against the user's home. It imports no other
// part of the agent but safefs.
package users

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// DefaultUser is the user requests run as when they name none, as in envd.
const DefaultUser = "user"

// fallbackUID is used for the default user when the image has no entry for
// it, so a bare image still runs commands unprivileged.
const fallbackUID = 1000

// Bounds on the account databases: they come from the image, which the
// sandbox's owner controls.
const (
	maxAccountFileBytes = 4 << 20
	maxAccountLine      = 64 << 10
)

// User is a resolved account inside the sandbox.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
	Home   string
	Shell  string
}

// DB resolves names against the sandbox's own passwd and group files,
// read fresh on each lookup so accounts added by a command are visible to
// the next request. No cgo: the agent binary is static.
type DB struct {
	etcDir string
}

// NewDB reads the account files in etcDir ("/etc" inside a sandbox).
func NewDB(etcDir string) DB { return DB{etcDir: etcDir} }

// EtcDir is the folder the account files are read from.
func (db DB) EtcDir() string { return db.etcDir }

// ValidName reports whether name is a user or group name a request may
// give: letters, digits and _ - . $, at most 256 bytes.
func ValidName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '_' || r == '-' || r == '.' || r == '$':
		default:
			return false
		}
	}
	return true
}

// Lookup resolves a user as a request or an image's config names it:
// "name", "uid", "name:group" or "uid:gid" (the OCI image User forms). A
// numeric uid with no passwd entry still runs, with home "/".
func (db DB) Lookup(spec string) (*User, error) {
	if spec == "" {
		spec = DefaultUser
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	if !ValidName(name) || (hasGroup && !ValidName(group)) {
		return nil, errdefs.Invalid("invalid user %q: want name, uid, name:group or uid:gid", spec)
	}
	u, err := db.findUser(name)
	if err != nil {
		return nil, err
	}
	if hasGroup {
		gid, err := db.groupID(group)
		if err != nil {
			return nil, err
		}
		u.GID = gid
	}
	groups, err := db.supplementaryGroups(u.Name, u.GID)
	if err != nil {
		return nil, err
	}
	u.Groups = groups
	return u, nil
}

func (db DB) findUser(name string) (*User, error) {
	if uid, ok := numericID(name); ok {
		u, err := db.findPasswd(func(u *User) bool { return u.UID == uid })
		if err != nil || u != nil {
			return u, err
		}
		return &User{Name: name, UID: uid, GID: uid, Home: "/"}, nil
	}
	u, err := db.findPasswd(func(u *User) bool { return u.Name == name })
	if err != nil || u != nil {
		return u, err
	}
	switch name {
	case DefaultUser:
		return &User{Name: name, UID: fallbackUID, GID: fallbackUID, Home: "/home/" + name}, nil
	case "root":
		return &User{Name: name, Home: "/root"}, nil
	}
	return nil, errdefs.NotFound("user %q does not exist in the sandbox", name)
}

// groupID resolves a group name or a numeric gid.
func (db DB) groupID(group string) (uint32, error) {
	if gid, ok := numericID(group); ok {
		return gid, nil
	}
	var gid uint32
	found := false
	err := db.readLines("group", func(f []string) bool {
		if len(f) >= 3 && f[0] == group {
			if n, ok := numericID(f[2]); ok {
				gid, found = n, true
				return false
			}
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, errdefs.NotFound("group %q does not exist in the sandbox", group)
	}
	return gid, nil
}

func numericID(s string) (uint32, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

func (db DB) readLines(file string, fn func(fields []string) bool) error {
	// Root in the sandbox may replace /etc/passwd with a pipe: opened
	// blocking, every request naming a user would hang on it.
	f, _, err := safefs.OpenRegular("read", filepath.Join(db.etcDir, file), os.O_RDONLY)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("read /etc/%s: it must be a readable regular file: %w", file, errdefs.ErrFailedPrecondition)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountFileBytes))
	sc.Buffer(make([]byte, 0, 4096), maxAccountLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || bytes.IndexByte(line, 0) >= 0 {
			continue
		}
		if !fn(strings.Split(string(line), ":")) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("parse /etc/%s: %w", file, errdefs.ErrFailedPrecondition)
	}
	return nil
}

func (db DB) findPasswd(match func(*User) bool) (*User, error) {
	var found *User
	err := db.readLines("passwd", func(f []string) bool {
		u, ok := parsePasswdFields(f)
		if ok && match(u) {
			found = u
			return false
		}
		return true
	})
	return found, err
}

// parsePasswdFields parses name:pw:uid:gid:gecos:home:shell.
func parsePasswdFields(f []string) (*User, bool) {
	if len(f) < 7 || f[0] == "" {
		return nil, false
	}
	uid, err1 := strconv.ParseUint(f[2], 10, 32)
	gid, err2 := strconv.ParseUint(f[3], 10, 32)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	home := f[5]
	if home == "" || !filepath.IsAbs(home) {
		home = "/"
	}
	return &User{Name: f[0], UID: uint32(uid), GID: uint32(gid), Home: filepath.Clean(home), Shell: f[6]}, true
}

func (db DB) supplementaryGroups(name string, primary uint32) ([]uint32, error) {
	groups := []uint32{primary}
	err := db.readLines("group", func(f []string) bool {
		if len(f) < 4 {
			return true
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || uint32(gid) == primary {
			return true
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == name {
				groups = append(groups, uint32(gid))
				break
			}
		}
		return len(groups) < 256
	})
	return groups, err
}

// UserName is the name of uid, or the number itself when none has it.
func (db DB) UserName(uid uint32) string { return db.names("passwd", uid) }

// GroupName is the name of gid, or the number itself when none has it.
func (db DB) GroupName(gid uint32) string { return db.names("group", gid) }

// names maps ids to names for EntryInfo owner and group fields.
func (db DB) names(file string, id uint32) string {
	var name string
	want := strconv.FormatUint(uint64(id), 10)
	_ = db.readLines(file, func(f []string) bool {
		if len(f) >= 3 && f[2] == want {
			name = f[0]
			return false
		}
		return true
	})
	if name == "" {
		return want
	}
	return name
}

// MaxPathLen bounds request paths (PATH_MAX).
const MaxPathLen = 4096

// ResolvePath turns a request path into a clean absolute path: relative
// paths and "~" are taken from the user's home, as envd does. The agent runs
// inside the sandbox, so the result can only name sandbox files; cleaning
// is about clear errors and predictable names, not containment.
func ResolvePath(u *User, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.Invalid("path contains a NUL byte")
	}
	if len(p) > MaxPathLen {
		return "", errdefs.Invalid("path is longer than %d bytes", MaxPathLen)
	}
	switch {
	case p == "" || p == "~":
		return u.Home, nil
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(u.Home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(u.Home, p)
	}
	return filepath.Clean(p), nil
}
