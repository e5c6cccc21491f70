package controller

import (
	"context"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Procs lists every process of a sandbox as the sandbox's own /proc shows
// it, not only those Paddock started; the agent is marked. Background
// processes a command left running (`npm run dev &`) show up here.
func (c *Controller) Procs(ctx context.Context, ref string) (*api.ProcList, error) {
	return withAgent(ctx, c, ref, func(ag *client.Client) (*api.ProcList, error) {
		return ag.Procs(ctx)
	})
}

// KillAll ends every process of a sandbox but its agent, without a
// restart: the sandbox keeps running and takes new commands and sessions.
// Background processes, sessions' shells, terminals and code contexts it
// ends show as ended by the signal in their own APIs.
func (c *Controller) KillAll(ctx context.Context, ref string, req api.KillAllRequest) (*api.KillAllResult, error) {
	var grace time.Duration
	if req.Grace != "" {
		d, err := time.ParseDuration(req.Grace)
		if err != nil || d < 0 || d > api.MaxKillAllGrace {
			return nil, errdefs.Invalid("grace %q: want a duration from 0s to %s", req.Grace, api.MaxKillAllGrace)
		}
		grace = d
	}
	ag, id, done, err := c.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := ag.KillAll(ctx, grace)
	if err != nil {
		return nil, err
	}
	_ = c.Record(ctx, id, api.LedgerEntry{Kind: api.LedgerKillAll, Data: map[string]string{
		"killed": strconv.Itoa(res.Killed), "rounds": strconv.Itoa(res.Rounds),
		"remaining": strconv.Itoa(len(res.Remaining)), "grace": grace.String(),
	}})
	return res, nil
}
