package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ctrlD ends a shell reading an empty line: sent when a non-terminal stdin
// ends, so `echo cmd | paddock shell ID` finishes once cmd has run.
const ctrlD = "\x04"

func newShellCmd(g *globals) *cobra.Command {
	var (
		attach string
		o      paddock.TerminalOptions
		env    []string
	)
	cmd := &cobra.Command{
		Use:   "shell ID [--attach TERMINAL] [-- CMD...]",
		Short: "Open a terminal in a sandbox (the login shell unless CMD is given); exit with its exit code",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := g.client()
			in, out := cmd.InOrStdin(), cmd.OutOrStdout()
			inFile, inIsTTY := ttyFile(in)
			outFile, outIsTTY := ttyFile(out)
			if outIsTTY && o.Cols == 0 {
				if w, h, err := term.GetSize(int(outFile.Fd())); err == nil {
					o.Cols, o.Rows = w, h
				}
			}
			var t *paddock.Terminal
			var err error
			if attach != "" {
				if len(args) > 1 {
					return errors.New("--attach takes no command: the terminal runs one already")
				}
				t, err = c.AttachTerminal(ctx, args[0], attach)
			} else {
				if o.Env, err = parseEnv("env", env); err != nil {
					return err
				}
				o.Cmd = args[1:]
				t, err = c.OpenTerminal(ctx, args[0], o)
			}
			if err != nil {
				return err
			}
			defer t.Close()
			if inIsTTY {
				state, err := term.MakeRaw(int(inFile.Fd()))
				if err != nil {
					return fmt.Errorf("put the terminal in raw mode: %w", err)
				}
				defer term.Restore(int(inFile.Fd()), state)
			}
			if outIsTTY {
				stop := forwardResize(ctx, t, outFile)
				defer stop()
			}
			ended := make(chan struct{})
			go func() {
				_, _ = io.Copy(t, in)
				if inIsTTY {
					return
				}
				// A shell running a command drops a Ctrl-D typed ahead
				// when it switches the terminal mode back for its prompt,
				// so it is repeated until the terminal ends.
				tick := time.NewTicker(500 * time.Millisecond)
				defer tick.Stop()
				for {
					if _, err := t.Write([]byte(ctrlD)); err != nil {
						return
					}
					select {
					case <-ended:
						return
					case <-tick.C:
					}
				}
			}()
			_, _ = io.Copy(out, t)
			close(ended)
			exit, err := t.Exit()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w (the terminal may still run: paddock shell %s --attach %s)", err, args[0], t.ID())
			}
			if exit.ExitCode != 0 {
				code := exit.ExitCode
				if code < 0 {
					code = 128 + shellSignalNumber(exit.Signal)
				}
				return &exitError{code: code}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&attach, "attach", "", "attach to this running terminal (its recent output is shown first)")
	fs.StringArrayVarP(&env, "env", "e", nil, "environment variable K=V (repeatable)")
	fs.StringVarP(&o.Cwd, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&o.User, "user", "u", "", `run as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	return cmd
}

func ttyFile(v any) (*os.File, bool) {
	f, ok := v.(*os.File)
	if !ok {
		return nil, false
	}
	return f, term.IsTerminal(int(f.Fd()))
}

// forwardResize passes the local terminal's size on whenever it changes.
func forwardResize(ctx context.Context, t *paddock.Terminal, f *os.File) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				if w, h, err := term.GetSize(int(f.Fd())); err == nil {
					_ = t.Resize(ctx, w, h)
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

func shellSignalNumber(name string) int {
	switch name {
	case "SIGHUP":
		return 1
	case "SIGINT":
		return 2
	case "SIGQUIT":
		return 3
	case "SIGKILL":
		return 9
	case "SIGTERM":
		return 15
	}
	return 0
}
