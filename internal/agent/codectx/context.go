package codectx

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// The drivers run inside the interpreter (see the package comment).
var (
	//go:embed driver.py
	pythonDriver string
	//go:embed driver.js
	nodeDriver string
)

// Bounds on code contexts.
const (
	maxContexts = 16
	maxCodeSize = 1 << 20
	// maxCtlLine bounds one reply from a driver; the drivers cut values
	// well below it.
	maxCtlLine = 16 << 20
	// interruptGrace is how long a timed-out run gets to stop after
	// SIGINT before the interpreter is killed.
	interruptGrace = 2 * time.Second
	contextStartup = 15 * time.Second
	drainWait      = 2 * time.Second
	// readChunk is the most of an interpreter's output one read takes.
	readChunk = 32 << 10
)

// Context states reported in CodeContextInfo.
const (
	ctxIdle = "idle"
	ctxBusy = "busy"
	ctxDead = "dead"
)

var contextIDRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)

type ctlMsg struct {
	Type      string            `json:"type"`
	Status    string            `json:"status"`
	Data      map[string]string `json:"data"`
	Main      bool              `json:"main"`
	Name      string            `json:"name"`
	Value     string            `json:"value"`
	Traceback string            `json:"traceback"`
	Version   string            `json:"version"`
}

// codeContext is one interpreter running a driver.
type codeContext struct {
	s       *Service
	id      string
	lang    string
	user    string
	cwd     string
	interp  string
	created time.Time
	pid     int

	sem    chan struct{}
	runs   atomic.Uint64
	busy   atomic.Bool
	exited chan struct{} // closed when the interpreter is gone
	msgs   chan ctlMsg   // closed when the reply pipe ends

	reqW           *os.File
	stdout, stderr *os.File
	drains         [2]chan chan struct{}

	mu   sync.Mutex
	sink func(stderr bool, b []byte)
	dead string
}

func (s *Service) create(ctx context.Context, req *agentv1.CreateContextRequest) (*codeContext, error) {
	if !contextIDRE.MatchString(req.GetId()) {
		return nil, errdefs.Invalid("context id %q: use 1 to 64 letters, digits, '.', '_' or '-'", req.GetId())
	}
	lang, err := wire.CodeLanguage(req.GetLanguage())
	if err != nil {
		return nil, err
	}
	if err := checkContextEnv(req.GetEnv()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("the agent is shutting down: %w", errdefs.ErrUnavailable)
	}
	if _, ok := s.byID[req.GetId()]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("context %q exists: %w", req.GetId(), errdefs.ErrConflict)
	}
	if len(s.byID) >= maxContexts {
		s.mu.Unlock()
		return nil, fmt.Errorf("at most %d code contexts per sandbox; delete one first: %w", maxContexts, errdefs.ErrResourceExhausted)
	}
	c := &codeContext{
		s: s, id: req.GetId(), lang: lang, created: time.Now(), sem: make(chan struct{}, 1),
		exited: make(chan struct{}), msgs: make(chan ctlMsg, 16),
	}
	// Reserve the id while the interpreter starts, so two creates cannot race.
	s.byID[c.id] = c
	s.mu.Unlock()
	if err := c.start(ctx, req); err != nil {
		s.mu.Lock()
		delete(s.byID, c.id)
		s.mu.Unlock()
		return nil, err
	}
	s.log.Info("code context created", "context", c.id, "language", lang, "user", c.user, "pid", c.pid)
	return c, nil
}

// checkContextEnv refuses variables the interpreter's environment cannot
// hold.
func checkContextEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Invalid("environment variable name %q is not valid", k)
		}
	}
	return nil
}

func (s *Service) get(id string) (*codeContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byID[id]; ok {
		return c, nil
	}
	return nil, errdefs.NotFound("code context %q", id)
}

