// Command paddock is Paddock's one binary: the daemon (serve), the client
// commands, and the in-sandbox agent (agent).
package main

import (
	"os"

	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
)

func main() {
	// The workspaces' JavaScript executor starts this binary as its
	// child: nothing else of it runs then (internal/workspace/wjs).
	if len(os.Args) == 2 && os.Args[1] == wjs.ChildArg {
		wjs.ChildMain()
	}
	os.Exit(cli.Main(os.Args[1:]))
}
