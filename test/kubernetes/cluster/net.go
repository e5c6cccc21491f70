package cluster

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Pod subnets are /24s of subnetPool. Paddock's daemons take their ranges
// from 100.64.0.0/10, so this pool stays clear of them; a /24 routed on the
// host already is skipped, and one held by another cluster is skipped by its
// lock file.
const (
	subnetPool = "10.213.0.0/16"
	lockDir    = "/run/paddock-test-k8s"
)

// subnet is a pod /24 claimed for the life of a cluster: the claim is an
// exclusive flock on a file per subnet, released when the file is closed or
// the process dies.
type subnet struct {
	prefix netip.Prefix
	lock   *os.File
}

func claimSubnet() (*subnet, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	var used []netip.Prefix
	for _, line := range strings.Split(string(routes), "\n") {
		for _, f := range strings.Fields(line) {
			if p, err := netip.ParsePrefix(f); err == nil {
				used = append(used, p)
			} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
				used = append(used, netip.PrefixFrom(a, 32))
			}
		}
	}
	pool := netip.MustParsePrefix(subnetPool)
	base := pool.Addr().As4()
	for i := 0; i < 256; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		if overlapsAny(p, used) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("subnet-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return &subnet{prefix: p, lock: f}, nil
	}
	return nil, fmt.Errorf("no free /24 in %s", subnetPool)
}

func overlapsAny(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Bits() > 0 && p.Overlaps(u) {
			return true
		}
	}
	return false
}

func (s *subnet) release() {
	if s != nil && s.lock != nil {
		s.lock.Close()
	}
}

// bridgeName is the host bridge of the subnet; it is derived from the
// subnet, so a bridge left by a run that died is found and removed by the
// next run that claims the same subnet.
func (s *subnet) bridgeName() string {
	return fmt.Sprintf("pk8s%d", s.prefix.Addr().As4()[2])
}

// writeCNIConfig writes the pod network: a bridge with NAT to the outside
// and host-local addresses kept in the cluster's directory.
func (c *Cluster) writeCNIConfig() error {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       c.netName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      c.subnet.bridgeName(),
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": c.subnet.prefix.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(c.Dir, "cni", "ipam"),
				},
			},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-paddock.conflist"), b, 0o644)
}

// gateway is the bridge's address, the first of the subnet.
func (s *subnet) gateway() netip.Addr { return s.prefix.Addr().Next() }

// createBridge makes the subnet's bridge with the gateway address before the
// kubelet starts, so the kubelet can serve on that address: the API server
// must reach the kubelet (exec, logs) by a node address, and the kubelet
// refuses a loopback node IP. The bridge plugin takes the bridge as it finds
// it.
func (s *subnet) createBridge() error {
	name := s.bridgeName()
	gw := netip.PrefixFrom(s.gateway(), s.prefix.Bits()).String()
	for _, args := range [][]string{
		{"link", "add", name, "type", "bridge"},
		{"addr", "add", gw, "dev", name},
		{"link", "set", name, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// deleteBridge removes the subnet's bridge if it exists.
func (s *subnet) deleteBridge() error {
	name := s.bridgeName()
	if _, err := os.Stat("/sys/class/net/" + name); isNotExist(err) {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %v: %s", name, err, out)
	}
	return nil
}

// iptablesLeftovers lists the rules that still name the cluster's network:
// the bridge plugin's NAT rules carry it in their comments.
func (c *Cluster) iptablesLeftovers() []string {
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		return []string{fmt.Sprintf("iptables-save: %v", err)}
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, c.netName) || strings.Contains(line, c.subnet.prefix.String()) {
			left = append(left, "iptables: "+line)
		}
		// The kubelet's host-wide chains (it is told not to make them),
		// unless the host had them before the cluster started.
		if !c.kubeChainsBefore && strings.HasPrefix(line, ":KUBE-") {
			left = append(left, "iptables: "+line)
		}
	}
	return left
}

// hasKubeChains says whether any iptables table holds a KUBE- chain.
func hasKubeChains() bool {
	out, err := exec.Command("iptables-save").Output()
	return err == nil && strings.Contains(string(out), ":KUBE-")
}

// NodeIP is the node's address on the pod network (the bridge's), which
// the pods reach: a daemon on the node serves them there.
func (c *Cluster) NodeIP() netip.Addr { return c.subnet.gateway() }

// PodSubnet is the cluster's pod /24, unique among the clusters running
// on this host.
func (c *Cluster) PodSubnet() netip.Prefix { return c.subnet.prefix }
