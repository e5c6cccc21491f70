// Package cli is paddock's command tree: flags and environment become typed
// options, and each command calls the SDK, the daemon or the agent.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command (e.g. the exit
// code of a command run in a sandbox) without printing anything more.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitInterrupted is the shell's code for a process ended by SIGINT.
const exitInterrupted = 130

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// run is Main without the process: tests drive it with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		fmt.Fprintln(stderr, "paddock: interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "paddock:", err)
	return 1
}

// globals are the persistent flags every client command reads.
type globals struct {
	socket string
	url    string
	apiKey string
	json   bool
	// idemKey is --idempotency-key (idempotency.go).
	idemKey string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "paddock",
		Short:         "Self-hostable sandboxes for AI agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	// Defaults stay empty so the SDK's own precedence applies: an explicit
	// flag beats $PADDOCK_URL, which beats $PADDOCK_SOCKET.
	pf.StringVar(&g.socket, "socket", "", "daemon unix socket (default $PADDOCK_SOCKET, else /run/paddock/paddock.sock)")
	pf.StringVar(&g.url, "url", "", "daemon URL http(s)://host:port, instead of the socket (default $PADDOCK_URL)")
	pf.StringVar(&g.apiKey, "api-key", "", "API key for a daemon reached over TCP (default $PADDOCK_API_KEY)")
	pf.BoolVar(&g.json, "json", false, "print machine-readable JSON")
	pf.StringVar(&g.idemKey, "idempotency-key", "", idemFlagHelp)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyIdempotencyKey(cmd, g.idemKey)
	}
	root.AddCommand(
		newServeCmd(),
		newInfoCmd(g),
		newPolicyCmd(g),
		newAgentCmd(),
		newDoCmd(g),
		newCreateCmd(g),
		newNetCmd(g),
		newSecretCmd(g),
		newWorkspaceCmd(g),
		newRunCmd(g),
		newTemplateCmd(g),
		newPoolCmd(g),
		newExecCmd(g),
		newCpCmd(g),
		newLsCmd(g),
		newInspectCmd(g),
		newStopCmd(g),
		newStartCmd(g),
		newPauseCmd(g),
		newResumeCmd(g),
		newRmCmd(g),
		newSnapshotCmd(g),
		newForkCmd(g),
		newImagesCmd(g),
		newKeysCmd(g),
		newLedgerCmd(g),
		newBackupCmd(g),
		newVersionCmd(g),
		newShellCmd(g),
		newTerminalsCmd(g),
		newWatchCmd(g),
		newExposeCmd(g),
		newUnexposeCmd(g),
		newPreviewsCmd(g),
		newMCPCmd(g),
		newSessionCmd(g),
		newRunCodeCmd(g),
		newContextCmd(g),
		newProcCmd(g),
		newConsoleCmd(g),
		newEventsCmd(g),
	)
	return root
}
