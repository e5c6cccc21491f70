// Package lazyre defers compiling a regular expression to its first use.
//
// Every process that links a package pays for its package-level
// regexp.MustCompile calls at start, and the CLI links the daemon's
// validators: counted repetitions such as {0,255} expand into thousands of
// instructions. A short-lived `paddock` command that never validates a
// name should not pay for compiling the pattern.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on first use. A bad pattern
// panics on that first use, as regexp.MustCompile would at start; each
// pattern's package tests exercise it.
type Regexp struct {
	once sync.Once
	expr string
	re   *regexp.Regexp
}

// New returns a Regexp for expr without compiling it.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

func (r *Regexp) get() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// MatchString reports whether s contains a match of the expression.
func (r *Regexp) MatchString(s string) bool { return r.get().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.get().FindStringSubmatch(s) }

// String returns the source text of the expression.
func (r *Regexp) String() string { return r.expr }
