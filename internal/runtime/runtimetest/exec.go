package runtimetest

import (
	"context"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/agent/client"
)

// maxCapture bounds what one command's output may put in memory.
const maxCapture = 1 << 20

// execer runs commands in a sandbox through its agent.
type execer struct {
	c *client.Client
}

func newExecer(t *testing.T, socket string) *execer {
	t.Helper()
	c := client.New(socket)
	t.Cleanup(func() { c.Close() })
	return &execer{c: c}
}

// run runs cmd as user ("" = the agent's default) and collects its output.
func (e *execer) run(ctx context.Context, user string, cmd ...string) (result, error) {
	var stdout, stderr strings.Builder
	res, err := e.c.Exec(ctx, client.ExecOptions{Cmd: cmd, User: user}, nil, func(stream int, p []byte) error {
		w := &stdout
		if stream == client.Stderr {
			w = &stderr
		}
		if w.Len() < maxCapture {
			w.Write(p)
		}
		return nil
	})
	out := result{stdout: stdout.String(), stderr: stderr.String(), exitCode: res.ExitCode, killed: res.Signal != ""}
	return out, err
}
