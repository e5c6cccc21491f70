package controller

import (
	"context"
	"errors"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/processes"
	"github.com/paddock-dev/paddock/internal/controller/sessions"
	"github.com/paddock-dev/paddock/internal/controller/terminals"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// The background processes subsystem (internal/controller/processes) sits
// beneath the core: a template's start command is one of its processes,
// started and waited for inside the core's create. The core makes it in
// New, handing it itself as its Core, and the API server reaches it
// through Processes. The shell sessions and terminals subsystems are made
// the same way; the core has the terminals subsystem adopt a sandbox's
// terminals when it adopts the sandbox (reconcile.go, hibernate.go).

var (
	_ processes.Core = (*Controller)(nil)
	_ sessions.Core  = (*Controller)(nil)
	_ terminals.Core = (*Controller)(nil)
)

// Processes is the background processes subsystem.
func (c *Controller) Processes() *processes.Service { return c.procs }

// Sessions is the shell sessions subsystem (internal/controller/sessions),
// also beneath the core: an exec naming a session is one of the core's
// execs, which it hands to the subsystem.
func (c *Controller) Sessions() *sessions.Service { return c.sessions }

// Terminals is the terminals subsystem (internal/controller/terminals).
func (c *Controller) Terminals() *terminals.Service { return c.terms }

// SandboxState finds the sandbox ref names for ctx's caller: its id and
// state.
func (c *Controller) SandboxState(ctx context.Context, ref string) (id, state string, err error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return "", "", err
	}
	return rec.ID, rec.State, nil
}

// LiveAgent is the agent of sandbox id while it runs, nil otherwise: read
// under the sandbox's lock, so not one a stop is taking away.
func (c *Controller) LiveAgent(ctx context.Context, id string) *client.Client {
	e := c.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := c.resolve(ctx, id)
	if err != nil || rec.State != api.StateRunning {
		return nil
	}
	return e.agent
}

// Closed says whether Close has been called.
func (c *Controller) Closed() bool { return c.closed() }

// UntilClose is a context that ends when the controller closes, for work a
// subsystem keeps going in the background; cancel releases it earlier.
func (c *Controller) UntilClose() (context.Context, context.CancelFunc) { return c.untilClose() }

// AgentSince says how sandboxID stands for the processes ag reached, and,
// when it is processes.Same, the client that reaches them now (ag itself, or
// its successor through restores, hibernate.go).
func (c *Controller) AgentSince(ctx context.Context, sandboxID string, ag *client.Client) (*client.Client, processes.State) {
	rec, err := c.resolve(ctx, sandboxID)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, processes.Gone
		}
		return nil, processes.Away // the store did not answer: look again
	}
	switch rec.State {
	case api.StatePaused, api.StateCreating, api.StateHibernating, api.StateHibernated:
		return nil, processes.Away
	case api.StateRunning:
		e := c.entry(sandboxID)
		e.mu.Lock()
		cur, now := e.agent, e.current(ag)
		e.mu.Unlock()
		switch {
		case cur == nil:
			return nil, processes.Away // being adopted or started: look again
		case now == cur:
			return now, processes.Same // the same processes (through a restore, maybe)
		}
	}
	return nil, processes.Gone
}
