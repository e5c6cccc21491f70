package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// FreezeAPIServer stops the kube-apiserver process (SIGSTOP): its port
// still accepts connections, but nothing answers, as when a control plane
// is cut off by the network. ThawAPIServer (SIGCONT) brings it back with
// its state. A frozen server is thawed by Stop.
func (c *Cluster) FreezeAPIServer() error { return c.signal("kube-apiserver", syscall.SIGSTOP) }

// ThawAPIServer resumes a server FreezeAPIServer stopped.
func (c *Cluster) ThawAPIServer() error { return c.signal("kube-apiserver", syscall.SIGCONT) }

// FreezeKubelet stops the node's kubelet (SIGSTOP), as when a node is cut
// off from the API server or has stopped: the node reports nothing and
// confirms no pod's deletion, while the containers it started run on.
// ThawKubelet brings it back; a frozen kubelet is thawed by Stop.
func (c *Cluster) FreezeKubelet() error { return c.signal("kubelet", syscall.SIGSTOP) }

// ThawKubelet resumes a kubelet FreezeKubelet stopped.
func (c *Cluster) ThawKubelet() error { return c.signal("kubelet", syscall.SIGCONT) }

func (c *Cluster) signal(name string, sig syscall.Signal) error {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		if err := p.exited(); err != nil {
			return fmt.Errorf("%s has exited: %w", name, err)
		}
		if err := p.cmd.Process.Signal(sig); err != nil {
			return fmt.Errorf("signal %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("no %s in this cluster", name)
}

// PodContainers lists the ids of the containers containerd holds on the
// node for the pod name (in any namespace), running or not.
func (c *Cluster) PodContainers(ctx context.Context, name string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "-a", c.ContainerdSocket, "-n", "k8s.io", "containers", "ls", "-q",
		`labels."io.kubernetes.pod.name"==`+name).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ctr containers ls: %v: %s", err, out)
	}
	return strings.Fields(string(out)), nil
}
