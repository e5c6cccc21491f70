// Package codectx is the agent's code contexts: long-lived Python and
// JavaScript interpreters (the E2B code interpreter's contexts) that keep
// their variables between runs. Each interpreter runs a small driver
// (driver.py, driver.js) that reads requests as JSON lines on fd 3 and
// answers on fd 4, so user output on fds 1 and 2 is never taken for a
// control message. It serves Paddock's CodeContextService; the agent
// (internal/agent) makes one Service and mounts it on its handler, and the
// service knows the agent only through the functions it is given: whose
// and where a process runs, its environment, and the start of a child
// under the agent's reaper.
package codectx

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
)

// Options configure a Service. Every function is required.
type Options struct {
	Logger *slog.Logger
	// KeepaliveInterval is how often a run sends a keepalive event
	// (30 s when not set).
	KeepaliveInterval time.Duration
	// User resolves the user an interpreter runs as: explicit when given,
	// else the agent's selection for the request.
	User func(ctx context.Context, explicit string) (*users.User, error)
	// WorkDir resolves the working directory: requested when given, else
	// the sandbox's default.
	WorkDir func(u *users.User, requested *string) (string, error)
	// Env is the environment of a new process of u with extra set on top.
	Env func(u *users.User, extra map[string]string) []string
	// Start starts a child under the agent's reaper (fork runs the start
	// and returns the pid) and returns its exit status; a failure is
	// described as the agent describes a failed start of cmd.
	Start func(cmd string, fork func() (int, error)) (int, <-chan syscall.WaitStatus, error)
}

// Service serves a sandbox's code contexts. Make it with New.
type Service struct {
	log  *slog.Logger
	opts Options

	mu     sync.Mutex
	byID   map[string]*codeContext
	closed bool
}

// New makes the code context service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KeepaliveInterval <= 0 {
		opts.KeepaliveInterval = 30 * time.Second
	}
	return &Service{log: opts.Logger, opts: opts, byID: make(map[string]*codeContext)}
}

// Register mounts the service's Connect service on mux.
func (s *Service) Register(mux *http.ServeMux, rpcOpts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewCodeContextServiceHandler(s, rpcOpts...))
}

// CreateContext starts an interpreter with its driver.
func (s *Service) CreateContext(ctx context.Context, req *connect.Request[agentv1.CreateContextRequest]) (*connect.Response[agentv1.CreateContextResponse], error) {
	c, err := s.create(ctx, req.Msg)
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.CreateContextResponse{Context: c.info()}), nil
}

// ListContexts lists the started contexts, oldest first.
func (s *Service) ListContexts(ctx context.Context, _ *connect.Request[agentv1.ListContextsRequest]) (*connect.Response[agentv1.ListContextsResponse], error) {
	return connect.NewResponse(&agentv1.ListContextsResponse{Contexts: s.list()}), nil
}

// DeleteContext ends a context's interpreter and everything it started.
func (s *Service) DeleteContext(ctx context.Context, req *connect.Request[agentv1.DeleteContextRequest]) (*connect.Response[agentv1.DeleteContextResponse], error) {
	if err := s.remove(req.Msg.GetId()); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.DeleteContextResponse{}), nil
}

// RunCode runs code in a context, streaming its output, results and end.
func (s *Service) RunCode(ctx context.Context, req *connect.Request[agentv1.RunCodeRequest], stream *connect.ServerStream[agentv1.RunCodeEvent]) error {
	return reply.RPC(s.runCode(ctx, req.Msg, stream.Send))
}

var _ agentv1connect.CodeContextServiceHandler = (*Service)(nil)
