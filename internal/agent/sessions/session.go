package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/shellquote"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// DefaultSession is the session a caller gets without creating one.
const DefaultSession = "default"

// Bounds on sessions.
const (
	maxSessions     = 32
	maxQueued       = 1024
	maxCommandBytes = 1 << 20
	// killGrace is how long a timed-out command's shell gets to print its
	// end marker after the command's processes were killed; a shell still
	// silent then is stuck in a builtin and is replaced.
	killGrace = 2 * time.Second
	// stderrLag bounds the wait for the stderr marker once stdout's came,
	// for a command that redirected the shell's stderr for good.
	stderrLag = time.Second
)

var sessionNameRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)

// session is one persistent shell. Commands take turns through sem; the
// shell's output is routed to the command holding the turn and dropped
// between commands (output of jobs a command left in the background).
type session struct {
	t       *Service
	name    string
	user    string
	env     map[string]string
	cwd     string // requested at creation; the live cwd is read from /proc
	created time.Time

	sem      chan struct{}
	queued   atomic.Int32
	commands atomic.Uint64
	restarts atomic.Uint32
	closed   chan struct{}
	// killed is set by a kill-all before it signals: the shell it ends
	// is not replaced until the session's next command.
	killed atomic.Bool

	mu      sync.Mutex
	shell   Shell
	path    string // the shell binary
	cur     *sessionCmd
	lastCwd string // $PWD after the last command
}

// sessionCmd is the command holding a session's turn.
type sessionCmd struct {
	out            chan outChunk
	gone           chan struct{} // closed when the caller stops reading
	stdout, stderr markerScanner
	rc             chan int // receives the exit status once
	statusDone     bool
	cwd            string // the shell's $PWD after the command
	errDone        chan struct{}
}

type outChunk struct {
	stderr bool
	data   []byte
}

// markerScanner passes output through until its marker, holding back only
// a tail that could be the start of the marker.
type markerScanner struct {
	marker  []byte
	pending []byte
	found   bool
}

// feed returns the output before the marker and, once the marker and what
// follows it are complete, rest (the bytes after the marker) and done.
func (m *markerScanner) feed(p []byte) (out, rest []byte, done bool) {
	if m.found {
		return nil, nil, false
	}
	m.pending = append(m.pending, p...)
	if i := indexBytes(m.pending, m.marker); i >= 0 {
		out = m.pending[:i]
		rest = m.pending[i+len(m.marker):]
		m.found = true
		m.pending = nil
		return out, rest, true
	}
	keep := partialSuffix(m.pending, m.marker)
	out = m.pending[:len(m.pending)-keep]
	m.pending = append([]byte(nil), m.pending[len(m.pending)-keep:]...)
	return out, nil, false
}

func indexBytes(s, sep []byte) int { return strings.Index(string(s), string(sep)) }

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of marker.
func partialSuffix(s, marker []byte) int {
	n := min(len(s), len(marker)-1)
	for k := n; k > 0; k-- {
		if string(s[len(s)-k:]) == string(marker[:k]) {
			return k
		}
	}
	return 0
}

