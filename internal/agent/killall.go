package agent

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Routes of the sandbox-wide process table: every process the sandbox's
// /proc shows, and the way to end them all but the agent.
const (
	ProcsPath   = wire.ProcsPath
	KillAllPath = wire.KillAllPath
)

// Bounds of a kill-all. killAllBudget bounds the SIGKILL rounds: a fork
// bomb is bounded by the sandbox's pids limit, and every round ends every
// process alive at once, so rounds past the first are for the children
// forked while it ran. A sandbox short of CPU (a fork bomb busy in a
// gVisor sandbox on a loaded host) can take seconds for one look at its
// processes: the rounds go on past the budget until there have been
// killAllMinRounds, so a slow round does not end the kill-all with the
// bomb still growing back.
const (
	killAllBudget    = 5 * time.Second
	killAllMinRounds = 10
	killAllMaxPause  = 50 * time.Millisecond
)

// procScope says which processes of /proc the agent may list and signal.
// As PID 1 of the sandbox (always, under runc and gVisor) its /proc is
// the sandbox's PID namespace and nothing else, and kill(-1) reaches that
// namespace only, never the agent itself or a process outside. Run any
// other way (tests, by hand) it keeps to itself and its descendants.
type procScope struct {
	root string // the procfs mount, "/proc"
	self int
}

func (s procScope) init() bool { return s.self == 1 }

// look reads every process in scope. Unreadable entries are processes
// that ended meanwhile and are skipped.
func (s procScope) look() []osproc.Stat {
	out := osproc.All(s.root)
	if !s.init() {
		out = descendantsOf(out, s.self)
	}
	slices.SortFunc(out, func(a, b osproc.Stat) int { return a.Pid - b.Pid })
	return out
}

// descendantsOf keeps self and the processes below it.
func descendantsOf(all []osproc.Stat, self int) []osproc.Stat {
	keep := osproc.Below(all, self)
	keep[self] = true
	out := make([]osproc.Stat, 0, len(keep))
	for _, st := range all {
		if keep[st.Pid] {
			out = append(out, st)
		}
	}
	return out
}

// describe completes a look into the API's form.
func (a *Agent) describe(s procScope, list []osproc.Stat) []api.Proc {
	now := time.Now()
	var uptime float64
	if b, err := osproc.ReadBounded(s.root+"/uptime", 256); err == nil {
		uptime, _ = osproc.ParseUptime(b)
	}
	page := int64(os.Getpagesize())
	names := map[uint32]string{}
	out := make([]api.Proc, 0, len(list))
	for _, st := range list {
		p := api.Proc{
			Pid: st.Pid, PPid: st.PPid, State: string(st.State), Comm: st.Comm,
			Threads: st.Threads, Agent: st.Pid == s.self,
		}
		if st.RSSPages < math.MaxInt64/page {
			p.RSSBytes = st.RSSPages * page
		}
		if uptime > 0 {
			age := uptime - float64(st.StartTicks)/osproc.ClockTicks
			p.StartedAt = now.Add(-time.Duration(max(age, 0) * float64(time.Second))).UTC().Truncate(10 * time.Millisecond)
		}
		dir := s.root + "/" + strconv.Itoa(st.Pid)
		if b, err := osproc.ReadBounded(dir+"/status", osproc.MaxStatusBytes); err == nil {
			if uid, ok := osproc.ParseStatusUID(b); ok {
				p.UID = uid
				name, ok := names[uid]
				if !ok {
					name = a.users.UserName(uid)
					if name == strconv.FormatUint(uint64(uid), 10) {
						name = ""
					}
					names[uid] = name
				}
				p.User = name
			}
		}
		if b, err := osproc.ReadBounded(dir+"/cmdline", api.MaxProcCmdBytes+1); err == nil {
			p.Cmd, p.CmdTruncated = osproc.ParseCmdline(b, api.MaxProcCmdBytes)
		}
		out = append(out, p)
	}
	return out
}

