package files

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// File metadata (envd 0.6.2): an upload's X-Metadata-<key> headers become
// user.e2b.<key> extended attributes on the file, and every EntryInfo
// reports them back. Keeping them in xattrs, as envd does, means they
// travel with the file through renames, snapshots and tar exports that
// keep xattrs, and that metadata set from inside the sandbox (setfattr)
// shows up too.
const (
	metadataHeaderPrefix = "X-Metadata-"
	metadataXattrPrefix  = "user.e2b."
	// maxMetadataKey is the kernel's 255-byte xattr name limit less the
	// namespace prefix.
	maxMetadataKey = 255 - len(metadataXattrPrefix)
	// maxMetadataTotal bounds one file's metadata (prefixed keys plus
	// values), which also bounds the number of keys (at most 409). It stays
	// well inside ext4's per-inode xattr space.
	maxMetadataTotal = 4096
	// maxMetadataRead bounds what is read back per file: attributes set
	// out-of-band may exceed the upload limits, and a listing must not
	// balloon because of them.
	maxMetadataRead = 64 << 10
)

// errNoXattr reports a file system without user extended attributes.
var errNoXattr = errors.New("file system does not support extended attributes")

// parseMetadataHeaders collects the X-Metadata-* headers of an upload. Keys
// are lowercased; if a key appears more than once, the first value counts.
// A nil map with a nil error means the upload carries no metadata.
func parseMetadataHeaders(h http.Header) (map[string]string, error) {
	names := make([]string, 0, len(h))
	for name := range h {
		if len(name) > len(metadataHeaderPrefix) && strings.EqualFold(name[:len(metadataHeaderPrefix)], metadataHeaderPrefix) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	// Header maps have no order; sorting makes "first" deterministic when
	// two spellings of one key arrive uncanonicalized.
	sort.Strings(names)
	md := make(map[string]string, len(names))
	total := 0
	for _, name := range names {
		key := strings.ToLower(name[len(metadataHeaderPrefix):])
		if _, dup := md[key]; dup {
			continue
		}
		vals := h[name]
		if len(vals) == 0 {
			continue
		}
		val := vals[0]
		if !validMetadataKey(key) {
			return nil, errdefs.Invalid("metadata key %q must use only HTTP token characters", truncateForMessage(key))
		}
		if len(key) > maxMetadataKey {
			return nil, errdefs.Invalid("metadata key %q is longer than %d bytes", truncateForMessage(key), maxMetadataKey)
		}
		if !printableASCII(val) {
			return nil, errdefs.Invalid("metadata value for key %q must be printable US-ASCII", truncateForMessage(key))
		}
		total += len(metadataXattrPrefix) + len(key) + len(val)
		if total > maxMetadataTotal {
			return nil, errdefs.Invalid("file metadata is larger than %d bytes (keys with the %q prefix plus values)", maxMetadataTotal, metadataXattrPrefix)
		}
		md[key] = val
	}
	if len(md) == 0 {
		return nil, nil
	}
	return md, nil
}

func validMetadataKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func truncateForMessage(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// setMetadata makes md the file's whole metadata: keys it had but md lacks
// are removed, so an upload without metadata clears it. It works on the
// open descriptor, so a path swapped for a symlink meanwhile is not
// followed.
func setMetadata(f *os.File, md map[string]string) error {
	fd := int(f.Fd())
	old, err := listMetadataNames(func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) })
	if err != nil {
		if errors.Is(err, errNoXattr) && len(md) == 0 {
			return nil // nothing to clear where nothing can be stored
		}
		return err
	}
	for _, name := range old {
		if _, keep := md[name[len(metadataXattrPrefix):]]; keep {
			continue
		}
		if err := unix.Fremovexattr(fd, name); err != nil && !errors.Is(err, unix.ENODATA) {
			return xattrError(err)
		}
	}
	for k, v := range md {
		if err := unix.Fsetxattr(fd, metadataXattrPrefix+k, []byte(v), 0); err != nil {
			return xattrError(err)
		}
	}
	return nil
}

func xattrError(err error) error {
	switch {
	case errors.Is(err, unix.ENOTSUP):
		return fmt.Errorf("cannot store file metadata: %w: %w", errNoXattr, errdefs.ErrFailedPrecondition)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.E2BIG):
		return fmt.Errorf("no room for the file metadata: %w", errdefs.ErrResourceExhausted)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("not allowed to set file metadata: %w", errdefs.ErrPermissionDenied)
	}
	return fmt.Errorf("set file metadata: %v", err)
}

// listMetadataNames returns the user.e2b.* attribute names that list
// reports, sized in one call for the common case and bounded always.
func listMetadataNames(list func([]byte) (int, error)) ([]string, error) {
	var small [1024]byte
	buf := small[:]
	n, err := list(buf)
	if errors.Is(err, unix.ERANGE) {
		size, serr := list(nil)
		if serr != nil {
			err = serr
		} else {
			if size > maxMetadataRead {
				size = maxMetadataRead
			}
			buf = make([]byte, size)
			n, err = list(buf)
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, errNoXattr
		}
		return nil, fmt.Errorf("list file metadata: %v", err)
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if len(name) > len(metadataXattrPrefix) && strings.HasPrefix(name, metadataXattrPrefix) {
			names = append(names, name)
		}
	}
	return names, nil
}

// readMetadata returns path's metadata without following a final symlink,
// or nil if it has none or it cannot be read: stat and list answer even on
// file systems without xattrs. Names and values that are not UTF-8 are
// skipped because protobuf strings must be UTF-8.
func readMetadata(path string) map[string]string {
	names, err := listMetadataNames(func(buf []byte) (int, error) { return unix.Llistxattr(path, buf) })
	if err != nil || len(names) == 0 {
		return nil
	}
	md := make(map[string]string, len(names))
	budget := maxMetadataRead
	var small [256]byte
	for _, name := range names {
		key := name[len(metadataXattrPrefix):]
		if !utf8.ValidString(key) {
			continue
		}
		buf := small[:]
		n, err := unix.Lgetxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			size, serr := unix.Lgetxattr(path, name, nil)
			if serr != nil || size > budget {
				continue
			}
			buf = make([]byte, size)
			n, err = unix.Lgetxattr(path, name, buf)
		}
		if err != nil || n > budget {
			continue
		}
		val := string(buf[:n])
		if !utf8.ValidString(val) {
			continue
		}
		budget -= len(name) + n
		md[key] = val
	}
	if len(md) == 0 {
		return nil
	}
	return md
}
