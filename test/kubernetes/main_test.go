// Package kubernetes_test runs Paddock's Kubernetes tests against a real
// one-node cluster that TestMain builds (or reuses from the cache) and starts
// on this host, and tears down at the end, failing if anything is left.
package kubernetes_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// testCluster is the package's cluster; nil when the host cannot run one,
// in which case skipReason says why.
var (
	testCluster *cluster.Cluster
	skipReason  string
)

func TestMain(m *testing.M) {
	code := run(m)
	if paddockDir != "" {
		os.RemoveAll(paddockDir) // the binary buildPaddock made
	}
	os.Exit(code)
}

func run(m *testing.M) int {
	if reason := hostCannotRun(); reason != "" {
		skipReason = reason
		return m.Run()
	}
	binDir := os.Getenv("PADDOCK_K8S_BIN")
	if binDir == "" {
		// build.sh reuses a complete cache directory at once; a cold build
		// takes long (see docs/kubernetes.md), so `make test-kubernetes`
		// runs it before the tests with its progress on the terminal.
		out, err := exec.Command("./build.sh").Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build.sh: %v\n", err)
			return 1
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		binDir = lines[len(lines)-1]
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start cluster: %v\n", err)
		return 1
	}
	log.Info("figure: cluster start to node Ready with agent-sandbox installed", "seconds", time.Since(start).Seconds())
	testCluster = c
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs at the end of a failed run:%s\n", c.LogTails(30))
	}
	stopStart := time.Now()
	if err := c.Stop(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "stop cluster: %v\n", err)
		code = 1
	}
	log.Info("figure: cluster teardown", "seconds", time.Since(stopStart).Seconds())
	if left := c.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the cluster left these behind:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	return code
}

// hostCannotRun says why this host cannot run the cluster, or "".
func hostCannotRun() string {
	if os.Geteuid() != 0 {
		return "the test cluster needs root (kubelet, containerd, CNI)"
	}
	for _, bin := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc", "iptables-save", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed (scripts/install-deps.sh with PADDOCK_K8S_DEPS=1)"
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return "the CNI plugins are not installed (containernetworking-plugins)"
	}
	return ""
}

// clusterFor returns the package's cluster or skips t with the reason the
// host cannot run one.
func clusterFor(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testCluster == nil {
		t.Skip(skipReason)
	}
	return testCluster
}
