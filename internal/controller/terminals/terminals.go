// Package terminals is the terminals subsystem: a process on a terminal in
// a sandbox's agent that lives on when its clients detach, attached to by
// any number of clients at once (each gets the recent output first, and a
// client that falls behind is dropped rather than stalling the others),
// resized and signalled, killed when nobody has been attached for
// termDetachedLimit, and adopted again after a daemon restart or a restore
// (recover.go). Each opening and end is recorded in the sandbox's ledger
// (ledger.go). It reaches sandboxes through Core. It sits beneath the
// controller's core, which makes it, implements Core, and has it adopt a
// sandbox's terminals when it adopts the sandbox; the API server reaches
// it through the controller.
package terminals

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// Terminal bookkeeping. Output is read from the agent as fast as it comes
// and never waits for a viewer: a viewer that falls termClientQueue chunks
// behind is dropped (it may reattach and gets the replay), so one slow
// client cannot stall the shell or the other viewers.
const (
	termReplayBytes = api.TerminalReplayKB << 10
	termClientQueue = 256
	// A terminal nobody is attached to for this long is killed, so
	// forgotten shells do not pile up in a sandbox.
	termDetachedLimit = 30 * time.Minute
	// An ended terminal stays listed this long, so a client that lost its
	// connection can still reattach and read how it ended.
	termExitedKeep = time.Minute
	termIDLen      = 12
)

// DefaultCmd starts the user's login shell: bash when the image has it,
// sh otherwise.
var DefaultCmd = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"}

// Options describe a new terminal. Zero values take defaults.
type Options struct {
	Cmd        []string
	Env        map[string]string
	Cwd        string
	User       string
	Cols, Rows int
}

// Core is what the subsystem uses of the controller.
type Core interface {
	// Agent reaches a sandbox ctx's caller may use, starting a stopped
	// one first; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Record appends a daemon-made entry to a sandbox's ledger.
	Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error
	// SandboxState finds the sandbox ref names for ctx's caller: its id
	// and state.
	SandboxState(ctx context.Context, ref string) (id, state string, err error)
	// LiveAgent is the agent of sandbox id while it runs, nil otherwise.
	LiveAgent(ctx context.Context, id string) *client.Client
	// UntilClose is a context that ends when the daemon closes.
	UntilClose() (context.Context, context.CancelFunc)
	// Closed says whether the daemon is closing.
	Closed() bool
}

// Service serves terminals.
type Service struct {
	core  Core
	log   *slog.Logger
	terms termTable
}

// New returns the subsystem.
func New(core Core, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, log: log}
}

type termTable struct {
	mu sync.Mutex
	m  map[string]map[string]*terminal // sandbox id -> terminal id

	recovery termRecovery // terminal_recover.go
}

type terminal struct {
	id, sandbox string
	ag          *client.Client
	pid         uint32
	cmd         []string
	created     time.Time
	stop        context.CancelFunc // ends following the process
	// ledger records the end; nil for a terminal adopted after it ended,
	// whose end the daemon that saw it may have recorded already.
	ledger *ledger.Command

	mu       sync.Mutex
	cols     int
	rows     int
	ring     []byte
	clients  map[*Conn]struct{}
	exited   bool
	exitCode int
	signal   string
	failure  string
	detached *time.Timer
	done     chan struct{}
}

// Conn is one client attached to a terminal.
type Conn struct {
	t       *terminal
	out     chan []byte
	kicked  chan struct{}
	replay  []byte
	release func()
	once    sync.Once
}

func validateTerminal(o *Options) error {
	if len(o.Cmd) == 0 {
		o.Cmd = DefaultCmd
	}
	if err := rules.Exec(&api.ExecRequest{Cmd: o.Cmd, Env: o.Env, Cwd: o.Cwd, User: o.User}); err != nil {
		return err
	}
	if o.Cols == 0 && o.Rows == 0 {
		o.Cols, o.Rows = 80, 24
	}
	return checkSize(o.Cols, o.Rows)
}

func checkSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > api.MaxTerminalCols || rows > api.MaxTerminalRows {
		return errdefs.Invalid("terminal size %dx%d: want 1 to %d columns and 1 to %d rows", cols, rows, api.MaxTerminalCols, api.MaxTerminalRows)
	}
	return nil
}

