package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Bounds on what goes back to the model. A model's context is the scarce
// resource here: every byte returned costs it, so results are cut early
// and say how to get the rest.
const (
	// maxStreamHead and maxStreamTail keep the start and the end of a
	// command's output stream; the end usually holds the error.
	maxStreamHead = 4 << 10
	maxStreamTail = 12 << 10
	// maxReadBytes bounds a file download for read_file and edit_file.
	maxReadBytes = 8 << 20
	// maxReadChars bounds the text read_file returns.
	maxReadChars = 64 << 10
	// maxLineChars cuts single long lines (minified code, data).
	maxLineChars = 2000
	// maxWriteBytes bounds write_file's content (it also travels in one
	// JSON-RPC message).
	maxWriteBytes = 2 << 20
	// maxListEntries bounds list_dir and sandbox_list.
	maxListEntries = 500
)

// headTail keeps the first head bytes and the last tail bytes written to
// it, counting the rest, so a command printing gigabytes costs the server
// a fixed amount of memory.
type headTail struct {
	head, tail int
	h          []byte
	t          []byte // ring of the most recent bytes, rebuilt on String
	total      int64
}

func newHeadTail(head, tail int) *headTail { return &headTail{head: head, tail: tail} }

func (b *headTail) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if room := b.head - len(b.h); room > 0 {
		k := min(room, len(p))
		b.h = append(b.h, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) > b.tail {
		p = p[len(p)-b.tail:]
	}
	b.t = append(b.t, p...)
	if len(b.t) > 2*b.tail {
		// Compact only now and then, so small writes stay cheap.
		b.t = append(b.t[:0], b.t[len(b.t)-b.tail:]...)
	}
	return n, nil
}

func (b *headTail) kept() []byte {
	if len(b.t) > b.tail {
		return b.t[len(b.t)-b.tail:]
	}
	return b.t
}

// truncated reports whether bytes were dropped.
func (b *headTail) truncated() bool { return b.total > int64(len(b.h)+len(b.kept())) }

// text returns what was kept, with a marker where bytes were dropped.
func (b *headTail) text(hint string) string {
	t := b.kept()
	if !b.truncated() {
		return validUTF8(string(b.h) + string(t))
	}
	dropped := b.total - int64(len(b.h)+len(t))
	return validUTF8(string(b.h)) + fmt.Sprintf("\n[... %d bytes omitted; %s ...]\n", dropped, hint) + validUTF8(string(t))
}

// validUTF8 makes bytes safe to put in a JSON string for a model: invalid
// sequences (binary output, a cut multi-byte rune) become U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// limitWriter fails once more than n bytes are written, so a download can
// be stopped early instead of filling memory.
type limitWriter struct {
	buf bytes.Buffer
	n   int
}

var errTooLarge = errors.New("file too large")

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errTooLarge
	}
	return w.buf.Write(p)
}

// lineRange is one window of a text file.
type lineRange struct {
	text       string
	start, end int // 1-based, inclusive; end < start when empty
	total      int
	cutLines   int  // lines shortened to maxLineChars
	truncated  bool // the window stopped early at maxReadChars
}

// sliceLines returns lines [offset, offset+limit) of data (1-based offset),
// stopping early when the text would exceed maxChars.
func sliceLines(data string, offset, limit, maxChars int) lineRange {
	if offset < 1 {
		offset = 1
	}
	lines := strings.SplitAfter(data, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	r := lineRange{total: len(lines), start: offset, end: offset - 1}
	var b strings.Builder
	for i := offset - 1; i < len(lines) && (limit <= 0 || i < offset-1+limit); i++ {
		l := lines[i]
		if len(l) > maxLineChars {
			l = cutRunes(l, maxLineChars) + fmt.Sprintf("[... line cut at %d characters]\n", maxLineChars)
			r.cutLines++
		}
		if b.Len()+len(l) > maxChars && b.Len() > 0 {
			r.truncated = true
			break
		}
		b.WriteString(l)
		r.end = i + 1
	}
	r.text = validUTF8(b.String())
	return r
}

// cutRunes cuts s to at most n bytes without splitting a rune.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// checkRef refuses sandbox references the API could never accept, with a
// message the model can act on.
func checkRef(s string) error {
	if len(s) > 128 || strings.ContainsAny(s, "/\x00 \n") {
		return fmt.Errorf("sandbox %q is not a sandbox id or name; use sandbox_list to see them, or leave sandbox empty for this session's default", cutRunes(s, 64))
	}
	return nil
}

// checkPath refuses paths that are empty or carry bytes no file system
// takes; everything else is the sandbox's business to resolve.
func checkPath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s is empty; give an absolute path or one relative to /home/user", what)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%s contains a NUL byte", what)
	case len(p) > 4096:
		return fmt.Errorf("%s is too long (%d bytes, at most 4096)", what, len(p))
	}
	return nil
}

// toolError turns an SDK error into a message a model can act on: what
// failed, the daemon's words, and what to do next.
func toolError(what string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, context.Canceled):
		hint = "the call was cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, paddock.ErrDeadlineExceeded):
		hint = "it took too long: do less per call or raise timeout_seconds"
	case errors.Is(err, paddock.ErrNotFound):
		hint = "check the sandbox with sandbox_list, or the path with list_dir or find"
	case errors.Is(err, paddock.ErrInvalidArgument):
		hint = "fix the argument and call again"
	case errors.Is(err, paddock.ErrResourceExhausted):
		hint = "ask for less, or destroy sandboxes you no longer need (sandbox_list, sandbox_destroy)"
	case errors.Is(err, paddock.ErrConflict):
		hint = "the sandbox's state does not allow this now; see its state with sandbox_list"
	case errors.Is(err, paddock.ErrFailedPrecondition):
		hint = "a precondition is not met; if it is the daemon's configuration, tell the user"
	case errors.Is(err, paddock.ErrUnauthenticated), errors.Is(err, paddock.ErrPermissionDenied):
		hint = "the MCP server's credentials for the Paddock daemon are missing or wrong; the user must fix its configuration"
	case errors.Is(err, paddock.ErrUnavailable):
		hint = "the Paddock daemon or the sandbox did not answer; retry in a few seconds"
	}
	if hint == "" {
		return fmt.Errorf("%s: %v", what, err)
	}
	return fmt.Errorf("%s: %v (%s)", what, err, hint)
}
