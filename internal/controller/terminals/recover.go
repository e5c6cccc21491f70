package terminals

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// The agent is the source of truth for terminals: it runs their processes,
// keeps their recent output and remembers how the ones that ended while no
// daemon followed them ended. A daemon that starts (or restarts) adopts what
// the agent reports, so shells outlive a daemon upgrade or crash.

var termIDRE = regexp.MustCompile(`^t[0-9a-z]{12}$`)

// recoverWait bounds how long adopting an ended terminal waits for its kept
// output and exit status, so a listing shows how it ended.
const recoverWait = 5 * time.Second

// maxAdopt bounds the terminals adopted from one agent: the running ones it
// may have plus the ended ones it remembers.
const maxAdopt = 2 * api.MaxTerminals

// termRecovery records, per sandbox, the agent connection whose terminals
// were adopted; a new connection (the sandbox restarted, or the daemon did)
// is asked again.
type termRecovery struct {
	mu    sync.Mutex
	done  map[string]*client.Client
	locks map[string]*sync.Mutex // one per sandbox: a slow agent holds up only its own
}

// lock serializes recoveries of one sandbox.
func (r *termRecovery) lock(id string) func() {
	r.mu.Lock()
	if r.locks == nil {
		r.locks = make(map[string]*sync.Mutex)
	}
	l := r.locks[id]
	if l == nil {
		l = new(sync.Mutex)
		r.locks[id] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (r *termRecovery) adopted(id string, ag *client.Client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[id] == ag
}

func (r *termRecovery) markAdopted(id string, ag *client.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = make(map[string]*client.Client)
	}
	r.done[id] = ag
}

func terminalTag(tid string) string { return client.TerminalTagPrefix + tid }

// recoverTerminals adopts the terminals the sandbox's agent keeps that this
// daemon does not follow yet. Failures are logged: the terminals stay in the
// agent and the next call tries again.
func (s *Service) Recover(ctx context.Context, id string) {
	ag := s.core.LiveAgent(ctx, id)
	if ag == nil {
		return
	}
	r := &s.terms.recovery
	if r.adopted(id, ag) {
		return
	}
	defer r.lock(id)()
	if r.adopted(id, ag) {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	states, err := ag.Terminals(lctx)
	if errors.Is(err, errdefs.ErrNotFound) {
		// An agent from before terminals were kept: nothing to adopt.
		r.markAdopted(id, ag)
		return
	}
	if err != nil {
		s.log.Warn("list the sandbox's terminals", "sandbox", id, "err", err)
		return
	}
	if len(states) > maxAdopt {
		// More than the agent should keep: adopt the newest, not whatever
		// a misbehaving agent sends.
		s.log.Warn("agent reports more terminals than it may have", "sandbox", id, "count", len(states))
		states = states[len(states)-maxAdopt:]
	}
	var ended []*terminal
	for _, st := range states {
		tid := strings.TrimPrefix(st.Tag, client.TerminalTagPrefix)
		if !termIDRE.MatchString(tid) || s.terms.get(id, tid) != nil {
			continue
		}
		sctx, stop := s.core.UntilClose()
		stream, pid, err := ag.ConnectPTY(sctx, st.Tag)
		if err != nil {
			// It ended and someone read its end in between: nothing to adopt.
			stop()
			s.log.Info("terminal gone before it could be adopted", "sandbox", id, "terminal", tid, "err", err)
			continue
		}
		cols, rows := st.Cols, st.Rows
		if checkSize(cols, rows) != nil {
			cols, rows = 80, 24
		}
		t := &terminal{
			id: tid, sandbox: id, ag: ag, pid: pid, cmd: st.Cmd,
			created: time.Unix(0, st.Created).UTC(), stop: stop, cols: cols, rows: rows,
			clients: make(map[*Conn]struct{}), done: make(chan struct{}),
		}
		if !st.Exited {
			t.ledger = adoptedTerminalLedger(t) // terminalledger.go
		}
		s.terms.add(t)
		t.armDetached()
		go s.follow(t, stream)
		if st.Exited {
			ended = append(ended, t)
		}
		s.log.Info("terminal adopted", "sandbox", id, "terminal", tid, "pid", pid, "exited", st.Exited)
	}
	deadline := time.NewTimer(recoverWait)
	defer deadline.Stop()
	for _, t := range ended {
		select {
		case <-t.done:
		case <-deadline.C:
		}
	}
	r.markAdopted(id, ag)
}

// armDetached starts the detached timer of a terminal nobody is attached to.
func (t *terminal) armDetached() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.clients) == 0 && !t.exited && t.detached == nil {
		t.detached = time.AfterFunc(termDetachedLimit, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = t.kill(ctx)
		})
	}
}

// noTerminal explains a terminal that is not there: a sandbox that is not
// running has no terminals, since stopping it ended them.
func (s *Service) noTerminal(ctx context.Context, id, tid string) error {
	if _, state, err := s.core.SandboxState(ctx, id); err == nil && state != api.StateRunning {
		return errdefs.NotFound("terminal %q in sandbox %s: the sandbox is %s, and stopping it ended its terminals", tid, id, state)
	}
	return errdefs.NotFound("terminal %q in sandbox %s", tid, id)
}
