// Command paddock-kubernetes is paddock with its Kubernetes backend
// linked in. The paddock binary embeds it (internal/kubebin) and runs it
// for `paddock serve --backend kubernetes`; every other command of it is
// paddock's own.
package main

import (
	"os"

	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/daemon"
	"github.com/paddock-dev/paddock/internal/daemon/kubewire"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
)

func main() {
	daemon.LinkKubernetes(kubewire.Runtimes)
	// The workspaces' JavaScript executor starts this binary as its
	// child, as it does paddock (internal/workspace/wjs).
	if len(os.Args) == 2 && os.Args[1] == wjs.ChildArg {
		wjs.ChildMain()
	}
	os.Exit(cli.Main(os.Args[1:]))
}