// Open starts a process on a new terminal in a sandbox and attaches
// the caller to it. The terminal lives on when the caller detaches.
func (s *Service) Open(ctx context.Context, ref string, o Options) (*Conn, error) {
	if err := validateTerminal(&o); err != nil {
		return nil, err
	}
	ag, id, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.Recover(ctx, id)
	if n := s.terms.live(id); n >= api.MaxTerminals {
		done()
		return nil, fmt.Errorf("sandbox %s has %d terminals, the most it may have; close some first: %w", id, n, errdefs.ErrResourceExhausted)
	}
	env := map[string]string{"TERM": "xterm-256color"}
	for k, v := range o.Env {
		env[k] = v
	}
	tid := "t" + rules.RandomID(termIDLen)
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	// The process may end before StartPTY returns to us: its duration is
	// measured from the request, never from after the start.
	asked := time.Now()
	stream, pid, err := ag.StartPTY(sctx, client.PTYOptions{Cmd: o.Cmd, Env: env, Cwd: o.Cwd, User: o.User, Cols: o.Cols, Rows: o.Rows, Tag: terminalTag(tid)})
	if err != nil {
		stop()
		done()
		return nil, err
	}
	t := &terminal{
		id: tid, sandbox: id, ag: ag, pid: pid, cmd: o.Cmd,
		created: time.Now().UTC(), stop: stop, cols: o.Cols, rows: o.Rows,
		clients: make(map[*Conn]struct{}), done: make(chan struct{}),
	}
	t.ledger = s.recordOpen(ctx, t, o, asked) // terminalledger.go
	s.terms.add(t)
	conn := t.attach(done)
	go s.follow(t, stream)
	s.log.Info("terminal opened", "sandbox", id, "terminal", t.id, "pid", pid)
	return conn, nil
}

// Attach attaches to a running (or just ended) terminal; the
// connection's Replay holds its recent output.
func (s *Service) Attach(ctx context.Context, ref, tid string) (*Conn, error) {
	id, _, err := s.core.SandboxState(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.Recover(ctx, id)
	t := s.terms.get(id, tid)
	if t == nil {
		return nil, s.noTerminal(ctx, id, tid)
	}
	select {
	case <-t.done:
		return t.attach(func() {}), nil
	default:
	}
	_, _, done, err := s.core.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	return t.attach(done), nil
}

// List lists a sandbox's terminals, oldest first.
func (s *Service) List(ctx context.Context, ref string) ([]api.Terminal, error) {
	id, _, err := s.core.SandboxState(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.Recover(ctx, id)
	ts := s.terms.list(id)
	out := make([]api.Terminal, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.info())
	}
	return out, nil
}

// Kill kills a terminal's process group; attached clients get its end.
func (s *Service) Kill(ctx context.Context, ref, tid string) error {
	id, _, err := s.core.SandboxState(ctx, ref)
	if err != nil {
		return err
	}
	s.Recover(ctx, id)
	t := s.terms.get(id, tid)
	if t == nil {
		return s.noTerminal(ctx, id, tid)
	}
	return t.kill(ctx)
}

func (s *Service) follow(t *terminal, stream *client.PTYStream) {
	defer stream.Close()
	defer t.stop()
	for {
		ev, err := stream.Next()
		if err != nil {
			t.finish(-1, "", "the terminal's connection to the sandbox broke (did the sandbox stop?): "+err.Error())
			break
		}
		if ev.End {
			t.finish(ev.Exit, ev.Signal, "")
			break
		}
		t.publish(ev.Data)
	}
	s.recordEnd(t)
	s.log.Info("terminal ended", "sandbox", t.sandbox, "terminal", t.id)
	time.AfterFunc(termExitedKeep, func() { s.terms.remove(t) })
}

func (tt *termTable) add(t *terminal) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.m == nil {
		tt.m = make(map[string]map[string]*terminal)
	}
	if tt.m[t.sandbox] == nil {
		tt.m[t.sandbox] = make(map[string]*terminal)
	}
	tt.m[t.sandbox][t.id] = t
}

func (tt *termTable) remove(t *terminal) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	delete(tt.m[t.sandbox], t.id)
	if len(tt.m[t.sandbox]) == 0 {
		delete(tt.m, t.sandbox)
	}
}

func (tt *termTable) get(sandbox, id string) *terminal {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.m[sandbox][id]
}

func (tt *termTable) list(sandbox string) []*terminal {
	tt.mu.Lock()
	var ts []*terminal
	for _, t := range tt.m[sandbox] {
		ts = append(ts, t)
	}
	tt.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].created.Before(ts[j].created) })
	return ts
}

func (tt *termTable) live(sandbox string) int {
	n := 0
	for _, t := range tt.list(sandbox) {
		select {
		case <-t.done:
		default:
			n++
		}
	}
	return n
}

func (t *terminal) info() api.Terminal {
	t.mu.Lock()
	defer t.mu.Unlock()
	ti := api.Terminal{
		ID: t.id, Pid: t.pid, Cmd: append([]string(nil), t.cmd...), Cols: t.cols, Rows: t.rows,
		Attached: len(t.clients), Exited: t.exited, CreatedAt: t.created,
	}
	if t.exited {
		code := t.exitCode
		ti.ExitCode = &code
	}
	return ti
}

