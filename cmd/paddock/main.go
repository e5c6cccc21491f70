// Command paddock is Paddock's one binary: the daemon (serve), the client
// commands, and the in-sandbox agent (agent).
package main

import (
	"os"

	"github.com/paddock-dev/paddock/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
