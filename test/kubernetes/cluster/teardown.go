package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stop tears the cluster down and removes everything it made on the host:
// its pods (through the CRI, so the CNI plugins delete their veths, addresses
// and NAT rules), every process, the mounts under its directory, the bridge,
// the cgroup root and the directory itself. It is safe to call twice.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	_ = c.ThawAPIServer() // fault.go: a frozen process would not stop
	_ = c.ThawKubelet()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var errs []error

	// The control loops first, so nothing recreates what is removed next;
	// then the kubelet, so it does not restart the pods removed through the
	// CRI; containerd and the API last.
	if c.stopProvisioner != nil {
		c.stopProvisioner()
	}
	byName := map[string]*proc{}
	for _, p := range c.procs {
		byName[p.name] = p
	}
	for _, n := range []string{"agent-sandbox-controller", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if p := byName[n]; p != nil {
			p.stop(10 * time.Second)
		}
	}
	if c.containerd != nil && c.containerd.exited() == nil {
		if err := c.removePodSandboxes(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove pods: %w", err))
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	errs = append(errs, c.killShims())
	errs = append(errs, unmountUnder(c.Dir))
	if c.subnet != nil {
		errs = append(errs, c.subnet.deleteBridge())
	}
	errs = append(errs, c.removeCgroupRoot())
	errs = append(errs, c.removeCNICache())
	errs = append(errs, removeStaleDevicePluginSocket())
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, err)
	}
	if c.subnet != nil {
		c.subnet.release()
	}
	return errors.Join(errs...)
}

// removePodSandboxes stops and removes every pod sandbox the cluster's
// containerd holds. Stopping a sandbox runs the CNI DEL that undoes its
// network; removing it deletes its containers and their shims.
func (c *Cluster) removePodSandboxes(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+c.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rs := cri.NewRuntimeServiceClient(conn)
	resp, err := rs.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range resp.Items {
		if _, err := rs.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// clusterPIDs lists the processes whose command line names the cluster's
// directory: its components and the containerd shims it started (they carry
// its socket address).
func (c *Cluster) clusterPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), c.Dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killShims kills what is left of the cluster's processes once its
// components are stopped: shims whose pods could not be removed.
func (c *Cluster) killShims() error {
	pids := c.clusterPIDs()
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if len(c.clusterPIDs()) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes still running: %v", c.clusterPIDs())
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mnts []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mnts = append(mnts, mp)
		}
	}
	sort.Slice(mnts, func(i, j int) bool { return len(mnts[i]) > len(mnts[j]) })
	return mnts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unmountUnder(dir string) error {
	var errs []error
	for range 3 {
		mnts := mountsUnder(dir)
		if len(mnts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mnts {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %v", left))
	}
	return errors.Join(errs...)
}

// removeCgroupRoot removes the kubelet's cgroup root in every hierarchy,
// deepest directories first (a cgroup directory is removed with rmdir).
func (c *Cluster) removeCgroupRoot() error {
	var errs []error
	for _, ctl := range cgroupV1Controllers {
		root := filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// cniCacheDir is where libcni, inside containerd, keeps the result of each
// ADD until the matching DEL.
const cniCacheDir = "/var/lib/cni/results"

func (c *Cluster) cniCacheFiles() []string {
	m, _ := filepath.Glob(filepath.Join(cniCacheDir, c.netName+"-*"))
	return m
}

func (c *Cluster) removeCNICache() error {
	var errs []error
	for _, f := range c.cniCacheFiles() {
		if err := os.Remove(f); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// devicePluginSocket is the kubelet's device plugin registration socket. Its
// directory is fixed for every kubelet on a host, and a stopped kubelet
// leaves the socket behind.
const devicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// staleDevicePluginSocket reports whether the socket exists with nothing
// listening on it, so removing it cannot disturb a running kubelet.
func staleDevicePluginSocket() bool {
	if _, err := os.Lstat(devicePluginSocket); err != nil {
		return false
	}
	conn, err := net.DialTimeout("unix", devicePluginSocket, time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, unix.ECONNREFUSED)
}

func removeStaleDevicePluginSocket() error {
	if !staleDevicePluginSocket() {
		return nil
	}
	if err := os.Remove(devicePluginSocket); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// Leftovers lists what the cluster left on the host after Stop: processes,
// mounts, its directory, its bridge, iptables rules naming its network,
// cgroups and CNI cache entries. Empty means the host is as it was.
func (c *Cluster) Leftovers() []string {
	var left []string
	for _, pid := range c.clusterPIDs() {
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	for _, m := range mountsUnder(c.Dir) {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat(c.Dir); err == nil {
		left = append(left, "directory "+c.Dir)
	}
	if c.subnet != nil {
		if _, err := os.Stat("/sys/class/net/" + c.subnet.bridgeName()); err == nil {
			left = append(left, "link "+c.subnet.bridgeName())
		}
		left = append(left, c.iptablesLeftovers()...)
	}
	for _, ctl := range cgroupV1Controllers {
		p := filepath.Join("/sys/fs/cgroup", ctl, c.cgroupRoot)
		if _, err := os.Stat(p); err == nil {
			left = append(left, "cgroup "+p)
		}
	}
	for _, f := range c.cniCacheFiles() {
		left = append(left, "cni cache "+f)
	}
	if staleDevicePluginSocket() {
		left = append(left, "socket "+devicePluginSocket)
	}
	return left
}
