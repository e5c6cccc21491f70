// Package mcp serves Paddock as Model Context Protocol tools, so that coding
// agents can create sandboxes, run commands and edit files in them. It is a
// client of the daemon like any other: every tool goes through the Go SDK
// (sdk/go/paddock), never through the controller, so the MCP server has no
// power the API does not already give its caller.
//
// Over stdio (`paddock mcp`) one process serves one MCP session; on the
// daemon, /mcp serves many sessions over streamable HTTP. Each session gets a
// default sandbox the first time a tool is called without naming one, and
// that sandbox is destroyed when the session ends unless Options.KeepDefault
// says otherwise.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Label put on the sandboxes this package creates on a session's behalf, so
// that a leftover one (after a crash) is easy to find: `paddock ls --label
// paddock.mcp=default`.
const (
	LabelKey     = "paddock.mcp"
	LabelDefault = "default"
)

// Options configures a Server.
type Options struct {
	// Client reaches the daemon; nil means the zero paddock.Client (the
	// default socket, or $PADDOCK_URL).
	Client *paddock.Client
	// Default is the request used to create a session's default sandbox.
	// Its labels are extended with LabelKey=LabelDefault.
	Default api.CreateSandboxRequest
	// DefaultSandbox, when set, names an existing sandbox that serves as
	// every session's default; it is never destroyed by this package.
	DefaultSandbox string
	// KeepDefault leaves a session's default sandbox in place when the
	// session ends, instead of destroying it.
	KeepDefault bool
	// SnapshotDefault snapshots a session's default sandbox (files only)
	// before destroying it when the session ends, so the work can be
	// restored with --from-snapshot; the snapshot is named after the
	// sandbox.
	SnapshotDefault bool
	// SessionTimeout closes HTTP sessions idle this long (and so destroys
	// their default sandboxes); 0 means 30 minutes. Unused over stdio.
	SessionTimeout time.Duration
	Logger         *slog.Logger
	// Version is reported to clients as the server's version.
	Version string
	// Workspace, when set, serves workspace mode (wsmode.go): every
	// session works in this workspace (id or name; created on first use
	// when missing, never deleted), with run and the file tools bound to
	// it, and no sandbox tools.
	Workspace string
}

// Server is Paddock's MCP server.
type Server struct {
	opts Options
	c    *paddock.Client
	log  *slog.Logger
	srv  *mcpsdk.Server

	mu       sync.Mutex
	sessions map[*mcpsdk.ServerSession]*session
	closed   bool
	// ending counts sessions whose end is being handled by their own
	// goroutine, so Close can wait for them: a stdio server's process
	// exits when Run returns, and must not take an unfinished destroy
	// with it.
	ending sync.WaitGroup

	// wsMu guards wsReady: Options.Workspace is known to exist.
	wsMu    sync.Mutex
	wsReady bool
}

// session is what the server remembers of one MCP session.
type session struct {
	// create serialises the creation of the default sandbox, so that two
	// concurrent first calls do not create two.
	create sync.Mutex
	// defaultID is the session's default sandbox, "" before first use.
	defaultID string
	// owned is true when this package created defaultID and so must
	// destroy it when the session ends.
	owned bool
}

// New builds a Server and registers its tools.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Client == nil {
		opts.Client = &paddock.Client{}
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, c: opts.Client, log: opts.Logger, sessions: map[*mcpsdk.ServerSession]*session{}}
	title, instr := "Paddock sandboxes", instructions
	if opts.Workspace != "" {
		title, instr = "Paddock workspace "+opts.Workspace, wsInstructions
	}
	s.srv = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "paddock", Title: title, Version: opts.Version}, &mcpsdk.ServerOptions{
		Instructions: instr,
		Logger:       opts.Logger,
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}},
	})
	if opts.Workspace != "" {
		s.addWorkspaceModeTools()
		return s
	}
	s.addSandboxTools()
	s.addExecTools()
	s.addFileTools()
	s.addProcessTools()
	s.addProcsTools()
	s.addWorkspaceTools()
	return s
}

const instructions = `Paddock gives you isolated Linux sandboxes (Debian with python3, bash, git and coreutils by default).
Every tool takes an optional "sandbox" (id or name); leave it empty to use this session's default sandbox, which is created on first use (about a second) and destroyed when the session ends.
Use write_file/edit_file/read_file for files rather than shell redirection, exec for commands, grep/find to search.
Outputs are bounded: when a result says it was truncated, narrow the request (line ranges, a more specific pattern, a subdirectory).
Workspaces (workspace_* tools) are sets of files Paddock keeps with a version for every change; workspace_run works on them with no sandbox at all, typically in under a millisecond, when the command needs only common shell tools.`

// MCP returns the underlying MCP server, for callers that bring their own
// transport.
func (s *Server) MCP() *mcpsdk.Server { return s.srv }

