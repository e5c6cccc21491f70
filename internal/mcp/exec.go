package mcp

import (
	"context"
	"errors"
	"fmt"
	"github.com/paddock-dev/paddock/api"
	"strconv"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Exec bounds.
const (
	defaultExecTimeout = 120 * time.Second
	maxExecTimeout     = 30 * time.Minute
	maxCommandBytes    = 64 << 10
	maxStdinBytes      = 1 << 20
	// searchTimeout bounds find and grep: a search that needs longer
	// should be narrowed, not waited for.
	searchTimeout = 60 * time.Second
)

// ExecInput is exec's input.
type ExecInput struct {
	Sandbox        string            `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Command        string            `json:"command" jsonschema:"shell command line, run with /bin/sh -c (pipes, && and redirections work)"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory; default /home/user"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command only"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds; default 120, at most 1800"`
	User           string            `json:"user,omitempty" jsonschema:"user (default, uid 1000) or root"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text fed to the command's standard input (at most 1 MiB)"`
	Session        string            `json:"session,omitempty" jsonschema:"run in this persistent shell session (created on first use; 'default' always exists): cd, exported variables and shell functions persist between calls; cwd, env and stdin cannot be combined with it"`
}

// ExecOutput is exec's output.
type ExecOutput struct {
	ExitCode int    `json:"exit_code" jsonschema:"the command's exit status; -1 when a signal killed it; 127 command not found"`
	Signal   string `json:"signal,omitempty" jsonschema:"the signal that killed the command, if one did"`
	TimedOut bool   `json:"timed_out,omitempty" jsonschema:"true when timeout_seconds ran out and the command was killed"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated is true when stdout or stderr was cut in the middle.
	Truncated bool   `json:"truncated,omitempty" jsonschema:"true when output was cut; the start and end are kept"`
	Sandbox   string `json:"sandbox" jsonschema:"the sandbox the command ran in"`
}

// FindInput is find's input.
type FindInput struct {
	Sandbox    string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Pattern    string `json:"pattern" jsonschema:"glob matched against file names (*.py, test_*); with a '/' it is matched against the path below path, and * then also matches '/' (src/*.go matches src/a/b.go)"`
	Path       string `json:"path,omitempty" jsonschema:"directory to search; default /home/user"`
	Type       string `json:"type,omitempty" jsonschema:"f for files only, d for directories only; default both"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"stop after this many paths; default 200, at most 2000"`
}

// FindOutput is find's output.
type FindOutput struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated,omitempty" jsonschema:"true when there were more matches than max_results"`
	Note      string   `json:"note,omitempty"`
}

// GrepInput is grep's input.
type GrepInput struct {
	Sandbox     string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Pattern     string `json:"pattern" jsonschema:"POSIX extended regular expression (grep -E syntax, e.g. def [a-z_]+\\(), matched line by line"`
	Path        string `json:"path,omitempty" jsonschema:"file or directory to search, recursively; default /home/user"`
	Glob        string `json:"glob,omitempty" jsonschema:"only search files whose name matches this glob, e.g. *.py"`
	IgnoreCase  bool   `json:"ignore_case,omitempty"`
	FixedString bool   `json:"fixed_string,omitempty" jsonschema:"treat pattern as a literal string, not a regexp"`
	MaxMatches  int    `json:"max_matches,omitempty" jsonschema:"stop after this many matching lines; default 100, at most 1000"`
}

// GrepMatch is one matching line.
type GrepMatch struct {
	File string `json:"file"`
	Line int    `json:"line" jsonschema:"1-based line number, for read_file's offset"`
	Text string `json:"text" jsonschema:"the line, cut at 300 characters"`
}

// GrepOutput is grep's output.
type GrepOutput struct {
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated,omitempty" jsonschema:"true when there were more matches than max_matches"`
	Note      string      `json:"note,omitempty"`
}

func (s *Server) addExecTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "exec",
		Title: "Run a command",
		Description: `Run a shell command in a sandbox and wait for it to end; returns its exit code, stdout and stderr.
Costs a few milliseconds plus the command's own run time; it is killed after timeout_seconds (default 120).
Each call is a fresh shell: cd and exported variables do not carry over (use cwd and env, or chain with &&). Files persist between calls.
Output is bounded: the first 4 KiB and last 12 KiB of each stream are kept. For long output, redirect it to a file and use read_file or grep on it.
Prefer read_file/write_file/edit_file over cat, echo and sed for files, and grep/find over their shell equivalents: their results are structured and bounded.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.exec)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "find",
		Title: "Find files by name",
		Description: `Find files and directories whose names match a glob, searching recursively inside the sandbox. Cheap for project-sized trees; bounded by max_results and a 60 s limit.
Use it to locate files before read_file; use grep to search file contents.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.find)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "grep",
		Title: "Search file contents",
		Description: `Search files for lines matching a regular expression, recursively, inside the sandbox. Returns file, line number and line text for each match (binary files are skipped).
Bounded by max_matches (default 100) and a 60 s limit; narrow path or glob when a result is truncated. Use the line numbers with read_file's offset to see the context.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.grep)
}

func (s *Server) exec(ctx context.Context, req *mcpsdk.CallToolRequest, in ExecInput) (*mcpsdk.CallToolResult, ExecOutput, error) {
	switch {
	case strings.TrimSpace(in.Command) == "":
		return nil, ExecOutput{}, errors.New("command is empty; give a shell command line, e.g. python3 main.py")
	case len(in.Command) > maxCommandBytes:
		return nil, ExecOutput{}, fmt.Errorf("command is %d bytes, at most %d; write a script with write_file and run it", len(in.Command), maxCommandBytes)
	case len(in.Stdin) > maxStdinBytes:
		return nil, ExecOutput{}, fmt.Errorf("stdin is %d bytes, at most %d; write the data with write_file and redirect it", len(in.Stdin), maxStdinBytes)
	case in.TimeoutSeconds < 0 || time.Duration(in.TimeoutSeconds)*time.Second > maxExecTimeout:
		return nil, ExecOutput{}, fmt.Errorf("timeout_seconds %d: want 1 to %d", in.TimeoutSeconds, int(maxExecTimeout.Seconds()))
	}
	switch in.User {
	case "", "user", "root":
	default:
		return nil, ExecOutput{}, fmt.Errorf("user %q: want user or root", in.User)
	}
	timeout := defaultExecTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ExecOutput{}, err
	}
	stdout, stderr := newHeadTail(maxStreamHead, maxStreamTail), newHeadTail(maxStreamHead, maxStreamTail)
	opts := paddock.ExecOptions{Cmd: []string{"/bin/sh", "-c", in.Command}, Cwd: in.Cwd, Env: in.Env, User: in.User,
		Timeout: timeout, Stdout: stdout, Stderr: stderr}
	if in.Stdin != "" {
		opts.Stdin = strings.NewReader(in.Stdin)
	}
	if in.Session != "" {
		if in.Cwd != "" || len(in.Env) > 0 || in.Stdin != "" {
			return nil, ExecOutput{}, errors.New("cwd, env and stdin cannot be combined with session: use cd and export inside the session instead")
		}
		if err := s.ensureSession(ctx, id, in.Session, in.User); err != nil {
			return nil, ExecOutput{}, err
		}
		// A session runs shell text in its own shell, so the command line
		// goes as it is rather than through another sh -c.
		opts.Cmd, opts.Session, opts.User = []string{in.Command}, in.Session, ""
	}
	res, err := s.c.Exec(ctx, id, opts)
	if err != nil {
		return nil, ExecOutput{}, toolError("exec failed (the command's outcome is unknown)", err)
	}
	const hint = "redirect the output to a file and read it with read_file or grep"
	out := ExecOutput{ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		Stdout: stdout.text(hint), Stderr: stderr.text(hint), Truncated: stdout.truncated() || stderr.truncated(), Sandbox: id}
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: execText(out, timeout)}}}, out, nil
}

// ensureSession creates a named session on first use; "default" exists
// in every sandbox already.
func (s *Server) ensureSession(ctx context.Context, id, name, user string) error {
	if name == "default" {
		return nil
	}
	_, err := s.c.CreateSession(ctx, id, api.CreateSessionRequest{Name: name, User: user})
	if err != nil && !errors.Is(err, paddock.ErrConflict) {
		return toolError("could not create session "+name, err)
	}
	return nil
}

// execText is the human-readable form of an exec result, for clients that
// show content rather than structured output.
func execText(o ExecOutput, timeout time.Duration) string {
	var b strings.Builder
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "timed out after %s and was killed\n", timeout)
	case o.Signal != "":
		fmt.Fprintf(&b, "killed by %s\n", o.Signal)
	default:
		fmt.Fprintf(&b, "exit code %d\n", o.ExitCode)
	}
	if o.Stdout != "" {
		b.WriteString("--- stdout\n" + o.Stdout)
		if !strings.HasSuffix(o.Stdout, "\n") {
			b.WriteString("\n")
		}
	}
	if o.Stderr != "" {
		b.WriteString("--- stderr\n" + o.Stderr)
	}
	return b.String()
}

// findScript lists matches NUL-free, one per line, and stops at the limit
// by closing the pipe; arguments arrive as positional parameters, never
// spliced into the script, so no pattern can inject shell syntax.
const findScript = `root=$1; pat=$2; typ=$3; max=$4
pre=$root; [ "$root" = / ] && pre=
set -- "$root"
case "$pat" in
  */*) set -- "$@" -path "$pre/$pat" ;;
  *)   set -- "$@" -name "$pat" ;;
esac
if [ -n "$typ" ]; then set -- "$@" -type "$typ"; fi
find "$@" 2>/dev/null | head -n "$max"`

func (s *Server) find(ctx context.Context, req *mcpsdk.CallToolRequest, in FindInput) (*mcpsdk.CallToolResult, FindOutput, error) {
	if in.Pattern == "" || len(in.Pattern) > 1024 || strings.ContainsAny(in.Pattern, "\x00\n") {
		return nil, FindOutput{}, errors.New("pattern must be a non-empty glob of at most 1024 bytes on one line, e.g. *.py")
	}
	root := in.Path
	if root == "" {
		root = "/home/user"
	}
	if err := checkPath("path", root); err != nil {
		return nil, FindOutput{}, err
	}
	root = strings.TrimRight(root, "/")
	if root == "" {
		root = "/"
	}
	switch in.Type {
	case "", "f", "d":
	default:
		return nil, FindOutput{}, fmt.Errorf("type %q: want f, d or nothing", in.Type)
	}
	limit, err := bound("max_results", in.MaxResults, 200, 2000)
	if err != nil {
		return nil, FindOutput{}, err
	}
	pat := strings.TrimPrefix(in.Pattern, "./")
	lines, timedOut, err := s.search(ctx, req, in.Sandbox, []string{"sh", "-c", findScript, "sh", root, pat, in.Type, strconv.Itoa(limit + 1)})
	if err != nil {
		return nil, FindOutput{}, toolError("find failed", err)
	}
	out := FindOutput{Paths: []string{}}
	for _, l := range lines {
		if len(out.Paths) == limit {
			out.Truncated = true
			out.Note = fmt.Sprintf("more than %d matches; narrow path or pattern, or raise max_results", limit)
			break
		}
		out.Paths = append(out.Paths, l)
	}
	if timedOut {
		out.Truncated = true
		out.Note = "the search hit its 60 s limit; results are partial: search a smaller directory"
	}
	if len(out.Paths) == 0 && out.Note == "" {
		out.Note = "no matches (check path with list_dir)"
	}
	return nil, out, nil
}

// grepScript searches with find+grep so that it works with busybox and
// coreutils alike; -I skips binary files.
const grepScript = `root=$1; glob=$2; flags=$3; pat=$4; max=$5
if [ -n "$glob" ]; then
  find "$root" -type f -name "$glob" -exec grep -HnI $flags -e "$pat" -- {} + 2>/dev/null | head -n "$max"
else
  find "$root" -type f -exec grep -HnI $flags -e "$pat" -- {} + 2>/dev/null | head -n "$max"
fi`

func (s *Server) grep(ctx context.Context, req *mcpsdk.CallToolRequest, in GrepInput) (*mcpsdk.CallToolResult, GrepOutput, error) {
	if in.Pattern == "" || len(in.Pattern) > 1024 || strings.ContainsAny(in.Pattern, "\x00\n") {
		return nil, GrepOutput{}, errors.New("pattern must be a non-empty regular expression of at most 1024 bytes on one line")
	}
	if len(in.Glob) > 256 || strings.ContainsAny(in.Glob, "\x00\n/") {
		return nil, GrepOutput{}, errors.New("glob must match file names only (no '/'), e.g. *.py")
	}
	root := in.Path
	if root == "" {
		root = "/home/user"
	}
	if err := checkPath("path", root); err != nil {
		return nil, GrepOutput{}, err
	}
	limit, err := bound("max_matches", in.MaxMatches, 100, 1000)
	if err != nil {
		return nil, GrepOutput{}, err
	}
	flags := "-E"
	if in.FixedString {
		flags = "-F"
	}
	if in.IgnoreCase {
		flags += " -i"
	}
	lines, timedOut, err := s.search(ctx, req, in.Sandbox, []string{"sh", "-c", grepScript, "sh", root, in.Glob, flags, in.Pattern, strconv.Itoa(limit + 1)})
	if err != nil {
		return nil, GrepOutput{}, toolError("grep failed", err)
	}
	out := GrepOutput{Matches: []GrepMatch{}}
	for _, l := range lines {
		m, ok := parseGrepLine(l)
		if !ok {
			continue
		}
		if len(out.Matches) == limit {
			out.Truncated = true
			out.Note = fmt.Sprintf("more than %d matching lines; narrow path, glob or pattern, or raise max_matches", limit)
			break
		}
		out.Matches = append(out.Matches, m)
	}
	if timedOut {
		out.Truncated = true
		out.Note = "the search hit its 60 s limit; results are partial: search a smaller directory or use glob"
	}
	if len(out.Matches) == 0 && out.Note == "" {
		out.Note = "no matches"
	}
	return nil, out, nil
}

// parseGrepLine splits "file:line:text". A file name holding ":<digits>:"
// would be misread; grep offers no portable NUL separator for the name.
func parseGrepLine(l string) (GrepMatch, bool) {
	for i := 0; i < len(l); i++ {
		if l[i] != ':' {
			continue
		}
		rest := l[i+1:]
		j := strings.IndexByte(rest, ':')
		if j <= 0 {
			continue
		}
		n, err := strconv.Atoi(rest[:j])
		if err != nil || n <= 0 {
			continue
		}
		if i == 0 {
			return GrepMatch{}, false
		}
		text := validUTF8(rest[j+1:])
		if len(text) > 300 {
			text = cutRunes(text, 300) + "…"
		}
		return GrepMatch{File: validUTF8(l[:i]), Line: n, Text: text}, true
	}
	return GrepMatch{}, false
}

// search runs a read-only script as user and returns its stdout lines.
func (s *Server) search(ctx context.Context, req *mcpsdk.CallToolRequest, sandbox string, argv []string) ([]string, bool, error) {
	id, err := s.resolve(ctx, req, sandbox)
	if err != nil {
		return nil, false, err
	}
	// Limits keep at most ~2000 lines of 300+ characters; the buffer is
	// bounded anyway in case a line is huge.
	stdout := &limitWriter{n: 4 << 20}
	res, err := s.c.Exec(ctx, id, paddock.ExecOptions{Cmd: argv, Timeout: searchTimeout, Stdout: stdout})
	if err != nil && !errors.Is(err, errTooLarge) {
		return nil, false, err
	}
	text := stdout.buf.String()
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	} else {
		text = ""
	}
	var lines []string
	if text != "" {
		lines = strings.Split(text, "\n")
	}
	return lines, res != nil && res.TimedOut, nil
}

// bound applies a default and a ceiling to a count the model chose.
func bound(what string, v, def, max int) (int, error) {
	switch {
	case v == 0:
		return def, nil
	case v < 0 || v > max:
		return 0, fmt.Errorf("%s %d: want 1 to %d", what, v, max)
	}
	return v, nil
}
