package processes

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// A background process's end reaches the daemon only when it asks: the
// agent keeps the process and its status, and answers a wait. So for each
// process it starts, the daemon waits for the end in the background (one
// long wait at a time, renewed every hour) and records it. A wait cut off
// (the sandbox stopped, was destroyed, or froze long enough to miss the
// connection's pings) is followed by a look at the sandbox: gone or
// restarted means the process ended with it, paused means wait again once
// it runs. A process that ends while no daemon runs (during a restart) is
// not followed by the next one, and gets no end entry.

// processWaitRetry is the pause between looks at a sandbox whose process
// wait was cut off.
const processWaitRetry = 2 * time.Second

// recordStart records a started background process and follows it to its
// end in the background.
func (s *Service) recordStart(ctx context.Context, sandboxID string, ag *client.Client, req api.StartProcessRequest, p *agentv1.BackgroundProcess) {
	l := ledger.NewCommand(api.LedgerProcessStart, req.Cmd)
	l.User, l.Cwd, l.Env = req.User, req.Cwd, req.Env
	if p.GetUser() != "" {
		l.User = p.GetUser()
	}
	l.Data["process"] = p.GetId()
	if p.GetPid() != 0 {
		l.Data["pid"] = strconv.FormatUint(uint64(p.GetPid()), 10)
	}
	_ = s.core.Record(ctx, sandboxID, l.Entry(nil))
	end := *l
	end.Kind, end.Env = api.LedgerProcessEnd, nil
	go s.follow(sandboxID, ag, &end, p.GetId())
}

func (s *Service) follow(sandboxID string, ag *client.Client, l *ledger.Command, procID string) {
	ctx, cancel := s.core.UntilClose()
	defer cancel()
	for {
		res, err := ag.WaitBackground(ctx, &agentv1.WaitProcessRequest{
			Id: procID, Condition: api.WaitExit, TimeoutMs: maxWaitTimeout.Milliseconds(),
		})
		switch {
		case ctx.Err() != nil:
			return // the daemon is stopping; see above
		case err == nil:
			_ = s.core.Record(ctx, sandboxID, l.Entry(processEnd(res.GetProcess(), l.Start)))
			return
		case errors.Is(err, errdefs.ErrDeadlineExceeded):
			// Still running after an hour's wait. The pause keeps an agent
			// that answers every wait at once from spinning this loop; a
			// process that ends meanwhile is still found by the next wait.
			select {
			case <-ctx.Done():
				return
			case <-time.After(processWaitRetry):
			}
			continue
		case errors.Is(err, errdefs.ErrNotFound):
			_ = s.core.Record(ctx, sandboxID, l.Entry(&ledger.End{Note: "end unknown: the sandbox no longer knows the process (it keeps a bounded number of ended ones)"}))
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(processWaitRetry):
			}
			now, st := s.core.AgentSince(ctx, sandboxID, ag)
			if st == Gone {
				_ = s.core.Record(ctx, sandboxID, l.Entry(&ledger.End{Note: "end unknown: the sandbox stopped, restarted or was destroyed, which ended the process"}))
				return
			}
			if st == Same {
				ag = now
				break
			}
		}
	}
}

// processEnd reads a process's final record. The times are the sandbox's
// clock; a duration they cannot give is measured by the daemon.
func processEnd(p *agentv1.BackgroundProcess, start time.Time) *ledger.End {
	end := &ledger.End{Signal: p.GetSignal(), Data: map[string]string{"status": p.GetStatus()}}
	if p.GetHasExitCode() {
		code := int(p.GetExitCode())
		end.ExitCode = &code
	}
	if s, e := p.GetStartedAtUnixNano(), p.GetEndedAtUnixNano(); s > 0 && e > s {
		end.Duration = time.Duration(e - s)
	} else {
		end.Duration = time.Since(start)
	}
	if p.GetError() != "" {
		end.Note = "the process failed: " + p.GetError()
	}
	return end
}
