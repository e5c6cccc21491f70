// Package processes is the background processes subsystem: commands
// started in a sandbox's agent that run on after the call, listed,
// described, signalled, waited for (an exit, a port, an HTTP answer, a line
// of output) and read back from the output the agent keeps (processes.go);
// each start and each end recorded in the sandbox's ledger, the end found
// by a wait the daemon keeps open in the background (ledger.go). It reaches
// sandboxes through Core. It sits beneath the controller's core, which
// makes it (a template's start command is one of its processes) and
// implements Core; the API server reaches it through the controller.
package processes

import (
	"context"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// Defaults and bounds of process kills and waits.
const (
	defaultKillGrace   = 10 * time.Second
	defaultWaitTimeout = 30 * time.Second
	maxWaitTimeout     = time.Hour
)

// Core is what the subsystem uses of the controller.
type Core interface {
	// Agent reaches a sandbox ctx's caller may use, starting a stopped
	// one first; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Record appends a daemon-made entry to a sandbox's ledger.
	Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error
	// AgentSince says how the sandbox stands for the processes that ag
	// reached, and the client that reaches them now.
	AgentSince(ctx context.Context, sandboxID string, ag *client.Client) (*client.Client, State)
	// UntilClose is a context that ends when the daemon closes.
	UntilClose() (context.Context, context.CancelFunc)
}

// State is how a sandbox stands for the processes an agent client reached
// in it.
type State int

const (
	// Same: it runs on that agent, or on the one a restore of its memory
	// brought back with the same processes.
	Same State = iota
	// Away: paused, hibernated, being started or adopted, or its record
	// could not be read: look again later.
	Away
	// Gone: stopped, restarted or destroyed; its processes ended.
	Gone
)

// Service serves background processes.
type Service struct {
	core Core
}

// New returns the subsystem.
func New(core Core) *Service { return &Service{core: core} }

// Start starts a background process in a sandbox. It keeps running
// after the call; its output is kept in ring buffers in the sandbox.
func (s *Service) Start(ctx context.Context, ref string, req api.StartProcessRequest) (*api.Process, error) {
	ereq := api.ExecRequest{Cmd: req.Cmd, Env: req.Env, Cwd: req.Cwd, User: req.User}
	if err := rules.Exec(&ereq); err != nil {
		return nil, err
	}
	if req.LogBufferBytes != 0 && (req.LogBufferBytes < api.MinLogBufferBytes || req.LogBufferBytes > api.MaxLogBufferBytes) {
		return nil, errdefs.Invalid("log_buffer_bytes %d: must be between %d and %d", req.LogBufferBytes, api.MinLogBufferBytes, api.MaxLogBufferBytes)
	}
	ag, sandboxID, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	p, err := ag.StartBackground(ctx, &agentv1.StartProcessRequest{
		Id: req.ID, Cmd: req.Cmd, Env: req.Env, Cwd: req.Cwd, User: ereq.User, LogBufferBytes: req.LogBufferBytes,
	})
	if err != nil {
		return nil, err
	}
	s.recordStart(ctx, sandboxID, ag, req, p) // ledger.go
	out := processToAPI(p)
	return &out, nil
}

// List lists a sandbox's background processes, running and ended.
func (s *Service) List(ctx context.Context, ref string) ([]api.Process, error) {
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	list, err := ag.ListBackground(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Process, 0, len(list))
	for _, p := range list {
		out = append(out, processToAPI(p))
	}
	return out, nil
}

func validProcRef(pid string) error {
	if pid == "" || len(pid) > 64 || strings.ContainsAny(pid, "/\x00") {
		return errdefs.Invalid("%q is not a process id or pid", pid)
	}
	return nil
}

// Get describes one background process by id or pid.
func (s *Service) Get(ctx context.Context, ref, pid string) (*api.Process, error) {
	if err := validProcRef(pid); err != nil {
		return nil, err
	}
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	p, err := ag.GetBackground(ctx, pid)
	if err != nil {
		return nil, err
	}
	out := processToAPI(p)
	return &out, nil
}

// Kill signals a process group, then SIGKILLs it after the grace.
func (s *Service) Kill(ctx context.Context, ref, pid string, req api.KillProcessRequest) (*api.Process, error) {
	if err := validProcRef(pid); err != nil {
		return nil, err
	}
	grace := defaultKillGrace
	if req.Grace != "" {
		d, err := time.ParseDuration(req.Grace)
		if err != nil || d < 0 || d > maxWaitTimeout {
			return nil, errdefs.Invalid("grace %q: want a duration from 0s to %s", req.Grace, maxWaitTimeout)
		}
		grace = d
	}
	if len(req.Signal) > 16 {
		return nil, errdefs.Invalid("signal %q is not a signal", req.Signal)
	}
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	p, err := ag.KillBackground(ctx, &agentv1.KillProcessRequest{Id: pid, Signal: req.Signal, GraceMs: grace.Milliseconds()})
	if err != nil {
		return nil, err
	}
	out := processToAPI(p)
	return &out, nil
}

// Wait waits for a process to exit, open a port, answer HTTP or
// print a matching line. It fails fast, quoting the process's last
// output, when the process ends first.
func (s *Service) Wait(ctx context.Context, ref, pid string, req api.WaitProcessRequest) (*api.WaitResult, error) {
	if err := validProcRef(pid); err != nil {
		return nil, err
	}
	timeout := defaultWaitTimeout
	if req.Timeout != "" {
		d, err := rules.ParseDuration("timeout", req.Timeout, time.Millisecond)
		if err != nil {
			return nil, err
		}
		if d > maxWaitTimeout {
			return nil, errdefs.Invalid("timeout %s is longer than %s", d, maxWaitTimeout)
		}
		timeout = d
	}
	switch req.For {
	case api.WaitExit, api.WaitLog:
	case api.WaitPort, api.WaitHTTP:
		if req.Port < 1 || req.Port > 65535 {
			return nil, errdefs.Invalid("port %d: want 1 to 65535", req.Port)
		}
	default:
		return nil, errdefs.Invalid("for %q: want exit, port, http or log", req.For)
	}
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := ag.WaitBackground(ctx, &agentv1.WaitProcessRequest{
		Id: pid, Condition: req.For, Port: uint32(req.Port), Path: req.Path, Status: int32(req.Status),
		Pattern: req.Pattern, Stream: req.Stream, TimeoutMs: timeout.Milliseconds(),
	})
	if err != nil {
		return nil, err
	}
	return &api.WaitResult{Process: processToAPI(res.GetProcess()), Matched: res.GetMatched()}, nil
}

// LogsOptions select what Logs sends.
type LogsOptions struct {
	Stream string // "stdout", "stderr" or "both"
	Offset int64
	Follow bool
}

// Logs sends a process's kept output from an offset and, with
// Follow, new output until the process ends, then an end event carrying
// its final record. A followed stream counts as activity for as long as it
// is open. It returns an error only when nothing was sent.
func (s *Service) Logs(ctx context.Context, ref, pid string, o LogsOptions, emit func(api.ProcessLogEvent) error) error {
	if err := validProcRef(pid); err != nil {
		return err
	}
	switch o.Stream {
	case "", "both", api.LogStdout, api.LogStderr:
	default:
		return errdefs.Invalid("stream %q: want stdout, stderr or both", o.Stream)
	}
	if o.Offset < 0 {
		return errdefs.Invalid("offset must not be negative")
	}
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	return ag.BackgroundLogs(ctx, &agentv1.ProcessLogsRequest{Id: pid, Stream: o.Stream, Offset: o.Offset, Follow: o.Follow},
		func(ev *agentv1.ProcessLogsEvent) error {
			switch {
			case ev.GetData() != nil:
				d := ev.GetData()
				return emit(api.ProcessLogEvent{Type: d.GetStream(), Offset: d.GetOffset(), Data: d.GetData()})
			case ev.GetGap() != nil:
				g := ev.GetGap()
				return emit(api.ProcessLogEvent{Type: api.LogGap, Stream: g.GetStream(), Offset: g.GetOffset(), Dropped: g.GetDropped()})
			case ev.GetEnd() != nil:
				p := processToAPI(ev.GetEnd())
				return emit(api.ProcessLogEvent{Type: api.LogEnd, Process: &p})
			}
			return nil
		})
}

func logInfo(l *agentv1.LogInfo) api.LogInfo {
	return api.LogInfo{Start: l.GetStart(), End: l.GetEnd(), Truncated: l.GetTruncated(), Capacity: l.GetCapacity()}
}

func processToAPI(p *agentv1.BackgroundProcess) api.Process {
	out := api.Process{
		ID: p.GetId(), Pid: p.GetPid(), Cmd: p.GetCmd(), Cwd: p.GetCwd(), User: p.GetUser(), Status: p.GetStatus(),
		Signal: p.GetSignal(), Error: p.GetError(), StartedAt: time.Unix(0, p.GetStartedAtUnixNano()).UTC(),
		Stdout: logInfo(p.GetStdout()), Stderr: logInfo(p.GetStderr()),
	}
	if p.GetHasExitCode() {
		code := int(p.GetExitCode())
		out.ExitCode = &code
	}
	if p.GetEndedAtUnixNano() != 0 {
		t := time.Unix(0, p.GetEndedAtUnixNano()).UTC()
		out.EndedAt = &t
	}
	return out
}
