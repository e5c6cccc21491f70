package agent

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Terminals the daemon opens carry a tag with this prefix. The agent keeps
// their recent output and, once they end, how they ended, because the agent
// outlives the daemon: a restarted daemon finds its terminals here and
// replays their output to whoever reattaches.
const (
	TerminalTagPrefix = wire.TerminalTagPrefix
	// TerminalsPath lists the kept terminals as JSON.
	TerminalsPath = wire.TerminalsPath
	// termKeepBytes matches the daemon's replay buffer per terminal.
	termKeepBytes = 256 << 10
	// maxEndedTerms bounds the ended terminals remembered for a daemon
	// that was away when they ended; the oldest are forgotten first.
	maxEndedTerms = 64
	// replayChunk keeps each replayed event well under message limits.
	replayChunk = 32 << 10
)

// TerminalState is one kept terminal, as TerminalsPath reports it.
type TerminalState struct {
	Tag      string   `json:"tag"`
	Pid      uint32   `json:"pid"`
	Cmd      []string `json:"cmd"`
	Cols     int      `json:"cols"`
	Rows     int      `json:"rows"`
	Created  int64    `json:"created_unix_nano"`
	Exited   bool     `json:"exited"`
	ExitCode int      `json:"exit_code"`
	Signal   string   `json:"signal,omitempty"`
}

// termKeep is what the agent remembers about one terminal process.
type termKeep struct {
	out     *osproc.Ring
	created time.Time

	mu         sync.Mutex
	cols, rows int
}

func isTerminalTag(tag string) bool { return strings.HasPrefix(tag, TerminalTagPrefix) }

func newTermKeep(cols, rows int) *termKeep {
	return &termKeep{out: osproc.NewRing(termKeepBytes), created: time.Now(), cols: cols, rows: rows}
}

func (k *termKeep) setSize(cols, rows int) {
	k.mu.Lock()
	k.cols, k.rows = cols, rows
	k.mu.Unlock()
}

// record keeps terminal output; the caller holds the process's subMu, so a
// replay snapshot taken under the same lock is exactly what a new
// subscriber missed.
func (k *termKeep) record(ev *process.ProcessEvent) {
	if b := ev.GetData().GetPty(); len(b) > 0 {
		k.out.Write(b)
	}
}

// subscribeReplay subscribes to p with its kept output queued first, so a
// reattaching follower sees every byte once: the replay, then live output.
func (p *proc) subscribeReplay() *subscriber {
	if p.term == nil {
		return p.subscribe()
	}
	p.subMu.Lock()
	defer p.subMu.Unlock()
	replay := p.term.out.Tail(termKeepBytes)
	n := (len(replay) + replayChunk - 1) / replayChunk
	s := &subscriber{ch: make(chan *process.ProcessEvent, 4+n), gone: make(chan struct{})}
	for len(replay) > 0 {
		c := replay[:min(len(replay), replayChunk)]
		replay = replay[len(c):]
		s.ch <- &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
			Output: &process.ProcessEvent_DataEvent_Pty{Pty: c}}}}
	}
	p.subs[s] = struct{}{}
	return s
}

// endedTerms remembers terminals that ended, by tag, oldest first.
type endedTerms struct {
	order []*proc
}

func (e *endedTerms) add(p *proc) {
	e.order = append(e.order, p)
	if len(e.order) > maxEndedTerms {
		e.order = append(e.order[:0], e.order[len(e.order)-maxEndedTerms:]...)
	}
}

func (e *endedTerms) get(tag string) *proc {
	for _, p := range e.order {
		if p.tag == tag {
			return p
		}
	}
	return nil
}

func (e *endedTerms) drop(tag string) {
	for i, p := range e.order {
		if p.tag == tag {
			e.order = append(e.order[:i], e.order[i+1:]...)
			return
		}
	}
}

func (p *proc) terminalState() TerminalState {
	cfg := p.info.GetConfig()
	st := TerminalState{Tag: p.tag, Pid: uint32(p.pid), Cmd: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		Created: p.term.created.UnixNano()}
	p.term.mu.Lock()
	st.Cols, st.Rows = p.term.cols, p.term.rows
	p.term.mu.Unlock()
	select {
	case <-p.done:
		st.Exited, st.ExitCode = true, int(p.end.GetExitCode())
		if !p.end.GetExited() {
			st.Signal = strings.TrimPrefix(p.end.GetStatus(), "signal: ")
		}
	default:
	}
	return st
}

// terminals lists the running and remembered terminals, oldest first.
func (t *procTable) terminals() []TerminalState {
	t.mu.Lock()
	var ps []*proc
	for _, p := range t.byTag {
		if p.term != nil {
			ps = append(ps, p)
		}
	}
	ps = append(ps, t.ended.order...)
	t.mu.Unlock()
	out := make([]TerminalState, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.terminalState())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created < out[j].Created })
	return out
}

func (a *Agent) handleTerminals(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(a.procs.terminals())
}

func (t *procTable) forgetEnded(tag string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended.drop(tag)
}