func (s *Service) list() []*agentv1.CodeContextInfo {
	s.mu.Lock()
	list := make([]*codeContext, 0, len(s.byID))
	for _, c := range s.byID {
		if c.pid != 0 {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
	out := make([]*agentv1.CodeContextInfo, 0, len(list))
	for _, c := range list {
		out = append(out, c.info())
	}
	return out
}

func (s *Service) remove(id string) error {
	s.mu.Lock()
	c, ok := s.byID[id]
	if ok && c.pid != 0 {
		delete(s.byID, id)
	}
	s.mu.Unlock()
	if !ok || c.pid == 0 {
		return errdefs.NotFound("code context %q", id)
	}
	c.kill("the context was deleted")
	s.log.Info("code context deleted", "context", id)
	return nil
}

// Close ends every context; nothing is started afterwards (the agent's
// shutdown).
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	list := make([]*codeContext, 0, len(s.byID))
	for _, c := range s.byID {
		list = append(list, c)
	}
	s.byID = map[string]*codeContext{}
	s.mu.Unlock()
	for _, c := range list {
		c.kill("the sandbox is stopping")
	}
}

func (c *codeContext) info() *agentv1.CodeContextInfo {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	state := ctxIdle
	switch {
	case dead != "":
		state = ctxDead
	case c.busy.Load():
		state = ctxBusy
	}
	return &agentv1.CodeContextInfo{
		Id: c.id, Language: c.lang, User: c.user, Cwd: c.cwd, Pid: uint32(c.pid), Interpreter: c.interp,
		CreatedAtUnixNano: c.created.UnixNano(), State: state, Runs: c.runs.Load(), Error: dead,
	}
}

// start launches the interpreter with the driver in its own process group.
func (c *codeContext) start(ctx context.Context, req *agentv1.CreateContextRequest) error {
	s := c.s
	u, err := s.opts.User(ctx, req.GetUser())
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.Invalid("%s", reply.Public(err))
		}
		return err
	}
	var cwdReq *string
	if req.GetCwd() != "" {
		cwd := req.GetCwd()
		cwdReq = &cwd
	}
	cwd, err := s.opts.WorkDir(u, cwdReq)
	if err != nil {
		return err
	}
	extra := map[string]string{"PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
	for k, v := range req.GetEnv() {
		extra[k] = v
	}
	env := s.opts.Env(u, extra)
	bin, argv := "python3", []string{"python3", "-u", "-c", pythonDriver}
	if c.lang == "javascript" {
		bin, argv = "node", []string{"node", "-e", nodeDriver}
	}
	path, err := osproc.LookPath(bin, osproc.EnvValue(env, "PATH"), cwd)
	if err != nil {
		return fmt.Errorf("%s not found in this image; %s contexts need it: %w", bin, c.lang, errdefs.ErrFailedPrecondition)
	}
	c.user, c.cwd, c.interp = u.Name, cwd, path

	var parent, child []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	defer func() { closeAll(child) }()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("create pipe: %v: %w", err, errdefs.ErrResourceExhausted)
		}
		return r, w, nil
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("open %s: %v: %w", os.DevNull, err, errdefs.ErrFailedPrecondition)
	}
	child = append(child, devnull)
	var files [4]*os.File
	for i := range files {
		r, w, err := pipe()
		if err != nil {
			closeAll(parent)
			return err
		}
		if i == 2 { // requests: the driver reads
			parent, child = append(parent, w), append(child, r)
			files[i] = r
			c.reqW = w
			continue
		}
		parent, child = append(parent, r), append(child, w)
		files[i] = r
		switch i {
		case 0:
			c.stdout = r
			files[i] = w
		case 1:
			c.stderr = r
			files[i] = w
		case 3:
			files[i] = w
		}
	}
	repliesR := parent[3]
	sys := &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	attr := &os.ProcAttr{Dir: cwd, Env: env, Files: []*os.File{devnull, files[0], files[1], files[2], files[3]}, Sys: sys}
	pid, exitc, err := s.opts.Start(bin, func() (int, error) { return osproc.StartProcess(path, argv, attr) })
	if err != nil {
		closeAll(parent)
		return err
	}
	c.pid = pid
	go func() {
		ws := <-exitc
		c.setDead(fmt.Sprintf("the interpreter exited (%s)", waitText(ws)))
		close(c.exited)
	}()
	go c.readReplies(repliesR)
	for i, f := range []*os.File{c.stdout, c.stderr} {
		c.drains[i] = make(chan chan struct{}, 1)
		go c.pump(f, i == 1, c.drains[i])
	}

	// Wait for the driver's hello, keeping what it printed on failure.
	var startOut strings.Builder
	var outMu sync.Mutex
	c.setSink(func(_ bool, b []byte) {
		outMu.Lock()
		if startOut.Len() < 4096 {
			startOut.Write(b)
		}
		outMu.Unlock()
	})
	defer c.setSink(nil)
	timer := time.NewTimer(contextStartup)
	defer timer.Stop()
	fail := func(why string) error {
		c.kill(why)
		outMu.Lock()
		out := strings.TrimSpace(startOut.String())
		outMu.Unlock()
		if out != "" {
			why += ": " + out
		}
		return fmt.Errorf("start %s context: %s: %w", c.lang, why, errdefs.ErrFailedPrecondition)
	}
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				<-c.exitedOrTimeout(time.Second)
				return fail("the interpreter ended before it was ready")
			}
			if m.Type == "ready" {
				return nil
			}
		case <-c.exited:
			time.Sleep(50 * time.Millisecond) // let its last words arrive
			return fail("the interpreter exited before it was ready")
		case <-timer.C:
			return fail("the interpreter did not start in time")
		case <-ctx.Done():
			c.kill("canceled")
			return ctx.Err()
		}
	}
}

