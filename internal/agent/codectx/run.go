package codectx

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

func (s *Service) runCode(ctx context.Context, m *agentv1.RunCodeRequest, send func(*agentv1.RunCodeEvent) error) error {
	switch {
	case len(m.GetCode()) > maxCodeSize:
		return errdefs.Invalid("the code is %d bytes, at most %d", len(m.GetCode()), maxCodeSize)
	case m.GetTimeoutMs() < 0 || m.GetQueueTimeoutMs() < 0:
		return errdefs.Invalid("timeouts must not be negative")
	}
	if err := checkContextEnv(m.GetEnv()); err != nil {
		return err
	}
	c, err := s.get(m.GetContext())
	if err != nil {
		return err
	}
	// Take the context's turn.
	var queueTimeout <-chan time.Time
	if ms := m.GetQueueTimeoutMs(); ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		queueTimeout = t.C
	}
	select {
	case c.sem <- struct{}{}:
	case <-queueTimeout:
		return fmt.Errorf("context %q is still busy with an earlier run: %w", c.id, errdefs.ErrDeadlineExceeded)
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	if why := c.deadReason(); why != "" {
		return fmt.Errorf("context %q is dead (%s); delete it and create it again: %w", c.id, why, errdefs.ErrFailedPrecondition)
	}
	c.busy.Store(true)
	defer c.busy.Store(false)
	return c.run(ctx, m, send)
}

type runOutput struct {
	stderr bool
	data   []byte
}

func (c *codeContext) run(ctx context.Context, m *agentv1.RunCodeRequest, send func(*agentv1.RunCodeEvent) error) error {
	n := c.runs.Add(1)
	started := time.Now()
	out := make(chan runOutput, 16)
	gone := make(chan struct{})
	defer close(gone)
	c.setSink(func(stderr bool, b []byte) {
		select {
		case out <- runOutput{stderr, b}:
		case <-gone:
		}
	})
	defer c.setSink(nil)

	// Once the caller is gone, events are dropped but the run is still
	// finished (or interrupted), so the context stays in step.
	callerGone := false
	emit := func(ev *agentv1.RunCodeEvent) {
		if callerGone {
			return
		}
		if err := send(ev); err != nil {
			callerGone = true
		}
	}
	emitOut := func(o runOutput) {
		if o.stderr {
			emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Stderr{Stderr: o.data}})
		} else {
			emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Stdout{Stdout: o.data}})
		}
	}
	emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Start_{Start: &agentv1.RunCodeEvent_Start{ExecutionCount: n}}})

	req := map[string]any{"code": m.GetCode(), "n": n}
	if len(m.GetEnv()) > 0 {
		req["env"] = m.GetEnv()
	}
	line, _ := json.Marshal(req)
	writeErr := make(chan error, 1)
	go func() {
		_, err := c.reqW.Write(append(line, '\n'))
		writeErr <- err
	}()

	end := &agentv1.RunCodeEvent_End{Status: "ok"}
	var deadline <-chan time.Time
	if ms := m.GetTimeoutMs(); ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	var grace <-chan time.Time
	interrupt := func() {
		_ = syscall.Kill(-c.pid, syscall.SIGINT)
		grace = time.After(interruptGrace)
	}
	keepalive := time.NewTicker(c.s.opts.KeepaliveInterval)
	defer keepalive.Stop()
	ctxDone := ctx.Done()
	dead := func(why string) {
		c.kill(why)
		end.Status, end.ContextDead = "dead", true
		if end.TimedOut {
			end.Status = "timeout"
		}
		end.Note = fmt.Sprintf("context %q is dead: %s; delete it and create it again", c.id, why)
	}
loop:
	for {
		select {
		case o := <-out:
			emitOut(o)
		case msg, ok := <-c.msgs:
			if !ok {
				dead(c.deathNote())
				break loop
			}
			switch msg.Type {
			case "result":
				emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Result_{Result: &agentv1.RunCodeEvent_Result{Data: msg.Data, IsMain: msg.Main}}})
			case "error":
				if end.Status == "ok" {
					end.Status = "error"
				}
				emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Error_{Error: &agentv1.RunCodeEvent_Error{Name: msg.Name, Value: msg.Value, Traceback: msg.Traceback}}})
			case "done":
				break loop
			}
		case err := <-writeErr:
			if err != nil {
				dead("its input pipe is closed")
				break loop
			}
		case <-c.exited:
			dead(c.deathNote())
			break loop
		case <-deadline:
			deadline = nil
			end.TimedOut, end.Status = true, "timeout"
			end.Note = fmt.Sprintf("the run timed out after %s and was interrupted (SIGINT)", time.Duration(m.GetTimeoutMs())*time.Millisecond)
			interrupt()
		case <-ctxDone:
			ctxDone = nil
			callerGone = true
			if grace == nil {
				interrupt()
			}
		case <-grace:
			why := "it did not stop within " + interruptGrace.String() + " of SIGINT and was killed"
			dead(why)
			break loop
		case <-keepalive.C:
			emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_Keepalive_{Keepalive: &agentv1.RunCodeEvent_Keepalive{}}})
		}
	}
	if !end.ContextDead {
		// Output written before the driver's done must reach the caller
		// before the end event.
		drained := make(chan struct{})
		go func() { c.drain(); close(drained) }()
	wait:
		for {
			select {
			case o := <-out:
				emitOut(o)
			case <-drained:
				break wait
			}
		}
	}
	for {
		select {
		case o := <-out:
			emitOut(o)
			continue
		default:
		}
		break
	}
	end.DurationMs = time.Since(started).Milliseconds()
	emit(&agentv1.RunCodeEvent{Event: &agentv1.RunCodeEvent_End_{End: end}})
	if callerGone && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func (c *codeContext) deathNote() string {
	select {
	case <-c.exited:
	case <-time.After(time.Second):
	}
	if why := c.deadReason(); why != "" {
		return why
	}
	return "the interpreter closed its reply channel"
}
