// Package rules holds the shapes that names, durations and commands in
// requests must have, and how an error message quotes what a caller sent.
// The controller's core and the packages beside and beneath it (admission,
// processes) share them, so every kind of object is named and bounded the
// same way. It imports nothing of Paddock's but its error kinds, the API's
// types and the agent's contract (the prefix of the agent's own variables).
package rules

import (
	"crypto/rand"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

var nameRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ValidName says whether s may name an object (a sandbox, template,
// pool, snapshot, ...): 1 to 63 letters, digits, '_', '.' or '-', not
// starting with a punctuation mark.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// MaxDuration bounds every duration a request gives.
const MaxDuration = 365 * 24 * time.Hour

// ParseDuration parses an optional Go duration ("" is 0) for the request
// field named field, bounded to [min, MaxDuration].
func ParseDuration(field, s string, min time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errdefs.Invalid("%s %q is not a duration (use e.g. 90s, 10m, 2h)", field, Truncate(s, 64))
	}
	if d < min || d > MaxDuration {
		return 0, errdefs.Invalid("%s %s is out of range (%s to 8760h)", field, d, min)
	}
	return d, nil
}

// Truncate cuts s to at most n bytes (and "...") for an error message.
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// RandomID returns n random characters of [a-z0-9]: the alphabet of
// sandbox ids, valid as a hostname, a path element and an E2B id.
func RandomID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// DefaultTag is the tag of a template's plain name: "py" and
// "py:default" are the same template.
const DefaultTag = "default"

// TemplateRef checks a template's name, which may carry a tag after a
// colon ("py:v2"; both parts as ValidName), and returns it canonical:
// the default tag is left out.
func TemplateRef(s string) (string, bool) {
	name, tag, tagged := strings.Cut(s, ":")
	if !ValidName(name) || tagged && !ValidName(tag) {
		return "", false
	}
	return TemplateName(name, tag), true
}

// TemplateName is the template that name's tag names: name itself for
// the default tag (or none).
func TemplateName(name, tag string) string {
	if tag == "" || tag == DefaultTag {
		return name
	}
	return name + ":" + tag
}

// SplitTemplateTag splits a canonical template name into its name and
// its tag (DefaultTag when it has none).
func SplitTemplateTag(s string) (name, tag string) {
	name, tag, tagged := strings.Cut(s, ":")
	if !tagged {
		tag = DefaultTag
	}
	return name, tag
}

// TemplateTags checks tags given to one build (each a tag alone, as
// ValidName; at most api.MaxTemplateTags) and returns them without
// repeats, in the order given.
func TemplateTags(tags []string) ([]string, error) {
	if len(tags) == 0 {
		return nil, errdefs.Invalid("no tags given")
	}
	if len(tags) > api.MaxTemplateTags {
		return nil, errdefs.Invalid("%d tags at once, at most %d", len(tags), api.MaxTemplateTags)
	}
	var out []string
	for _, t := range tags {
		if !ValidName(t) {
			return nil, errdefs.Invalid("tag %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit (the tag alone, not name:tag)", Truncate(t, 80))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}
