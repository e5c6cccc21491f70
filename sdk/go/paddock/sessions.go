package paddock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// CreateSession starts a persistent shell session in a sandbox. Run
// commands in it with Exec and ExecOptions.Session; api.DefaultSession
// exists without being created. Sessions end when the sandbox stops.
func (c *Client) CreateSession(ctx context.Context, id string, req api.CreateSessionRequest) (*api.Session, error) {
	if req.Name == "" {
		return nil, fmt.Errorf("session name is empty: %w", ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/sessions")
	if err != nil {
		return nil, err
	}
	var s api.Session
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists a sandbox's sessions, oldest first.
func (c *Client) ListSessions(ctx context.Context, id string) ([]api.Session, error) {
	p, err := sandboxPath(id, "/sessions")
	if err != nil {
		return nil, err
	}
	var list api.SessionList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &list); err != nil {
		return nil, err
	}
	return list.Sessions, nil
}

// DeleteSession ends a session's shell and the jobs it started in the
// background; background processes started with StartProcess are not
// touched.
func (c *Client) DeleteSession(ctx context.Context, id, name string) error {
	e, err := escapeRef("session name", name)
	if err != nil {
		return err
	}
	p, err := sandboxPath(id, "/sessions/"+e)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// StartProcess starts a background process; it keeps running after the
// call returns. Its output is kept in a ring buffer per stream (see
// ProcessLogs).
func (c *Client) StartProcess(ctx context.Context, id string, req api.StartProcessRequest) (*api.Process, error) {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return nil, fmt.Errorf("start process: no command given: %w", ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/processes")
	if err != nil {
		return nil, err
	}
	var out api.Process
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListProcesses lists a sandbox's background processes, running and ended.
func (c *Client) ListProcesses(ctx context.Context, id string) ([]api.Process, error) {
	p, err := sandboxPath(id, "/processes")
	if err != nil {
		return nil, err
	}
	var list api.ProcessList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &list); err != nil {
		return nil, err
	}
	return list.Processes, nil
}

func processPath(id, pid, suffix string) (string, error) {
	e, err := escapeRef("process id", pid)
	if err != nil {
		return "", err
	}
	return sandboxPath(id, "/processes/"+e+suffix)
}

// GetProcess describes one background process, by its id or its pid.
func (c *Client) GetProcess(ctx context.Context, id, pid string) (*api.Process, error) {
	p, err := processPath(id, pid, "")
	if err != nil {
		return nil, err
	}
	var out api.Process
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KillProcess sends req.Signal (default SIGTERM) to the process group and
// SIGKILL after req.Grace (default 10s), and returns the ended process.
func (c *Client) KillProcess(ctx context.Context, id, pid string, req api.KillProcessRequest) (*api.Process, error) {
	p, err := processPath(id, pid, "/kill")
	if err != nil {
		return nil, err
	}
	var out api.Process
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitProcess waits for a process to exit, open a port, answer an HTTP
// status or print a line matching a pattern. When the process ends first
// the error wraps ErrFailedPrecondition; a timeout wraps
// ErrDeadlineExceeded. Both quote the process's last output.
func (c *Client) WaitProcess(ctx context.Context, id, pid string, req api.WaitProcessRequest) (*api.WaitResult, error) {
	p, err := processPath(id, pid, "/wait")
	if err != nil {
		return nil, err
	}
	var out api.WaitResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitPort waits until the process's port accepts TCP connections inside
// the sandbox.
func (c *Client) WaitPort(ctx context.Context, id, pid string, port int, timeout time.Duration) (*api.WaitResult, error) {
	return c.WaitProcess(ctx, id, pid, api.WaitProcessRequest{For: api.WaitPort, Port: port, Timeout: durationText(timeout)})
}

func durationText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

// LogsOptions select and receive a process's output.
type LogsOptions struct {
	// Stream is "stdout", "stderr" or "" for both.
	Stream string
	// Offset is the byte offset to start at in each selected stream.
	Offset int64
	// Follow keeps the stream open until the process ends.
	Follow bool
	// Stdout and Stderr receive the output; nil discards it.
	Stdout, Stderr io.Writer
}

// LogsResult says where reading stopped.
type LogsResult struct {
	// StdoutOffset and StderrOffset are where to resume each stream.
	StdoutOffset, StderrOffset int64
	// Dropped counts bytes that were no longer kept when asked for.
	Dropped int64
	// Process is the ended process when the stream was followed to its end.
	Process *api.Process
}

// ProcessLogs reads a process's kept output from opts.Offset and, with
// Follow, its new output until it ends. A followed stream that breaks
// before the end is an error: it never reports an end that did not happen.
func (c *Client) ProcessLogs(ctx context.Context, id, pid string, opts LogsOptions) (*LogsResult, error) {
	p, err := processPath(id, pid, "/logs")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Stream != "" {
		q.Set("stream", opts.Stream)
	}
	if opts.Offset != 0 {
		q.Set("offset", strconv.FormatInt(opts.Offset, 10))
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: p, query: q, accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res, err := readLogStream(resp.Body, opts)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return res, cerr
		}
		return res, err
	}
	return res, nil
}

// readLogStream consumes a log NDJSON stream; separate so that the parser
// of untrusted input can be fuzzed on its own.
func readLogStream(r io.Reader, opts LogsOptions) (*LogsResult, error) {
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	res := &LogsResult{StdoutOffset: opts.Offset, StderrOffset: opts.Offset}
	er := newEventReader(r, MaxEventLine)
	for {
		var ev api.ProcessLogEvent
		if err := er.next(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				if opts.Follow {
					return res, fmt.Errorf("logs: stream ended before the process did: %w", ErrUnavailable)
				}
				return res, nil
			}
			return res, fmt.Errorf("logs: %w", err)
		}
		switch ev.Type {
		case api.LogStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return res, fmt.Errorf("logs: write stdout: %w", err)
			}
			res.StdoutOffset = ev.Offset + int64(len(ev.Data))
		case api.LogStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return res, fmt.Errorf("logs: write stderr: %w", err)
			}
			res.StderrOffset = ev.Offset + int64(len(ev.Data))
		case api.LogGap:
			if ev.Dropped > 0 {
				res.Dropped += ev.Dropped
			}
		case api.LogEnd:
			if ev.Process == nil {
				return res, fmt.Errorf("logs: end event without the process: %w", ErrUnavailable)
			}
			res.Process = ev.Process
			return res, nil
		}
	}
}