func (c *codeContext) exitedOrTimeout(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-c.exited:
		case <-time.After(d):
		}
		close(ch)
	}()
	return ch
}

func waitText(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

func (c *codeContext) setDead(why string) {
	c.mu.Lock()
	if c.dead == "" {
		c.dead = why
	}
	c.mu.Unlock()
}

func (c *codeContext) deadReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *codeContext) setSink(f func(bool, []byte)) {
	c.mu.Lock()
	c.sink = f
	c.mu.Unlock()
}

// kill ends the interpreter and everything it started.
func (c *codeContext) kill(why string) {
	c.setDead(why)
	if c.pid > 0 {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		_ = syscall.Kill(c.pid, syscall.SIGKILL)
	}
	if c.reqW != nil {
		_ = c.reqW.Close()
	}
}

func (c *codeContext) readReplies(f *os.File) {
	defer close(c.msgs)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxCtlLine)
	for sc.Scan() {
		var m ctlMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.s.log.Warn("bad reply from a code-context driver", "context", c.id, "err", err)
			continue
		}
		c.msgs <- m
	}
	if err := sc.Err(); err != nil {
		// The channel cannot be resynchronised after an oversized line.
		c.s.log.Warn("code-context reply channel failed", "context", c.id, "err", err)
		c.kill("the interpreter sent an oversized reply")
	}
}

// pump forwards one output stream to the current run. A drain request
// (sent before the read deadline is set) asks it to deliver everything
// already in the pipe and then acknowledge.
func (c *codeContext) pump(f *os.File, stderr bool, drain chan chan struct{}) {
	defer f.Close()
	buf := make([]byte, readChunk)
	deliver := func(b []byte) {
		c.mu.Lock()
		sink := c.sink
		c.mu.Unlock()
		if sink != nil && len(b) > 0 {
			sink(stderr, append([]byte(nil), b...))
		}
	}
	for {
		n, err := f.Read(buf)
		deliver(buf[:n])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			_ = f.SetReadDeadline(time.Time{})
			for pipeBuffered(f) > 0 {
				n, err := f.Read(buf)
				deliver(buf[:n])
				if err != nil {
					break
				}
			}
			select {
			case ack := <-drain:
				close(ack)
			default:
			}
			continue
		}
		if err != nil {
			// The interpreter is gone: answer a drain still waiting.
			select {
			case ack := <-drain:
				close(ack)
			default:
			}
			return
		}
	}
}

func pipeBuffered(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	return n
}

// drain returns once every byte the interpreter wrote before now has been
// handed to the sink, or after drainWait.
func (c *codeContext) drain() {
	acks := make([]chan struct{}, 0, 2)
	for i, f := range []*os.File{c.stdout, c.stderr} {
		ack := make(chan struct{})
		select {
		case c.drains[i] <- ack:
		default:
			continue
		}
		acks = append(acks, ack)
		_ = f.SetReadDeadline(time.Now())
	}
	timeout := time.NewTimer(drainWait)
	defer timeout.Stop()
	for _, ack := range acks {
		select {
		case <-ack:
		case <-timeout.C:
			return
		}
	}
}
