package image

import (
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

const (
	// NameBase is the default image: Debian built from Debian packages.
	NameBase = "base"
	// NameBusybox is the small image made from busybox-static.
	NameBusybox = "busybox"
	// NameCodeInterpreter is base with numpy, pandas and matplotlib, the
	// image of E2B's code-interpreter template.
	NameCodeInterpreter = "code-interpreter"

	digestPrefix = "sha256:"
	digestHexLen = 64
	// maxRefLen bounds what is even looked at; the longest valid reference
	// is a digest (71 bytes).
	maxRefLen = 128
)

// Builtin returns the names of the images this store can build, the
// default first.
func Builtin() []string { return []string{NameBase, NameBusybox, NameCodeInterpreter} }

func isBuiltin(name string) bool {
	for _, n := range Builtin() {
		if n == name {
			return true
		}
	}
	return false
}

// Ref is a parsed image reference: exactly one of Name and Digest is set.
type Ref struct {
	Name   string
	Digest string // "sha256:<64 lowercase hex>"
}

// ParseRef checks an untrusted image reference. It accepts a builtin name or
// a full sha256 digest; anything else is an ErrInvalidArgument whose message
// can be shown to the user as is.
func ParseRef(ref string) (Ref, error) {
	if ref == "" {
		return Ref{}, errdefs.Invalid("image reference is empty")
	}
	if len(ref) > maxRefLen {
		return Ref{}, errdefs.Invalid("image reference is longer than %d bytes", maxRefLen)
	}
	if strings.Contains(ref, ":") {
		if !strings.HasPrefix(ref, digestPrefix) {
			return Ref{}, errdefs.Invalid("image digest %q: only sha256 digests are supported", printable(ref))
		}
		if !validHex(ref[len(digestPrefix):]) {
			return Ref{}, errdefs.Invalid("image digest %q: want sha256: followed by 64 lowercase hex digits", printable(ref))
		}
		return Ref{Digest: ref}, nil
	}
	if !isBuiltin(ref) {
		return Ref{}, errdefs.Invalid("unknown image %q (known: %s)", printable(ref), strings.Join(Builtin(), ", "))
	}
	return Ref{Name: ref}, nil
}

// validHex reports whether s is exactly a sha256 hex string in lower case,
// the only spelling the store writes, so one image has one digest string.
func validHex(s string) bool {
	if len(s) != digestHexLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// printable keeps a rejected input safe to echo in an error message.
func printable(s string) string {
	const max = 80
	var b strings.Builder
	for i, r := range s {
		if i >= max {
			b.WriteString("...")
			break
		}
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			b.WriteRune('?')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
