// Package shellquote quotes words for a POSIX shell. It imports nothing,
// so the agent (which runs inside every sandbox) and the daemon's packages
// share it.
package shellquote

import "strings"

// Quote returns s as one single-quoted shell word, whatever it holds.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Word returns s as one shell word: as it is when it holds only
// characters no shell treats specially, else quoted (Quote).
func Word(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,+@%", r))
	}) < 0 {
		return s
	}
	return Quote(s)
}
