package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Terminals the daemon opens are tagged TerminalTagPrefix+id; the agent
// keeps their output and end for a daemon that comes back, and lists them
// at wire.TerminalsPath.
const TerminalTagPrefix = wire.TerminalTagPrefix

const (
	// maxTerminalList bounds the agent's answer: a few hundred small records.
	maxTerminalList = 1 << 20
)

// TerminalState is one terminal the agent keeps.
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

type connectEvents struct {
	*connect.ServerStreamForClient[process.ConnectResponse]
}

func (s connectEvents) event() *process.ProcessEvent { return s.Msg().GetEvent() }

// ConnectPTY follows the terminal process started with tag: first its pid,
// then the output the agent kept, then live output and its end. It also
// works for a terminal that ended while nobody followed it: the stream
// then carries the kept output and the end.
func (c *Client) ConnectPTY(ctx context.Context, tag string) (*PTYStream, uint32, error) {
	req := connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{
		Selector: &process.ProcessSelector_Tag{Tag: tag}}})
	stream, err := c.Process().Connect(ctx, req)
	if err != nil {
		return nil, 0, rpcErr(ctx, "connect terminal", err)
	}
	return firstPTYEvent(&PTYStream{stream: connectEvents{stream}, ctx: ctx}, stream.Close, "connect terminal")
}

// Terminals lists the terminals the agent keeps: running ones and those
// that ended while nobody followed them.
func (c *Client) Terminals(ctx context.Context) ([]TerminalState, error) {
	resp, err := c.do(ctx, http.MethodGet, wire.TerminalsPath, "", url.Values{}, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpErr("list terminals", resp)
	}
	var out []TerminalState
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTerminalList)).Decode(&out); err != nil {
		return nil, fmt.Errorf("list terminals: bad answer from the agent: %v: %w", err, errdefs.ErrUnavailable)
	}
	return out, nil
}
