package agent

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

// userDB resolves names against the sandbox's own passwd and group files,
// read fresh on each lookup so accounts added by a command are visible to
// the next request. No cgo: the agent binary is static.
type userDB struct {
	etcDir string
}

func validUserName(name string) bool {
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

// lookup resolves a user as a request or an image's config names it:
// "name", "uid", "name:group" or "uid:gid" (the OCI image User forms). A
// numeric uid with no passwd entry still runs, with home "/".
func (db userDB) lookup(spec string) (*User, error) {
	if spec == "" {
		spec = DefaultUser
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	if !validUserName(name) || (hasGroup && !validUserName(group)) {
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

func (db userDB) findUser(name string) (*User, error) {
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
func (db userDB) groupID(group string) (uint32, error) {
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

func (db userDB) readLines(file string, fn func(fields []string) bool) error {
	// Root in the sandbox may replace /etc/passwd with a pipe: opened
	// blocking, every request naming a user would hang on it.
	f, _, err := openRegular("read", filepath.Join(db.etcDir, file), os.O_RDONLY)
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

func (db userDB) findPasswd(match func(*User) bool) (*User, error) {
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

func (db userDB) supplementaryGroups(name string, primary uint32) ([]uint32, error) {
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

// names maps ids to names for EntryInfo owner and group fields.
func (db userDB) names(file string, id uint32) string {
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