// attach registers a client and snapshots the replay under the same lock
// as publish, so the client sees every byte exactly once.
func (t *terminal) attach(release func()) *Conn {
	tc := &Conn{t: t, out: make(chan []byte, termClientQueue), kicked: make(chan struct{}), release: release}
	t.mu.Lock()
	defer t.mu.Unlock()
	tc.replay = append([]byte(nil), t.ring...)
	if !t.exited {
		t.clients[tc] = struct{}{}
		if t.detached != nil {
			t.detached.Stop()
			t.detached = nil
		}
	}
	return tc
}

func (t *terminal) detach(tc *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.clients[tc]; !ok {
		return
	}
	delete(t.clients, tc)
	if len(t.clients) == 0 && !t.exited && t.detached == nil {
		t.detached = time.AfterFunc(termDetachedLimit, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = t.kill(ctx)
		})
	}
}

func (t *terminal) publish(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring = append(t.ring, p...)
	if over := len(t.ring) - termReplayBytes; over > 0 {
		t.ring = append(t.ring[:0], t.ring[over:]...)
	}
	for tc := range t.clients {
		select {
		case tc.out <- p:
		default:
			delete(t.clients, tc)
			close(tc.kicked)
		}
	}
}

func (t *terminal) finish(code int, sig, failure string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return
	}
	t.exited, t.exitCode, t.signal, t.failure = true, code, sig, failure
	if t.detached != nil {
		t.detached.Stop()
		t.detached = nil
	}
	close(t.done)
}

func (t *terminal) kill(ctx context.Context) error {
	select {
	case <-t.done:
		return nil
	default:
	}
	err := t.ag.Signal(ctx, t.pid, true)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		return err
	}
	return nil
}

// ID is the terminal's id.
func (tc *Conn) ID() string { return tc.t.id }

// Info describes the terminal now.
func (tc *Conn) Info() api.Terminal { return tc.t.info() }

// Replay is the terminal's recent output from before this attach.
func (tc *Conn) Replay() []byte { return tc.replay }

// Output delivers output produced after the attach.
func (tc *Conn) Output() <-chan []byte { return tc.out }

// Ended is closed when the terminal's process has ended; drain Output
// after it, then read Exit.
func (tc *Conn) Ended() <-chan struct{} { return tc.t.done }

// Kicked is closed when this client fell too far behind and was dropped.
func (tc *Conn) Kicked() <-chan struct{} { return tc.kicked }

// Exit is how the process ended: exit code (-1 for a signal), the signal,
// and a failure when the terminal's stream broke instead.
func (tc *Conn) Exit() (code int, signal, failure string) {
	t := tc.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exitCode, t.signal, t.failure
}

// Write sends keystrokes to the terminal.
func (tc *Conn) Write(ctx context.Context, p []byte) error {
	return tc.t.ag.PTYInput(ctx, tc.t.pid, p)
}

// Resize changes the terminal's size.
func (tc *Conn) Resize(ctx context.Context, cols, rows int) error {
	if err := checkSize(cols, rows); err != nil {
		return err
	}
	if err := tc.t.ag.PTYResize(ctx, tc.t.pid, cols, rows); err != nil {
		return err
	}
	tc.t.mu.Lock()
	tc.t.cols, tc.t.rows = cols, rows
	tc.t.mu.Unlock()
	return nil
}

// termKeys are signals a terminal's line discipline raises for the
// foreground job when it reads these characters, which is what a person
// pressing the key does.
var termKeys = map[string]string{"SIGINT": "\x03", "SIGQUIT": "\x1c", "SIGTSTP": "\x1a"}

// Signal delivers SIGINT, SIGQUIT or SIGTSTP as the terminal's keys do (to
// the foreground job), and SIGTERM or SIGKILL to the terminal's process
// group.
func (tc *Conn) Signal(ctx context.Context, name string) error {
	if k, ok := termKeys[name]; ok {
		return tc.Write(ctx, []byte(k))
	}
	switch name {
	case "SIGTERM":
		return tc.t.ag.Signal(ctx, tc.t.pid, false)
	case "SIGKILL":
		return tc.t.ag.Signal(ctx, tc.t.pid, true)
	}
	return errdefs.Invalid("signal %q: want SIGINT, SIGQUIT, SIGTSTP, SIGTERM or SIGKILL", name)
}

// Close detaches this client; the terminal keeps running.
func (tc *Conn) Close() {
	tc.once.Do(func() {
		tc.t.detach(tc)
		tc.release()
	})
}
