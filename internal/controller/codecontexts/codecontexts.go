// Package codecontexts is the controller's code contexts subsystem:
// persistent interpreters (Python, JavaScript) in a sandbox's agent, made,
// listed, ended and run in, each run streamed and recorded in the
// sandbox's ledger (ledger.go). It reaches sandboxes through the
// controller's core (Core).
package codecontexts

import (
	"context"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// maxCodeBytes bounds one run's code; the agent enforces the same.
const maxCodeBytes = 1 << 20

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// Agent reaches a sandbox ctx's caller may use, starting a stopped
	// one first; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Record appends a daemon-made entry to a sandbox's ledger.
	Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error
}

var _ Core = (*controller.Controller)(nil)

// Service serves code contexts.
type Service struct {
	core Core
	// runTimeout is a run's timeout when its request names none.
	runTimeout time.Duration
	langs      languages // ledger.go
}

// New returns the subsystem; runTimeout is a run's default timeout.
func New(core Core, runTimeout time.Duration) *Service {
	return &Service{core: core, runTimeout: runTimeout}
}

// Create starts a code context (a persistent interpreter) in a
// sandbox, starting a stopped sandbox first. Contexts live in the
// sandbox's agent: a stop or restart of the sandbox ends them.
func (s *Service) Create(ctx context.Context, ref string, req api.CreateContextRequest) (*api.CodeContext, error) {
	if req.User != "" && !rules.ValidUser(req.User) {
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
	if err := rules.Env(req.Env); err != nil {
		return nil, err
	}
	if strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return nil, errdefs.Invalid("cwd is not a valid path")
	}
	ag, sandboxID, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	info, err := ag.CreateContext(ctx, &agentv1.CreateContextRequest{Id: req.ID, Language: req.Language, User: req.User, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		return nil, err
	}
	s.langs.remember(sandboxID, info.GetId(), info.GetLanguage()) // ledger.go
	out := contextToAPI(info)
	return &out, nil
}

// List lists a sandbox's code contexts, oldest first.
func (s *Service) List(ctx context.Context, ref string) ([]api.CodeContext, error) {
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	list, err := ag.ListContexts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.CodeContext, 0, len(list))
	for _, info := range list {
		out = append(out, contextToAPI(info))
	}
	return out, nil
}

// Delete ends a code context's interpreter.
func (s *Service) Delete(ctx context.Context, ref, id string) error {
	ag, sandboxID, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	if err := ag.DeleteContext(ctx, id); err != nil {
		return err
	}
	s.langs.remember(sandboxID, id, "")
	return nil
}

func contextToAPI(i *agentv1.CodeContextInfo) api.CodeContext {
	return api.CodeContext{
		ID: i.GetId(), Language: i.GetLanguage(), User: i.GetUser(), Cwd: i.GetCwd(), Pid: i.GetPid(),
		Interpreter: i.GetInterpreter(), State: i.GetState(), Runs: i.GetRuns(), Error: i.GetError(),
		CreatedAt: time.Unix(0, i.GetCreatedAtUnixNano()).UTC(),
	}
}

// Run runs code in a context and streams its events: one start, then
// output, results and errors, then exactly one end. An error returned
// means nothing was streamed.
func (s *Service) Run(ctx context.Context, ref, id string, req api.RunCodeRequest, emit func(api.RunCodeEvent) error) error {
	switch {
	case strings.TrimSpace(req.Code) == "":
		return errdefs.Invalid("code is empty")
	case len(req.Code) > maxCodeBytes:
		return errdefs.Invalid("code is %d bytes, at most %d", len(req.Code), maxCodeBytes)
	case strings.ContainsRune(req.Code, 0):
		return errdefs.Invalid("code must not contain NUL bytes")
	}
	if err := rules.Env(req.Env); err != nil {
		return err
	}
	timeout := s.runTimeout
	if req.Timeout != "" {
		var err error
		if timeout, err = rules.ParseDuration("timeout", req.Timeout, time.Millisecond); err != nil {
			return err
		}
	}
	queue, err := rules.QueueTimeout(req.QueueTimeout)
	if err != nil {
		return err
	}
	ag, sandboxID, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	run := &codeRun{context: id, code: req.Code}
	defer func() { s.recordRun(ctx, sandboxID, ag, run) }() // ledger.go

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
