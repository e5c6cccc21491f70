package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

func (t *Service) exec(ctx context.Context, m *agentv1.SessionExecRequest, send func(*agentv1.SessionExecEvent) error) error {
	switch {
	case strings.TrimSpace(m.GetCommand()) == "":
		return errdefs.Invalid("the command is empty")
	case len(m.GetCommand()) > maxCommandBytes:
		return errdefs.Invalid("the command is %d bytes, at most %d", len(m.GetCommand()), maxCommandBytes)
	case strings.IndexByte(m.GetCommand(), 0) >= 0:
		return errdefs.Invalid("the command contains a NUL byte")
	case m.GetTimeoutMs() < 0 || m.GetQueueTimeoutMs() < 0:
		return errdefs.Invalid("timeouts must not be negative")
	}
	name := m.GetSession()
	if name == "" {
		name = DefaultSession
	}
	sess, err := t.get(name)
	if errors.Is(err, errdefs.ErrNotFound) && name == DefaultSession {
		sess, err = t.create(ctx, &agentv1.CreateSessionRequest{Name: DefaultSession}, true)
	}
	if err != nil {
		return err
	}
	if u := m.GetUser(); u != "" && u != sess.user {
		return errdefs.Invalid("session %q runs as %q; a command in it cannot run as %q", sess.name, sess.user, u)
	}

	if sess.queued.Add(1) > maxQueued {
		sess.queued.Add(-1)
		return fmt.Errorf("session %q already has %d commands queued: %w", sess.name, maxQueued, errdefs.ErrResourceExhausted)
	}
	var queueTimeout <-chan time.Time
	if d := time.Duration(m.GetQueueTimeoutMs()) * time.Millisecond; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		queueTimeout = t.C
	}
	keepalive := time.NewTicker(t.opts.KeepaliveInterval)
	defer keepalive.Stop()
	waitStart := time.Now()
	for acquired := false; !acquired; {
		select {
		case sess.sem <- struct{}{}:
			acquired = true
		case <-keepalive.C:
			if err := send(&agentv1.SessionExecEvent{Event: &agentv1.SessionExecEvent_Keepalive_{Keepalive: &agentv1.SessionExecEvent_Keepalive{}}}); err != nil {
				sess.queued.Add(-1)
				return err
			}
		case <-queueTimeout:
			sess.queued.Add(-1)
			return fmt.Errorf("waited %s for session %q's earlier commands to finish: %w",
				time.Since(waitStart).Round(time.Millisecond), sess.name, errdefs.ErrDeadlineExceeded)
		case <-ctx.Done():
			sess.queued.Add(-1)
			return ctx.Err()
		case <-sess.closed:
			sess.queued.Add(-1)
			return errdefs.NotFound("session %q was deleted", sess.name)
		}
	}
	sess.queued.Add(-1)
	defer func() { <-sess.sem }()
	return sess.run(ctx, m, send)
}

