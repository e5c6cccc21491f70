package paddock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// maxRunEventLine bounds one event of a run stream: a result may carry a
// base64 PNG, larger than an output chunk.
const maxRunEventLine = 32 << 20

// CreateContext starts a code context (a persistent Python or JavaScript
// interpreter) in a sandbox. Contexts end when the sandbox stops.
func (c *Client) CreateContext(ctx context.Context, id string, req api.CreateContextRequest) (*api.CodeContext, error) {
	if req.ID == "" {
		return nil, fmt.Errorf("context id is empty: %w", ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/contexts")
	if err != nil {
		return nil, err
	}
	var out api.CodeContext
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListContexts lists a sandbox's code contexts, oldest first.
func (c *Client) ListContexts(ctx context.Context, id string) ([]api.CodeContext, error) {
	p, err := sandboxPath(id, "/contexts")
	if err != nil {
		return nil, err
	}
	var list api.CodeContextList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &list); err != nil {
		return nil, err
	}
	return list.Contexts, nil
}

// DeleteContext ends a code context's interpreter.
func (c *Client) DeleteContext(ctx context.Context, id, contextID string) error {
	e, err := escapeRef("context id", contextID)
	if err != nil {
		return err
	}
	p, err := sandboxPath(id, "/contexts/"+e)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// RunCodeOptions tune RunCode. The zero value is valid.
type RunCodeOptions struct {
	// Create makes the context with Language when it does not exist yet.
	Create   bool
	Language string
	// Timeout bounds the run; when it passes the code is interrupted. 0 =
	// the daemon's exec timeout.
	Timeout      time.Duration
	QueueTimeout time.Duration
	// Env holds variables for this run only; the context's own
	// environment is as before once the run ends.
	Env map[string]string
	// Stdout and Stderr receive output as it is written.
	Stdout, Stderr io.Writer
	// OnResult sees each result as it arrives, the main one included.
	OnResult func(CodeResult)
}

// CodeResult is a value a run produced: representations keyed by MIME
// type (image/png is base64).
type CodeResult struct {
	Data map[string]string
	// Main marks the value of the code's last expression.
	Main bool
}

// Text is the value's text/plain representation.
func (r CodeResult) Text() string { return r.Data["text/plain"] }

// RunCodeResult is how a run ended.
type RunCodeResult struct {
	ExecutionCount uint64
	Results        []CodeResult
	// Error is the exception the code raised, if any.
	Error *api.CodeError
	// Status is api.RunOK, RunError, RunTimeout or RunDead.
	Status      string
	TimedOut    bool
	ContextDead bool
	Note        string
	Duration    time.Duration
}

// Main returns the last expression's value, if the code ended with one.
func (r *RunCodeResult) Main() (CodeResult, bool) {
	for _, res := range r.Results {
		if res.Main {
			return res, true
		}
	}
	return CodeResult{}, false
}

// RunCode runs code in a sandbox's code context. An exception in the code
// is not an error: see RunCodeResult.Error and Status. An error means the
// run did not start or its end is unknown.
func (c *Client) RunCode(ctx context.Context, id, contextID, code string, opts RunCodeOptions) (*RunCodeResult, error) {
	res, err := c.runCode(ctx, id, contextID, code, opts)
	if err == nil || !opts.Create || !errors.Is(err, ErrNotFound) {
		return res, err
	}
	// The context (or the sandbox) is missing: a missing sandbox fails
	// the create too, and a context made meanwhile by another caller is
	// just as good.
	if _, cerr := c.CreateContext(ctx, id, api.CreateContextRequest{ID: contextID, Language: opts.Language}); cerr != nil && !errors.Is(cerr, ErrConflict) {
		return nil, cerr
	}
	return c.runCode(ctx, id, contextID, code, opts)
}

func (c *Client) runCode(ctx context.Context, id, contextID, code string, opts RunCodeOptions) (*RunCodeResult, error) {
	if opts.Timeout < 0 || opts.QueueTimeout < 0 {
		return nil, fmt.Errorf("run code: negative timeout: %w", ErrInvalidArgument)
	}
	e, err := escapeRef("context id", contextID)
	if err != nil {
		return nil, err
	}
	p, err := sandboxPath(id, "/contexts/"+e+"/run")
	if err != nil {
		return nil, err
	}
	req := api.RunCodeRequest{Code: code, Env: opts.Env}
	if opts.Timeout > 0 {
		req.Timeout = opts.Timeout.String()
	}
	if opts.QueueTimeout > 0 {
		req.QueueTimeout = opts.QueueTimeout.String()
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: p, jsonBody: req, accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res, err := readRunStream(resp.Body, opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return res, nil
}

// readRunStream consumes a run's NDJSON stream; separate so that the
// parser of untrusted input can be fuzzed on its own.
func readRunStream(r io.Reader, opts RunCodeOptions) (*RunCodeResult, error) {
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	er := newEventReader(r, maxRunEventLine)
	res := &RunCodeResult{}
	for {
		var ev api.RunCodeEvent
		if err := er.nextOrEnd(&ev, "run code", "end"); err != nil {
			return nil, err
		}
		switch ev.Type {
		case api.EventStart:
			res.ExecutionCount = ev.ExecutionCount
		case api.EventStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("run code: write stdout: %w", err)
			}
		case api.EventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("run code: write stderr: %w", err)
			}
		case api.RunEventResult:
			cr := CodeResult{Data: ev.Result, Main: ev.Main}
			res.Results = append(res.Results, cr)
			if opts.OnResult != nil {
				opts.OnResult(cr)
			}
		case api.RunEventError:
			if ev.Error != nil && res.Error == nil {
				res.Error = ev.Error
			}
		case api.EventEnd:
			res.Status, res.TimedOut, res.ContextDead, res.Note = ev.Status, ev.TimedOut, ev.ContextDead, ev.Note
			res.Duration = time.Duration(ev.DurationMs) * time.Millisecond
			return res, nil
		}
	}
}
