package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/client"
)

// readUntil follows s until its output contains want, or fails.
func readUntil(t *testing.T, s *client.PTYStream, want string) (string, client.PTYEvent) {
	t.Helper()
	var out strings.Builder
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("stream broke before %q (got %q): %v", want, out.String(), err)
		}
		out.Write(ev.Data)
		if strings.Contains(out.String(), want) || ev.End {
			return out.String(), ev
		}
	}
}

// A terminal outlives whoever followed it: the agent keeps its output and
// its end for the next follower, as it must for a daemon that restarted.
func TestTerminalOutlivesFollower(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	tests := []struct {
		name     string
		tag      string
		input    string // typed after the first follower left
		wantOut  string // in the replay of the second follower
		wantExit int    // -2: still running
	}{
		{name: "running shell keeps state", tag: client.TerminalTagPrefix + "t000000000001",
			input: "echo $X-$PWD\n", wantOut: "42-/tmp", wantExit: -2},
		{name: "ended while nobody followed", tag: client.TerminalTagPrefix + "t000000000002",
			input: "exit 7\n", wantOut: "ready", wantExit: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sctx, stop := context.WithCancel(ctx)
			s, pid, err := e.c.StartPTY(sctx, client.PTYOptions{Cmd: []string{"/bin/sh"}, Cols: 100, Rows: 30, Tag: tc.tag})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.c.PTYInput(ctx, pid, []byte("cd /tmp; X=42; echo rea''dy\n")); err != nil {
				t.Fatal(err)
			}
			readUntil(t, s, "ready")
			// The follower goes away, as a daemon that died does.
			_ = s.Close()
			stop()
			if err := e.c.PTYResize(ctx, pid, 120, 40); err != nil {
				t.Fatal(err)
			}
			if err := e.c.PTYInput(ctx, pid, []byte(tc.input)); err != nil {
				t.Fatal(err)
			}
			if tc.wantExit >= 0 {
				waitExited(t, ctx, e.c, tc.tag)
			}
			states, err := e.c.Terminals(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st := findState(states, tc.tag)
			if st == nil {
				t.Fatalf("terminal %s not listed: %+v", tc.tag, states)
			}
			if st.Pid != pid || st.Cols != 120 || st.Rows != 40 || st.Cmd[0] != "/bin/sh" {
				t.Fatalf("listed as %+v, want pid %d, 120x40, /bin/sh", st, pid)
			}
			s2, pid2, err := e.c.ConnectPTY(ctx, tc.tag)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s2.Close() })
			if pid2 != pid {
				t.Fatalf("reconnected to pid %d, want %d", pid2, pid)
			}
			out, ev := readUntil(t, s2, tc.wantOut)
			if !strings.Contains(out, "ready") {
				t.Fatalf("replay %q lacks the output from before the reconnect", out)
			}
			if tc.wantExit < 0 {
				if ev.End {
					t.Fatalf("running terminal ended: %+v", ev)
				}
				_ = e.c.Signal(ctx, pid, true)
				return
			}
			for !ev.End {
				if ev, err = s2.Next(); err != nil {
					t.Fatal(err)
				}
			}
			if ev.Exit != tc.wantExit {
				t.Fatalf("exit %d, want %d", ev.Exit, tc.wantExit)
			}
			// Its end was delivered: the agent forgets it. It does so once
			// the end is written to the stream, which the client may read
			// a moment before: the list is asked until then.
			deadline := time.Now().Add(5 * time.Second)
			for {
				states, err = e.c.Terminals(ctx)
				if err != nil {
					t.Fatal(err)
				}
				st := findState(states, tc.tag)
				if st == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ended terminal still kept 5 s after its end was read: %+v", st)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func findState(states []client.TerminalState, tag string) *client.TerminalState {
	for i := range states {
		if states[i].Tag == tag {
			return &states[i]
		}
	}
	return nil
}

func waitExited(t *testing.T, ctx context.Context, c *client.Client, tag string) {
	t.Helper()
	for {
		states, err := c.Terminals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := findState(states, tag); st != nil && st.Exited {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("terminal %s did not end: %+v", tag, states)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
