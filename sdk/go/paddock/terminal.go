package paddock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/paddock-dev/paddock/api"
)

// TerminalOptions describe a new terminal. Zero values take the daemon's
// defaults: the user's login shell, 80x24, user "user".
type TerminalOptions struct {
	Cmd        []string
	Env        map[string]string
	Cwd        string
	User       string
	Cols, Rows int
}

// TerminalExit is how a terminal's process ended.
type TerminalExit struct {
	ExitCode int    // -1 when killed by a signal
	Signal   string // e.g. "SIGKILL"
}

// Terminal is a connection to a PTY in a sandbox. Read gives its output
// (after an attach, the recent output first), Write sends keystrokes.
// Closing detaches: the terminal keeps running and can be attached again
// by ID. Read returns io.EOF once the process has ended; Wait says how.
type Terminal struct {
	conn   *websocket.Conn
	info   api.Terminal
	pr     *io.PipeReader
	cancel context.CancelFunc

	done chan struct{}
	mu   sync.Mutex
	exit *TerminalExit
	err  error
}

// maxTerminalFrame bounds one message from the daemon.
const maxTerminalFrame = 8 << 20

// OpenTerminal starts a new terminal in a sandbox and attaches to it.
func (c *Client) OpenTerminal(ctx context.Context, id string, o TerminalOptions) (*Terminal, error) {
	q := url.Values{}
	q["cmd"] = o.Cmd
	for k, v := range o.Env {
		q.Add("env", k+"="+v)
	}
	if o.Cwd != "" {
		q.Set("cwd", o.Cwd)
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if o.Cols > 0 || o.Rows > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	return c.dialTerminal(ctx, id, q)
}

// AttachTerminal attaches to a terminal by id; its recent output (up to
// api.TerminalReplayKB KiB) is read first.
func (c *Client) AttachTerminal(ctx context.Context, id, terminalID string) (*Terminal, error) {
	if terminalID == "" {
		return nil, fmt.Errorf("terminal id is empty: %w", ErrInvalidArgument)
	}
	return c.dialTerminal(ctx, id, url.Values{"terminal": {terminalID}})
}

// Terminals lists a sandbox's terminals.
func (c *Client) Terminals(ctx context.Context, id string) ([]api.Terminal, error) {
	p, err := sandboxPath(id, "/terminals")
	if err != nil {
		return nil, err
	}
	var out api.TerminalList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return out.Terminals, nil
}

// KillTerminal kills a terminal's process.
func (c *Client) KillTerminal(ctx context.Context, id, terminalID string) error {
	e, err := escapeRef("terminal id", terminalID)
	if err != nil {
		return err
	}
	p, err := sandboxPath(id, "/terminals/"+e)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

func (c *Client) dialTerminal(ctx context.Context, id string, q url.Values) (*Terminal, error) {
	if ctx == nil {
		return nil, fmt.Errorf("nil context: %w", ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/pty")
	if err != nil {
		return nil, err
	}
	ep, err := c.resolve()
	if err != nil {
		return nil, err
	}
	h := http.Header{"User-Agent": {"paddock-go-sdk"}}
	if key := c.apiKey(); key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	conn, resp, err := websocket.Dial(ctx, ep.base+p+"?"+q.Encode(), &websocket.DialOptions{HTTPClient: c.httpClient(ep), HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		return nil, transportError(ctx, ep, err)
	}
	conn.SetReadLimit(maxTerminalFrame)
	typ, b, err := conn.Read(ctx)
	var ready api.PTYMessage
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &ready) != nil || ready.Type != api.PTYReady || ready.Terminal == nil {
		conn.CloseNow()
		return nil, fmt.Errorf("terminal: daemon did not send its ready message: %w", ErrUnavailable)
	}
	rctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	t := &Terminal{conn: conn, info: *ready.Terminal, pr: pr, cancel: cancel, done: make(chan struct{})}
	go t.readLoop(rctx, pw)
	return t, nil
}

func (t *Terminal) readLoop(ctx context.Context, pw *io.PipeWriter) {
	var ended sync.Once
	end := func() { ended.Do(func() { close(t.done) }) }
	defer end()
	var lastErr error
	for {
		typ, b, err := t.conn.Read(ctx)
		if err != nil {
			t.mu.Lock()
			if t.exit == nil && t.err == nil {
				switch {
				case lastErr != nil:
					t.err = lastErr
				case websocket.CloseStatus(err) == websocket.StatusNormalClosure:
					t.err = fmt.Errorf("terminal closed without an exit status: %w", ErrUnavailable)
				default:
					t.err = fmt.Errorf("terminal connection lost: %v: %w", err, ErrUnavailable)
				}
			}
			t.mu.Unlock()
			// Ended before readers see EOF, so Exit right after EOF has it.
			end()
			pw.CloseWithError(io.EOF)
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := pw.Write(b); err != nil {
				return
			}
			continue
		}
		var m api.PTYMessage
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case api.PTYExit:
			code := -1
			if m.ExitCode != nil {
				code = *m.ExitCode
			}
			t.mu.Lock()
			t.exit = &TerminalExit{ExitCode: code, Signal: m.Signal}
			t.mu.Unlock()
		case api.PTYError:
			if m.Error != nil {
				lastErr = streamError(m.Error)
			}
		}
	}
}

// ID is the terminal's id, for AttachTerminal and KillTerminal.
func (t *Terminal) ID() string { return t.info.ID }

// Info describes the terminal as it was when attached.
func (t *Terminal) Info() api.Terminal { return t.info }

// Read reads terminal output.
func (t *Terminal) Read(p []byte) (int, error) { return t.pr.Read(p) }

// Write sends keystrokes.
func (t *Terminal) Write(p []byte) (int, error) {
	if err := t.conn.Write(context.Background(), websocket.MessageBinary, p); err != nil {
		return 0, fmt.Errorf("terminal input: %v: %w", err, ErrUnavailable)
	}
	return len(p), nil
}

func (t *Terminal) control(ctx context.Context, m api.PTYMessage) error {
	b, _ := json.Marshal(m)
	if err := t.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("terminal %s: %v: %w", m.Type, err, ErrUnavailable)
	}
	return nil
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(ctx context.Context, cols, rows int) error {
	if cols < 1 || rows < 1 || cols > api.MaxTerminalCols || rows > api.MaxTerminalRows {
		return fmt.Errorf("terminal size %dx%d is out of range: %w", cols, rows, ErrInvalidArgument)
	}
	return t.control(ctx, api.PTYMessage{Type: api.PTYResize, Cols: cols, Rows: rows})
}

// Signal sends SIGINT, SIGQUIT or SIGTSTP (as the keys do, to the
// foreground job) or SIGTERM or SIGKILL (to the terminal's process group).
func (t *Terminal) Signal(ctx context.Context, sig string) error {
	return t.control(ctx, api.PTYMessage{Type: api.PTYSignal, Signal: sig})
}

// Wait blocks until the terminal's process ends (or the connection is
// lost) and says how it ended. Output not yet read is discarded.
func (t *Terminal) Wait(ctx context.Context) (*TerminalExit, error) {
	go func() { _, _ = io.Copy(io.Discard, t.pr) }()
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return t.result()
}

func (t *Terminal) result() (*TerminalExit, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit != nil {
		return t.exit, nil
	}
	if t.err == nil {
		return nil, errors.New("terminal: still running")
	}
	return nil, t.err
}

// Exit is how the process ended, once Read has returned io.EOF.
func (t *Terminal) Exit() (*TerminalExit, error) {
	select {
	case <-t.done:
		return t.result()
	default:
		return nil, fmt.Errorf("terminal is still running: %w", ErrFailedPrecondition)
	}
}

// Close detaches from the terminal; its process keeps running.
func (t *Terminal) Close() error {
	// The daemon may have closed first (the process ended); either way
	// the connection is gone afterwards.
	_ = t.conn.Close(websocket.StatusNormalClosure, "detach")
	t.cancel()
	_ = t.pr.Close()
	return nil
}
