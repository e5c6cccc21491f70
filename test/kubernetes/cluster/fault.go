package cluster

import (
	"fmt"
	"syscall"
)

// FreezeAPIServer stops the kube-apiserver process (SIGSTOP): its port
// still accepts connections, but nothing answers, as when a control plane
// is cut off by the network. ThawAPIServer (SIGCONT) brings it back with
// its state. A frozen server is thawed by Stop.
func (c *Cluster) FreezeAPIServer() error { return c.signalAPIServer(syscall.SIGSTOP) }

// ThawAPIServer resumes a server FreezeAPIServer stopped.
func (c *Cluster) ThawAPIServer() error { return c.signalAPIServer(syscall.SIGCONT) }

func (c *Cluster) signalAPIServer(sig syscall.Signal) error {
	for _, p := range c.procs {
		if p.name != "kube-apiserver" {
			continue
		}
		if err := p.exited(); err != nil {
			return fmt.Errorf("kube-apiserver has exited: %w", err)
		}
		if err := p.cmd.Process.Signal(sig); err != nil {
			return fmt.Errorf("signal kube-apiserver: %w", err)
		}
		return nil
	}
	return fmt.Errorf("no kube-apiserver in this cluster")
}
