package agent

import (
	"context"
	"syscall"

	"github.com/paddock-dev/paddock/internal/agent/sessions"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// asUser is ctx with the request's user replaced by name ("" selects the
// sandbox's default user, whatever the request asked for).
func asUser(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, userKey{}, userSelection{name: name})
}

// startShell starts a session's shell as a process of the table, so that
// it is listed and killed like every other, and follows its events.
func (a *Agent) startShell(ctx context.Context, user string, req *process.StartRequest) (sessions.Shell, error) {
	p, sub, err := a.startProcess(asUser(ctx, user), req)
	if err != nil {
		return nil, err
	}
	return &shellProc{p: p, sub: sub}, nil
}

// shellProc is a session's view of its shell's process.
type shellProc struct {
	p   *proc
	sub *subscriber
}

func (s *shellProc) Pid() int                             { return s.p.pid }
func (s *shellProc) Events() <-chan *process.ProcessEvent { return s.sub.ch }
func (s *shellProc) Release()                             { s.p.unsubscribe(s.sub) }
func (s *shellProc) Done() <-chan struct{}                { return s.p.done }
func (s *shellProc) Exited() bool                         { return s.p.exited.Load() }
func (s *shellProc) Signal(sig syscall.Signal) error      { return s.p.signal(sig) }
func (s *shellProc) WriteInput(ctx context.Context, b []byte) error {
	return s.p.writeInput(ctx, b, false)
}

// End is how the shell ended; nil until Done is closed.
func (s *shellProc) End() *process.ProcessEvent_EndEvent {
	select {
	case <-s.p.done:
		return s.p.end
	default:
		return nil
	}
}
