package codecontexts

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// codeRun collects what the ledger says about one run of code in a
// context, from the events the caller was sent.
type codeRun struct {
	context, code string
	end           *api.RunCodeEvent
	raised        string // the name of the first error the code raised
	callerGone    bool
	failed        error // the run did not start
}

func (r *codeRun) saw(ev api.RunCodeEvent) {
	switch {
	case ev.Type == api.EventEnd:
		e := ev
		r.end = &e
	case ev.Type == api.RunEventError && r.raised == "" && ev.Error != nil:
		r.raised = ev.Error.Name
		if r.raised == "" {
			r.raised = "error"
		}
	}
}

// maxLanguages bounds the languages remembered: past it they are all
// forgotten, and asked of the agents again as runs need them.
const maxLanguages = 10_000

// maxLedgerCodeStart bounds the first bytes of a run's code its entry
// keeps.
const maxLedgerCodeStart = 256

// languages remembers each context's language for its runs' entries (a
// run names only its context). It is a cache: what it lacks (a context
// made before a daemon restart, or forgotten past the bound) is asked of
// the agent.
type languages struct {
	mu sync.Mutex
	m  map[string]string // sandbox id + "/" + context id -> language
}

// remember keeps a context's language; "" forgets it.
func (l *languages) remember(sandboxID, contextID, lang string) {
	k := sandboxID + "/" + contextID
	l.mu.Lock()
	defer l.mu.Unlock()
	if lang == "" {
		delete(l.m, k)
		return
	}
	if l.m == nil || len(l.m) >= maxLanguages {
		l.m = make(map[string]string)
	}
	l.m[k] = lang
}

func (l *languages) get(sandboxID, contextID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[sandboxID+"/"+contextID]
}

// contextLanguage is a context's language: remembered from its creation,
// else (a context made before a daemon restart) asked of the agent.
func (s *Service) contextLanguage(ctx context.Context, sandboxID string, ag *client.Client, contextID string) string {
	if lang := s.langs.get(sandboxID, contextID); lang != "" {
		return lang
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	list, err := ag.ListContexts(lctx)
	if err != nil {
		return ""
	}
	for _, i := range list {
		if i.GetId() == contextID {
			s.langs.remember(sandboxID, contextID, i.GetLanguage())
			return i.GetLanguage()
		}
	}
	return ""
}

// recordRun writes a run's code_run entry: the context, its language, the
// code's size and first bytes, and how the run ended.
func (s *Service) recordRun(ctx context.Context, sandboxID string, ag *client.Client, r *codeRun) {
	l := ledger.NewCommand(api.LedgerCodeRun, nil)
	l.Data["context"] = r.context
	if lang := s.contextLanguage(ctx, sandboxID, ag, r.context); lang != "" {
		l.Data["language"] = lang
	}
	l.Data["code_bytes"] = strconv.Itoa(len(r.code))
	l.Data["code"] = ledger.CutUTF8(r.code, maxLedgerCodeStart)
	if len(l.Data["code"]) < len(r.code) {
		l.Data["code_truncated"] = "true"
	}
	end := &ledger.End{Data: map[string]string{}}
	switch {
	case r.failed != nil:
		end.Note = "the run did not start: " + r.failed.Error()
	case r.end == nil:
		end.Note = "no end: the caller went away and the run was interrupted"
	default:
		end.Data["status"] = r.end.Status
		end.TimedOut = r.end.TimedOut
		end.Duration = time.Duration(r.end.DurationMs) * time.Millisecond
		if r.end.ContextDead {
			end.Data["context_dead"] = "true"
		}
		end.Note = r.end.Note
		if r.callerGone {
			end.Note = "the caller went away before the end"
		}
	}
	if r.raised != "" {
		end.Data["error"] = r.raised
	}
	_ = s.core.Record(ctx, sandboxID, l.Entry(end))
}
