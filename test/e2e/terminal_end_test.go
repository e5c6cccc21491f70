package e2e

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// readToEnd reads a terminal until its end (io.EOF), failing instead of
// hanging when the end does not come.
func readToEnd(t *testing.T, term *paddock.Terminal) string {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString(takeUnread(term))
	done := make(chan error, 1)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := term.Read(b)
			buf.Write(b[:n])
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("terminal output ended with %v, want its end: %q", err, buf.String())
		}
	case <-time.After(90 * time.Second):
		term.Close()
		<-done
		t.Fatalf("the terminal's end never arrived; output so far: %q", buf.String())
	}
	return buf.String()
}

// A terminal's end must arrive once its process exits, with all of its
// output before it, on both runtimes. gVisor's terminal master never
// reports EIO when the slave closes, which used to leave clients waiting
// forever (see docs/terminals-watch-preview.md).
func TestTerminalEnd(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	const lines = 300
	cases := []struct {
		name     string
		cmd      string
		ready    string // output to wait for before killing; "" runs to its end
		kill     bool
		allLines bool // every line the command printed must arrive
		wantCode int
		wantSig  string
	}{
		{name: "exit 3 right after output",
			cmd:      fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo line-$i; i=$((i+1)); done; echo last-line; exit 3`, lines),
			wantCode: 3, allLines: true},
		{name: "SIGKILL", cmd: "echo ready-to-die; sleep 1000", ready: "ready-to-die", kill: true,
			wantCode: -1, wantSig: "SIGKILL"},
		{name: "exit 3 while a background child holds the terminal",
			cmd:      `(trap "" HUP; exec sleep 1000) & echo bg-started; exit 3`,
			wantCode: 3},
	}
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			sb := create(t, d, api.CreateSandboxRequest{Runtime: rt})
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ctx := ctxT(t, 3*time.Minute)
					term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{Cmd: []string{"sh", "-c", tc.cmd}})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { term.Close() })
					var out string
					if tc.ready != "" {
						out = readUntil(t, term, tc.ready)
					}
					if tc.kill {
						if err := term.Signal(ctx, "SIGKILL"); err != nil {
							t.Fatal(err)
						}
					}
					out += readToEnd(t, term)
					ex, err := term.Exit()
					if err != nil || ex.ExitCode != tc.wantCode || ex.Signal != tc.wantSig {
						t.Fatalf("end = %+v, %v; want exit code %d signal %q", ex, err, tc.wantCode, tc.wantSig)
					}
					if tc.allLines {
						for i := 0; i < lines; i++ {
							if !strings.Contains(out, fmt.Sprintf("line-%d\r\n", i)) {
								t.Fatalf("line-%d lost from the output: %q", i, out)
							}
						}
						if !strings.Contains(out, "last-line") {
							t.Fatalf("last line lost from the output: %q", out)
						}
					}
					ts, err := d.client.Terminals(ctx, sb.ID)
					if err != nil {
						t.Fatal(err)
					}
					if x := findTerminal(ts, term.ID()); x != nil && !x.Exited {
						t.Fatalf("terminal still listed as running after its end: %+v", x)
					}
				})
			}
		})
	}
}
