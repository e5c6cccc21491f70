package controller

import (
	"context"
	"strconv"
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

// rememberLanguage keeps a context's language for its runs' entries (a
// run names only its context); "" forgets it.
func (c *Controller) rememberLanguage(sandboxID, contextID, lang string) {
	e := c.entry(sandboxID)
	e.langMu.Lock()
	defer e.langMu.Unlock()
	if lang == "" {
		delete(e.langs, contextID)
		return
	}
	if e.langs == nil {
		e.langs = make(map[string]string)
	}
	e.langs[contextID] = lang
}

// contextLanguage is a context's language: remembered from its creation,
// else (a context made before a daemon restart) asked of the agent.
func (c *Controller) contextLanguage(ctx context.Context, sandboxID string, ag *client.Client, contextID string) string {
	e := c.entry(sandboxID)
	e.langMu.Lock()
	lang := e.langs[contextID]
	e.langMu.Unlock()
	if lang != "" {
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
			c.rememberLanguage(sandboxID, contextID, i.GetLanguage())
			return i.GetLanguage()
		}
	}
	return ""
}

// recordRun writes a run's code_run entry: the context, its language, the
// code's size and first bytes, and how the run ended.
func (c *Controller) recordRun(ctx context.Context, sandboxID string, ag *client.Client, r *codeRun) {
	l := ledger.NewCommand(api.LedgerCodeRun, nil)
	l.Data["context"] = r.context
	if lang := c.contextLanguage(ctx, sandboxID, ag, r.context); lang != "" {
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
	_ = c.Record(ctx, sandboxID, l.Entry(end))
}
