// Package sessions is the agent's shell sessions: named, persistent shells
// (bash when the image has it, else sh) that keep their working directory,
// variables and functions between commands. Commands take turns; each is
// run in the shell itself and followed by markers that carry its status
// and working directory, so its output is told apart from the shell's
// without a terminal; a command that times out or is cancelled has the
// processes it started killed, and a shell that does not recover (or that
// a command ended) is replaced and the caller told. It serves Paddock's
// SessionService. The agent (internal/agent) makes one Service and mounts
// it; the service knows the agent only through the functions it is given:
// the user and environment of the shell, and the start of the shell as a
// process of the agent's own table, so that it is listed and killed with
// the sandbox's other processes.
package sessions

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/users"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Shell is a session's shell as the agent started it.
type Shell interface {
	Pid() int
	// Events are the shell's process events (its output) while it is
	// followed; Release stops following.
	Events() <-chan *process.ProcessEvent
	Release()
	// Done is closed once the shell has ended and End is set; Exited is
	// true from the moment it exits, while its output may still drain.
	Done() <-chan struct{}
	Exited() bool
	End() *process.ProcessEvent_EndEvent
	// WriteInput writes to the shell's stdin, giving up when ctx ends.
	WriteInput(ctx context.Context, data []byte) error
	// Signal signals the shell's process group.
	Signal(sig syscall.Signal) error
}

// Options configure a Service. Every function is required.
type Options struct {
	Logger *slog.Logger
	// KeepaliveInterval is how often a command waiting for its turn
	// sends a keepalive event (30 s when not set).
	KeepaliveInterval time.Duration
	// User resolves a session's user by name ("" is the sandbox's
	// default user).
	User func(ctx context.Context, name string) (*users.User, error)
	// Env is the environment a new process of u starts with.
	Env func(u *users.User) []string
	// Start starts a shell as a process of the agent's table, as user
	// ("" is the default user), with stdin open, and follows its events.
	Start func(ctx context.Context, user string, req *process.StartRequest) (Shell, error)
}

// Service serves a sandbox's sessions. Make it with New.
type Service struct {
	log  *slog.Logger
	opts Options

	mu     sync.Mutex
	byName map[string]*session
	closed bool
}

// New makes the session service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KeepaliveInterval <= 0 {
		opts.KeepaliveInterval = 30 * time.Second
	}
	return &Service{log: opts.Logger, opts: opts, byName: make(map[string]*session)}
}

// Register mounts the service's Connect service on mux.
func (t *Service) Register(mux *http.ServeMux, rpcOpts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewSessionServiceHandler(t, rpcOpts...))
}

var _ agentv1connect.SessionServiceHandler = (*Service)(nil)

// CreateSession starts a named session's shell.
func (t *Service) CreateSession(ctx context.Context, req *connect.Request[agentv1.CreateSessionRequest]) (*connect.Response[agentv1.CreateSessionResponse], error) {
	sess, err := t.create(ctx, req.Msg, false)
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.CreateSessionResponse{Session: sess.info()}), nil
}

// ListSessions lists the sessions, oldest first.
func (t *Service) ListSessions(ctx context.Context, _ *connect.Request[agentv1.ListSessionsRequest]) (*connect.Response[agentv1.ListSessionsResponse], error) {
	return connect.NewResponse(&agentv1.ListSessionsResponse{Sessions: t.list()}), nil
}

// DeleteSession ends a session, its shell and what the shell started.
func (t *Service) DeleteSession(ctx context.Context, req *connect.Request[agentv1.DeleteSessionRequest]) (*connect.Response[agentv1.DeleteSessionResponse], error) {
	if err := t.remove(req.Msg.GetName()); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.DeleteSessionResponse{}), nil
}

// ExecInSession runs a command in a session (the default one, made on
// first use, when none is named), streaming its output and end.
func (t *Service) ExecInSession(ctx context.Context, req *connect.Request[agentv1.SessionExecRequest], stream *connect.ServerStream[agentv1.SessionExecEvent]) error {
	return reply.RPC(t.exec(ctx, req.Msg, stream.Send))
}
