// Command paddock-agent is the agent alone: PID 1 of every sandbox. It
// links only what the agent needs, so each idle sandbox maps and
// initialises far less than the whole paddock binary would. The paddock
// binary embeds it (see internal/agentbin) and takes the same arguments
// as `paddock agent`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/paddock-dev/paddock/internal/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, agent.RunWith))
}

// run parses the arguments and runs serve, the agent. A request for help
// succeeds, as `paddock agent --help` does: the daemon's runtime probe
// runs it to prove a container starts.
func run(ctx context.Context, args []string, stderr io.Writer, serve func(ctx context.Context, o agent.RunOptions) error) int {
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("paddock-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", agent.SocketFromEnv(), "unix socket to listen on")
	listen := fs.String("listen", "", "TCP address to listen on instead of the socket (needs "+agent.EnvToken+", or "+agent.EnvPoolToken+" for a warm pool)")
	debug := fs.Bool("debug", agent.DebugFromEnv(), "log at debug level")
	seed := fs.String("seed-home", "", "copy the directory FROM into the fresh home volume TO (FROM:TO) and exit, instead of serving")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "paddock-agent: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *seed != "" {
		if err := agent.SeedHomeCommand(*seed, stderr); err != nil {
			fmt.Fprintln(stderr, "paddock-agent:", err)
			return 1
		}
		return 0
	}
	opts := agent.RunOptions{Socket: *socket, Listen: *listen, Debug: *debug}
	opts.TokensFromEnv()
	if err := serve(ctx, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "paddock-agent:", err)
		return 1
	}
	return 0
}