// Run serves one session over t (e.g. &mcpsdk.StdioTransport{}) until the
// client disconnects or ctx ends, then ends the session's default sandbox.
func (s *Server) Run(ctx context.Context, t mcpsdk.Transport) error {
	err := s.srv.Run(ctx, t)
	s.Close(context.WithoutCancel(ctx))
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// HTTPHandler serves streamable HTTP MCP sessions. The caller mounts it
// behind the API's authentication.
func (s *Server) HTTPHandler() http.Handler {
	return mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s.srv }, &mcpsdk.StreamableHTTPOptions{
		Logger:         s.log,
		SessionTimeout: s.opts.SessionTimeout,
		// The API's own listeners decide who may connect: file permissions
		// on the socket, API keys on TCP.
	})
}

// Close ends every session's default sandbox that this server owns, and
// waits for the ends already under way. It is called when the stdio session
// ends; the daemon's HTTP sessions end one by one instead.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	all := s.sessions
	s.sessions = map[*mcpsdk.ServerSession]*session{}
	s.mu.Unlock()
	for _, st := range all {
		s.endSession(ctx, st)
	}
	s.ending.Wait()
}

// state returns the session's state, registering it (and its end) on first
// sight.
func (s *Server) state(ss *mcpsdk.ServerSession) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("the MCP server is shutting down")
	}
	if st, ok := s.sessions[ss]; ok {
		return st, nil
	}
	st := &session{}
	if ss == nil {
		// Calls made without a session (direct handler use) share one
		// state that lives until Close.
		s.sessions[nil] = st
		return st, nil
	}
	s.sessions[ss] = st
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		cur, ok := s.sessions[ss]
		if ok {
			delete(s.sessions, ss)
			// Added under mu, so a Close that no longer finds the
			// session in the map waits for this end instead.
			s.ending.Add(1)
		}
		s.mu.Unlock()
		if ok {
			defer s.ending.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s.endSession(ctx, cur)
		}
	}()
	return st, nil
}

// endSession destroys the session's default sandbox when it owns one.
func (s *Server) endSession(ctx context.Context, st *session) {
	st.create.Lock()
	id, owned := st.defaultID, st.owned
	st.defaultID, st.owned = "", false
	st.create.Unlock()
	if id == "" || !owned {
		return
	}
	if s.opts.KeepDefault {
		s.log.Info("MCP session ended; keeping its default sandbox", "sandbox", id)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if s.opts.SnapshotDefault {
		snap, err := s.c.CreateSnapshot(ctx, id, api.CreateSnapshotRequest{Name: "mcp-" + id})
		if err != nil {
			// Keep the sandbox rather than lose the work.
			s.log.Warn("MCP session ended; snapshot of its default sandbox failed, keeping the sandbox", "sandbox", id, "err", err)
			return
		}
		s.log.Info("MCP session ended; snapshotted its default sandbox", "sandbox", id, "snapshot", snap.ID)
	}
	if err := s.c.Delete(ctx, id); err != nil && !errors.Is(err, paddock.ErrNotFound) {
		s.log.Warn("MCP session ended; destroying its default sandbox failed", "sandbox", id, "err", err)
		return
	}
	s.log.Info("MCP session ended; destroyed its default sandbox", "sandbox", id)
}

// resolve returns the sandbox a tool call works on: the one named, or the
// session's default, created on first use.
func (s *Server) resolve(ctx context.Context, req *mcpsdk.CallToolRequest, name string) (string, error) {
	if name != "" {
		if err := checkRef(name); err != nil {
			return "", err
		}
		return name, nil
	}
	if s.opts.DefaultSandbox != "" {
		return s.opts.DefaultSandbox, nil
	}
	st, err := s.state(req.Session)
	if err != nil {
		return "", err
	}
	st.create.Lock()
	defer st.create.Unlock()
	if st.defaultID != "" {
		return st.defaultID, nil
	}
	cr := s.opts.Default
	labels := map[string]string{LabelKey: LabelDefault}
	for k, v := range cr.Labels {
		labels[k] = v
	}
	cr.Labels = labels
	sb, err := s.c.Create(ctx, cr)
	if err != nil {
		return "", toolError("creating this session's default sandbox failed", err)
	}
	st.defaultID, st.owned = sb.ID, true
	s.log.Info("created a default sandbox for an MCP session", "sandbox", sb.ID)
	return sb.ID, nil
}

// forget clears the session's default when the model destroys it itself,
// so the next call gets a fresh one instead of a not-found error.
func (s *Server) forget(req *mcpsdk.CallToolRequest, id string) {
	s.mu.Lock()
	st := s.sessions[req.Session]
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.create.Lock()
	if st.defaultID == id {
		st.defaultID, st.owned = "", false
	}
	st.create.Unlock()
}

// defaultOf returns the session's default sandbox id, "" when none yet.
func (s *Server) defaultOf(req *mcpsdk.CallToolRequest) string {
	if s.opts.DefaultSandbox != "" {
		return s.opts.DefaultSandbox
	}
	s.mu.Lock()
	st := s.sessions[req.Session]
	s.mu.Unlock()
	if st == nil {
		return ""
	}
	st.create.Lock()
	defer st.create.Unlock()
	return st.defaultID
}