func (a *Agent) scope() procScope { return procScope{root: "/proc", self: os.Getpid()} }

// listProcs lists every process of the sandbox, the agent included.
func (a *Agent) listProcs(s procScope) api.ProcList {
	list := s.look()
	var out api.ProcList
	if len(list) > api.MaxProcs {
		list, out.Truncated = list[:api.MaxProcs], true
	}
	out.Procs = a.describe(s, list)
	return out
}

// procKey tells a process from a later one given its pid.
type procKey struct {
	pid   int
	start uint64
}

func dead(st osproc.Stat) bool { return st.State == 'Z' || st.State == 'X' || st.State == 'x' }

// killAll ends every process of the sandbox but the agent: SIGTERM and up
// to grace to go first when grace > 0, then SIGKILL rounds until none is
// left or killAllBudget passes. New processes the agent would start wait
// meanwhile, and a session whose shell dies is not given a new one, so
// the agent itself respawns nothing; what the processes fork themselves
// dies in the next round (at least killAllMinRounds of them, however long
// they take, while any is left). Processes Paddock tracks end as killed by the
// signal in their own APIs.
func (a *Agent) killAll(ctx context.Context, s procScope, grace time.Duration) api.KillAllResult {
	a.startGate.Lock()
	defer a.startGate.Unlock()
	a.sessions.MarkKilled()

	seen := map[procKey]bool{}
	alive := func() []osproc.Stat {
		var out []osproc.Stat
		for _, st := range s.look() {
			if st.Pid == s.self || dead(st) {
				continue
			}
			seen[procKey{st.Pid, st.StartTicks}] = true
			out = append(out, st)
		}
		return out
	}
	signal := func(list []osproc.Stat, sig syscall.Signal) {
		if s.init() {
			// The kernel (or gVisor's sentry) walks the sandbox's PID
			// namespace itself, skipping the agent: no pid is reused
			// between a look and the signal, and no process forked
			// during the walk escapes it.
			_ = unix.Kill(-1, sig)
			return
		}
		for _, st := range list {
			_ = unix.Kill(st.Pid, sig)
		}
	}

	res := api.KillAllResult{Remaining: []api.Proc{}}
	list := alive()
	if grace > 0 && len(list) > 0 {
		signal(list, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for len(list) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			list = alive()
		}
	}
	deadline := time.Now().Add(killAllBudget)
	pause := 2 * time.Millisecond
	for len(list) > 0 && (time.Now().Before(deadline) || res.Rounds < killAllMinRounds) && ctx.Err() == nil {
		signal(list, syscall.SIGKILL)
		res.Rounds++
		time.Sleep(pause)
		pause = min(2*pause, killAllMaxPause)
		list = alive()
	}
	if len(list) > api.MaxProcs {
		list = list[:api.MaxProcs]
	}
	res.Remaining = a.describe(s, list)
	res.Killed = len(seen) - len(list)
	a.log.Info("killed every process", "killed", res.Killed, "rounds", res.Rounds, "remaining", len(list))
	return res
}

func (a *Agent) handleProcs(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(a.listProcs(a.scope()))
}

// handleKillAll takes ?grace=DURATION (default 0).
func (a *Agent) handleKillAll(w http.ResponseWriter, r *http.Request) {
	var grace time.Duration
	if g := r.URL.Query().Get("grace"); g != "" {
		d, err := time.ParseDuration(g)
		if err != nil || d < 0 || d > api.MaxKillAllGrace {
			reply.Error(w, errdefs.Invalid("grace %q: a duration from 0s to %s", g, api.MaxKillAllGrace))
			return
		}
		grace = d
	}
	res := a.killAll(r.Context(), a.scope(), grace)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(res)
}

// startChild forks a child through the reaper, unless a kill-all runs:
// then it waits for its end.
func (a *Agent) startChild(fork func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	a.startGate.RLock()
	defer a.startGate.RUnlock()
	return osproc.StartReaper(a.log).Start(fork)
}