// run executes one command holding the session's turn.
func (s *session) run(ctx context.Context, m *agentv1.SessionExecRequest, send func(*agentv1.SessionExecEvent) error) error {
	select {
	case <-s.closed:
		return errdefs.NotFound("session %q was deleted", s.name)
	default:
	}
	s.killed.Store(false)
	s.mu.Lock()
	p := s.shell
	s.mu.Unlock()
	if p == nil || p.Exited() {
		// The shell ended between commands (a job killed it): replace it.
		if err := s.restart(ctx, p); err != nil {
			return err
		}
		s.mu.Lock()
		p = s.shell
		s.mu.Unlock()
	}
	nonce := newNonce()
	c := &sessionCmd{
		stdout:  markerScanner{marker: []byte("__PADDOCK_" + nonce + "_RC_")},
		stderr:  markerScanner{marker: []byte("__PADDOCK_" + nonce + "_ERR__")},
		out:     make(chan outChunk, 16),
		gone:    make(chan struct{}),
		rc:      make(chan int, 1),
		errDone: make(chan struct{}),
	}
	before := descendants(p.Pid())
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		close(c.gone)
	}()
	s.commands.Add(1)
	if err := send(&agentv1.SessionExecEvent{Event: &agentv1.SessionExecEvent_Start_{Start: &agentv1.SessionExecEvent_Start{ShellPid: uint32(p.Pid())}}}); err != nil {
		return err
	}
	// A shell that does not read its input is stuck; the write gives up
	// with the command's own deadline.
	wctx := ctx
	if d := time.Duration(m.GetTimeoutMs()) * time.Millisecond; d > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	writeErr := p.WriteInput(wctx, []byte(script(m.GetCommand(), nonce)))

	var timer <-chan time.Time
	if d := time.Duration(m.GetTimeoutMs()) * time.Millisecond; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	if writeErr != nil && !p.Exited() {
		timer = time.After(0)
	}
	end := &agentv1.SessionExecEvent_End{}
	rcCh, errCh, ctxDone := c.rc, c.errDone, ctx.Done()
	var lag <-chan time.Time
	gotRC, gotErr, killing, canceled := false, false, false, false
	drain := func() error {
		for {
			select {
			case ch := <-c.out:
				if err := sendChunk(send, ch); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	finish := func() error {
		if canceled {
			return ctx.Err()
		}
		if err := drain(); err != nil {
			return err
		}
		return send(&agentv1.SessionExecEvent{Event: &agentv1.SessionExecEvent_End_{End: end}})
	}
	for {
		select {
		case ch := <-c.out:
			if !canceled {
				if err := sendChunk(send, ch); err != nil {
					// The caller is gone: stop the command as a cancel would.
					canceled, ctxDone = true, nil
					killNew(p.Pid(), before)
					timer = time.After(killGrace)
					killing = true
				}
			}
		case code := <-rcCh:
			rcCh, gotRC = nil, true
			s.mu.Lock()
			s.lastCwd = c.cwd
			s.mu.Unlock()
			end.ExitCode = int32(code)
			if killing {
				end.ExitCode, end.Signal = -1, "SIGKILL"
			}
			if gotErr {
				return finish()
			}
			lag = time.After(stderrLag)
		case <-errCh:
			errCh, gotErr = nil, true
			if gotRC {
				return finish()
			}
		case <-lag:
			return finish()
		case <-p.Done():
			// The command ended the shell (exit, exec, set -e) or the
			// shell was killed: report it and bring up a fresh one.
			_ = drain()
			if pe := p.End(); pe != nil && pe.GetExited() && !killing {
				end.ExitCode = pe.GetExitCode()
			} else {
				end.ExitCode, end.Signal = -1, osproc.SignalFromStatus(pe.GetStatus())
			}
			select {
			case <-s.closed:
				end.Note = "the session was deleted while the command ran"
				return finish()
			default:
			}
			if s.killed.Swap(false) {
				// Every process of the sandbox is being killed: a new
				// shell now would be killed too, or outlive the kill.
				end.Note = "every process of the sandbox was killed, the session's shell too; its next command starts a fresh shell"
				return finish()
			}
			end.ShellRestarted = true
			end.Note = "the command ended the session's shell; a new shell was started, so cwd, variables and functions are reset"
			if err := s.restart(ctx, p); err != nil {
				end.Note = "the command ended the session's shell and a new one could not be started: " + reply.Public(err)
			}
			return finish()
		case <-ctxDone:
			canceled, ctxDone = true, nil
			if !killing {
				killNew(p.Pid(), before)
				killing = true
				timer = time.After(killGrace)
			}
		case <-timer:
			if !killing {
				end.TimedOut = true
				killNew(p.Pid(), before)
				killing = true
				timer = time.After(killGrace)
				continue
			}
			// The shell itself is stuck (a builtin loop, a read from a
			// terminal): only replacing it frees the session.
			s.killAll()
			select {
			case <-p.Done():
			case <-time.After(5 * time.Second):
			}
			_ = drain()
			end.ExitCode, end.Signal = -1, "SIGKILL"
			end.ShellRestarted = true
			end.Note = "the shell did not recover from the timeout and was replaced, so cwd, variables and functions are reset"
			if err := s.restart(ctx, p); err != nil {
				end.Note = "the shell did not recover from the timeout and a new one could not be started: " + reply.Public(err)
			}
			return finish()
		}
	}
}

func sendChunk(send func(*agentv1.SessionExecEvent) error, ch outChunk) error {
	if ch.stderr {
		return send(&agentv1.SessionExecEvent{Event: &agentv1.SessionExecEvent_Stderr{Stderr: ch.data}})
	}
	return send(&agentv1.SessionExecEvent{Event: &agentv1.SessionExecEvent_Stdout{Stdout: ch.data}})
}

// restart replaces the session's shell old (which has ended or is
// killed here) with a fresh one started like the first.
func (s *session) restart(ctx context.Context, old Shell) error {
	if old != nil && !old.Exited() {
		_ = old.Signal(syscall.SIGKILL)
	}
	select {
	case <-s.closed:
		return errdefs.NotFound("session %q was deleted", s.name)
	default:
	}
	s.restarts.Add(1)
	s.t.log.Info("session shell restarted", "session", s.name)
	return s.start(ctx)
}
