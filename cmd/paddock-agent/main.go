// Command paddock-agent is the agent alone: PID 1 of every sandbox. It
// links only what the agent needs, so each idle sandbox maps and
// initialises far less than the whole paddock binary would. The paddock
// binary embeds it (see internal/agentbin) and takes the same arguments
// as `paddock agent`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paddock-dev/paddock/internal/agent"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("paddock-agent", flag.ContinueOnError)
	socket := fs.String("socket", agent.SocketFromEnv(), "unix socket to listen on")
	listen := fs.String("listen", "", "TCP address to listen on instead of the socket (needs "+agent.EnvToken+")")
	debug := fs.Bool("debug", agent.DebugFromEnv(), "log at debug level")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock-agent: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := agent.RunOptions{Socket: *socket, Listen: *listen, Debug: *debug}
	if *listen != "" {
		opts.Token = os.Getenv(agent.EnvToken)
	}
	if err := agent.RunWith(ctx, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "paddock-agent:", err)
		os.Exit(1)
	}
}
