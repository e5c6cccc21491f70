package controller

import (
	"context"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// maxCodeBytes bounds one run's code; the agent enforces the same.
const maxCodeBytes = 1 << 20

// CreateContext starts a code context (a persistent interpreter) in a
// sandbox, starting a stopped sandbox first. Contexts live in the
// sandbox's agent: a stop or restart of the sandbox ends them.
func (c *Controller) CreateContext(ctx context.Context, ref string, req api.CreateContextRequest) (*api.CodeContext, error) {
	if req.User != "" && !userRE.MatchString(req.User) {
		return nil, errdefs.Invalid("user %q is not a valid user name", req.User)
	}
	switch strings.ToLower(req.Language) {
	case "", "python", "python3", "py":
		req.Language = api.LanguagePython
	case "javascript", "js", "node", "nodejs":
		req.Language = api.LanguageJavaScript
	default:
		return nil, errdefs.Invalid("language %q: want python or javascript", req.Language)
	}
	if err := validateEnv(req.Env); err != nil {
		return nil, err
	}
	if strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return nil, errdefs.Invalid("cwd is not a valid path")
	}
	ag, sandboxID, done, err := c.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	info, err := ag.CreateContext(ctx, &agentv1.CreateContextRequest{Id: req.ID, Language: req.Language, User: req.User, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		return nil, err
	}
	c.rememberLanguage(sandboxID, info.GetId(), info.GetLanguage()) // contextledger.go
	out := contextToAPI(info)
	return &out, nil
}

// ListContexts lists a sandbox's code contexts, oldest first.
func (c *Controller) ListContexts(ctx context.Context, ref string) ([]api.CodeContext, error) {
	return withAgent(ctx, c, ref, func(ag *client.Client) ([]api.CodeContext, error) {
		list, err := ag.ListContexts(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]api.CodeContext, 0, len(list))
		for _, info := range list {
			out = append(out, contextToAPI(info))
		}
		return out, nil
	})
}

// DeleteContext ends a code context's interpreter.
func (c *Controller) DeleteContext(ctx context.Context, ref, id string) error {
	ag, sandboxID, done, err := c.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	if err := ag.DeleteContext(ctx, id); err != nil {
		return err
	}
	c.rememberLanguage(sandboxID, id, "")
	return nil
}

func contextToAPI(i *agentv1.CodeContextInfo) api.CodeContext {
	return api.CodeContext{
		ID: i.GetId(), Language: i.GetLanguage(), User: i.GetUser(), Cwd: i.GetCwd(), Pid: i.GetPid(),
		Interpreter: i.GetInterpreter(), State: i.GetState(), Runs: i.GetRuns(), Error: i.GetError(),
		CreatedAt: time.Unix(0, i.GetCreatedAtUnixNano()).UTC(),
	}
}

// RunCode runs code in a context and streams its events: one start, then
// output, results and errors, then exactly one end. An error returned
// means nothing was streamed.
func (c *Controller) RunCode(ctx context.Context, ref, id string, req api.RunCodeRequest, emit func(api.RunCodeEvent) error) error {
	switch {
	case strings.TrimSpace(req.Code) == "":
		return errdefs.Invalid("code is empty")
	case len(req.Code) > maxCodeBytes:
		return errdefs.Invalid("code is %d bytes, at most %d", len(req.Code), maxCodeBytes)
	case strings.ContainsRune(req.Code, 0):
		return errdefs.Invalid("code must not contain NUL bytes")
	}
	if err := validateEnv(req.Env); err != nil {
		return err
	}
	timeout := c.cfg.ExecTimeout
	if req.Timeout != "" {
		var err error
		if timeout, err = parseDuration("timeout", req.Timeout, time.Millisecond); err != nil {
			return err
		}
	}
	queue := defaultQueueTimeout
	if req.QueueTimeout != "" {
		var err error
		if queue, err = parseDuration("queue_timeout", req.QueueTimeout, time.Millisecond); err != nil {
			return err
		}
		if queue > maxQueueTimeout {
			return errdefs.Invalid("queue_timeout %s is longer than %s", queue, maxQueueTimeout)
		}
	}
	ag, sandboxID, done, err := c.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	run := &codeRun{context: id, code: req.Code}
	defer func() { c.recordRun(ctx, sandboxID, ag, run) }() // contextledger.go

	started := false
	var emitErr error
	send := func(ev api.RunCodeEvent) error {
		run.saw(ev)
		if emitErr == nil {
			emitErr = emit(ev)
		}
		run.callerGone = emitErr != nil
		return emitErr
	}
	end, err := ag.RunCode(ctx, &agentv1.RunCodeRequest{
		Context: id, Code: req.Code, TimeoutMs: timeout.Milliseconds(), QueueTimeoutMs: queue.Milliseconds(), Env: req.Env,
	}, func(ev *agentv1.RunCodeEvent) error {
		switch {
		case ev.GetStart() != nil:
			started = true
			return send(api.RunCodeEvent{Type: api.EventStart, ExecutionCount: ev.GetStart().GetExecutionCount()})
		case ev.GetStdout() != nil:
			return send(api.RunCodeEvent{Type: api.EventStdout, Data: ev.GetStdout()})
		case ev.GetStderr() != nil:
			return send(api.RunCodeEvent{Type: api.EventStderr, Data: ev.GetStderr()})
		case ev.GetResult() != nil:
			r := ev.GetResult()
			return send(api.RunCodeEvent{Type: api.RunEventResult, Result: r.GetData(), Main: r.GetIsMain()})
		case ev.GetError() != nil:
			e := ev.GetError()
			return send(api.RunCodeEvent{Type: api.RunEventError, Error: &api.CodeError{Name: e.GetName(), Value: e.GetValue(), Traceback: e.GetTraceback()}})
		}
		return nil
	})
	if emitErr != nil {
		return nil // the caller left; the agent interrupts the run
	}
	if err != nil && !started {
		run.failed = err
		return err
	}
	ev := api.RunCodeEvent{Type: api.EventEnd}
	if err != nil {
		// The run's outcome is unknown: the stream to the agent broke.
		ev.Status, ev.Note = api.RunDead, "the run's end was not received: "+err.Error()
	} else {
		ev.Status, ev.TimedOut, ev.ContextDead, ev.Note, ev.DurationMs = end.GetStatus(), end.GetTimedOut(), end.GetContextDead(), end.GetNote(), end.GetDurationMs()
	}
	_ = send(ev)
	return nil
}