func validateSessionName(name string) error {
	if !sessionNameRE.MatchString(name) {
		return errdefs.Invalid("session name %q: use 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// createSession starts a session's shell; an existing name is a conflict
// unless allowExisting (the lazily made default session).
func (t *Service) create(ctx context.Context, req *agentv1.CreateSessionRequest, allowExisting bool) (*session, error) {
	if err := validateSessionName(req.GetName()); err != nil {
		return nil, err
	}
	for k, v := range req.GetEnv() {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 || !shellName(k) {
			return nil, errdefs.Invalid("environment variable name %q is not valid", k)
		}
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("the agent is shutting down: %w", errdefs.ErrUnavailable)
	}
	if s, ok := t.byName[req.GetName()]; ok {
		t.mu.Unlock()
		if allowExisting {
			return s, nil
		}
		return nil, fmt.Errorf("session %q exists: %w", req.GetName(), errdefs.ErrConflict)
	}
	if len(t.byName) >= maxSessions {
		t.mu.Unlock()
		return nil, fmt.Errorf("at most %d sessions per sandbox; delete one first: %w", maxSessions, errdefs.ErrResourceExhausted)
	}
	s := &session{
		t: t, name: req.GetName(), user: req.GetUser(), env: req.GetEnv(), cwd: req.GetCwd(),
		created: time.Now(), sem: make(chan struct{}, 1), closed: make(chan struct{}),
	}
	// Reserve the name while the shell starts, so two creates cannot race.
	t.byName[s.name] = s
	t.mu.Unlock()
	if err := s.start(ctx); err != nil {
		t.mu.Lock()
		delete(t.byName, s.name)
		t.mu.Unlock()
		close(s.closed)
		return nil, err
	}
	t.log.Info("session created", "session", s.name, "user", s.user)
	return s, nil
}

// shellName reports whether k can be a shell variable, which the session
// env must be since the shell itself receives it.
func shellName(k string) bool {
	for i, r := range k {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (t *Service) get(name string) (*session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[name]; ok {
		return s, nil
	}
	return nil, errdefs.NotFound("session %q", name)
}

// start launches (or relaunches) the session's shell: bash when the image
// has it, else sh, reading commands from a pipe, in its own process group.
func (s *session) start(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	u, err := s.t.opts.User(ctx, s.user)
	if err != nil {
		return err
	}
	env := s.t.opts.Env(u)
	shellPath, args := "sh", []string(nil)
	if p, err := osproc.LookPath("bash", osproc.EnvValue(env, "PATH"), "/"); err == nil {
		shellPath, args = p, []string{"--noprofile", "--norc"}
	} else if p, err := osproc.LookPath("sh", osproc.EnvValue(env, "PATH"), "/"); err == nil {
		shellPath = p
	} else {
		return fmt.Errorf("the sandbox has neither bash nor sh: %w", errdefs.ErrFailedPrecondition)
	}
	cfg := &process.ProcessConfig{Cmd: shellPath, Args: args, Envs: s.env}
	if s.cwd != "" {
		cwd := s.cwd
		cfg.Cwd = &cwd
	}
	withStdin := true
	// Unique per shell: a replaced shell may linger a moment while its
	// output drains, and must not block the tag of its successor.
	tag := fmt.Sprintf("session:%s:%d", s.name, time.Now().UnixNano())
	p, err := s.t.opts.Start(ctx, s.user, &process.StartRequest{Process: cfg, Stdin: &withStdin, Tag: &tag})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.shell, s.path, s.user = p, shellPath, u.Name
	s.mu.Unlock()
	go s.route(p)
	return nil
}

// route hands the shell's output to the current command until the shell
// ends.
func (s *session) route(p Shell) {
	defer p.Release()
	deliver := func(ev *process.ProcessEvent) {
		d := ev.GetData()
		if d == nil {
			return
		}
		s.mu.Lock()
		c := s.cur
		s.mu.Unlock()
		if c == nil {
			return
		}
		if out := d.GetStdout(); out != nil {
			c.feed(false, out)
		} else if e := d.GetStderr(); e != nil {
			c.feed(true, e)
		}
	}
	for {
		select {
		case ev := <-p.Events():
			deliver(ev)
			continue
		case <-p.Done():
		}
		break
	}
	for {
		select {
		case ev := <-p.Events():
			deliver(ev)
			continue
		default:
		}
		return
	}
}

func (c *sessionCmd) send(stderr bool, data []byte) {
	if len(data) == 0 {
		return
	}
	select {
	case c.out <- outChunk{stderr: stderr, data: append([]byte(nil), data...)}:
	case <-c.gone:
	}
}

func (c *sessionCmd) feed(stderr bool, p []byte) {
	if stderr {
		out, _, done := c.stderr.feed(p)
		c.send(true, out)
		if done {
			close(c.errDone)
		}
		return
	}
	if c.stdout.found {
		if !c.statusDone {
			c.parseStatus(p)
		}
		return
	}
	out, rest, done := c.stdout.feed(p)
	c.send(false, out)
	if !done {
		return
	}
	// The marker is followed by the status digits and "__"; they arrive in
	// the same write in practice, but a split is handled by waiting for
	// more with the scanner re-armed on the terminator.
	c.parseStatus(rest)
}

// parseStatus reads "<status>:<cwd>\x1e" after the stdout marker,
// possibly over several chunks. The shell's cwd is learned here because
// the agent may not read /proc/<pid>/cwd of another user's shell.
func (c *sessionCmd) parseStatus(rest []byte) {
	c.stdout.pending = append(c.stdout.pending, rest...)
	if i := strings.IndexByte(string(c.stdout.pending), statusEnd); i >= 0 {
		rc, cwd, _ := strings.Cut(string(c.stdout.pending[:i]), ":")
		code, err := strconv.Atoi(rc)
		if err != nil {
			code = -1
		}
		c.cwd = cwd
		c.rc <- code
		c.statusDone, c.stdout.pending = true, nil
		return
	}
	if len(c.stdout.pending) > maxStatusBytes {
		c.rc <- -1
		c.statusDone, c.stdout.pending = true, nil
	}
}

// The status after the stdout marker ends with an ASCII record separator.
const (
	statusEnd      = '\x1e'
	maxStatusBytes = 8 << 10
)

func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// script wraps a command so that it runs in the shell itself (eval keeps
// cd, exports and functions), reads nothing of the command pipe, and is
// followed by markers carrying its status on stdout and closing stderr.
func script(command, nonce string) string {
	return fmt.Sprintf("eval %s </dev/null\n__pdk_rc=$?; command printf '%%s%%d:%%s\\036' '__PADDOCK_%s_RC_' \"$__pdk_rc\" \"$PWD\"; command printf '%%s' '__PADDOCK_%s_ERR__' >&2\n",
		shellquote.Quote(command), nonce, nonce)
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) map[int]bool { return osproc.Below(osproc.All("/proc"), pid) }

// killNew SIGKILLs the shell's descendants that were not there before the
// command began: the command's processes, not jobs left by earlier ones.
// Several passes catch children forked while the first were killed.
func killNew(shellPid int, before map[int]bool) {
	for range 3 {
		n := 0
		for pid := range descendants(shellPid) {
			if !before[pid] {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAll ends the shell and everything below it. Background processes
// are children of the agent, never of a shell, so they are not touched.
func (s *session) killAll() {
	s.mu.Lock()
	p := s.shell
	s.mu.Unlock()
	if p == nil {
		return
	}
	for pid := range descendants(p.Pid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = p.Signal(syscall.SIGKILL)
}

func (s *session) info() *agentv1.SessionInfo {
	s.mu.Lock()
	p, path, busy := s.shell, s.path, s.cur != nil
	s.mu.Unlock()
	info := &agentv1.SessionInfo{
		Name: s.name, User: s.user, Env: s.env, Shell: path, CreatedAtUnixNano: s.created.UnixNano(),
		Busy: busy, Queued: uint32(max(0, s.queued.Load())), Commands: s.commands.Load(), Restarts: s.restarts.Load(),
	}
	switch {
	case p != nil && p.Exited():
		// Ended between commands: say so, rather than show a pid that
		// may by now be another process's.
		info.ShellEnded = true
		select {
		case <-p.Done():
			if end := p.End(); end.GetExited() {
				info.ShellExitCode = end.GetExitCode()
			} else {
				info.ShellSignal = osproc.SignalFromStatus(end.GetStatus())
			}
		default: // its output still drains; how it ended is known after
		}
	case p != nil:
		info.Pid = uint32(p.Pid())
		if cwd, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid()) + "/cwd"); err == nil {
			info.Cwd = cwd
		}
	}
	if info.Cwd == "" {
		s.mu.Lock()
		info.Cwd = s.lastCwd
		s.mu.Unlock()
	}
	if info.Cwd == "" {
		info.Cwd = s.cwd
	}
	return info
}

func (t *Service) list() []*agentv1.SessionInfo {
	t.mu.Lock()
	list := make([]*session, 0, len(t.byName))
	for _, s := range t.byName {
		list = append(list, s)
	}
	t.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
	out := make([]*agentv1.SessionInfo, 0, len(list))
	for _, s := range list {
		out = append(out, s.info())
	}
	return out
}

// deleteSession ends a session: its shell and what the shell started die,
// queued commands fail, and nothing else is touched.
func (t *Service) remove(name string) error {
	t.mu.Lock()
	s, ok := t.byName[name]
	if ok {
		delete(t.byName, name)
	}
	t.mu.Unlock()
	if !ok {
		return errdefs.NotFound("session %q", name)
	}
	s.close()
	t.log.Info("session deleted", "session", name)
	return nil
}

func (s *session) close() {
	select {
	case <-s.closed:
		return
	default:
	}
	close(s.closed)
	s.killAll()
}

// Close ends every session; shells are not restarted afterwards (the
// agent's shutdown).
func (t *Service) Close() {
	t.mu.Lock()
	t.closed = true
	list := make([]*session, 0, len(t.byName))
	for _, s := range t.byName {
		list = append(list, s)
	}
	t.byName = map[string]*session{}
	t.mu.Unlock()
	for _, s := range list {
		s.close()
	}
}

// MarkKilled tells every session that a kill-all is about to end its
// shell, so that the shell is not replaced until the session's next
// command.
func (t *Service) MarkKilled() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byName {
		s.killed.Store(true)
	}
}
