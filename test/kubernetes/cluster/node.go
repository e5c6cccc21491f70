package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cgroupV1Controllers are the hierarchies the kubelet's cgroup root must
// exist in on a cgroup v1 host. "unified" is the v2 hierarchy of a hybrid
// host: runc makes each container's cgroup there too, so teardown must
// remove it and the leftover check must look there.
var cgroupV1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "hugetlb", "net_cls", "net_prio", "perf_event", "unified"}

func (c *Cluster) startContainerd(ctx context.Context, busyboxPath string) error {
	cdir := filepath.Join(c.Dir, "containerd")
	q := strconv.Quote
	config := strings.Join([]string{
		`version = 2`,
		`root = ` + q(filepath.Join(cdir, "root")),
		`state = ` + q(filepath.Join(cdir, "state")),
		`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]`,
		`[grpc]`,
		`  address = ` + q(c.ContainerdSocket),
		`[ttrpc]`,
		`  address = ` + q(c.ContainerdSocket+".ttrpc"),
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(filepath.Join(cdir, "opt")),
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(PauseImage),
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		`  disable_apparmor = true`,
		// The kubelet asks for a negative oom_score_adj for pod sandboxes
		// (-998), which needs CAP_SYS_RESOURCE; a host that withholds it
		// (a container, a VM sandbox) fails every pod in runc's nsexec with
		// "failed to update /proc/self/oom_score_adj: Permission denied".
		// This clamps the value at containerd's own instead.
		`  restrict_oom_score_adj = true`,
		// Pod network namespaces under the state directory, not /var/run/netns.
		`  netns_mounts_under_state_dir = true`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        Root = ` + q(filepath.Join(cdir, "runc")),
		`        SystemdCgroup = false`,
		// Registries by host: TrustPlainHTTPRegistry writes one there.
		`  [plugins."io.containerd.grpc.v1.cri".registry]`,
		`    config_path = ` + q(c.registryHostsDir()),
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = "/usr/lib/cni"`,
		`    conf_dir = ` + q(filepath.Join(c.Dir, "cni", "net.d")),
		`    max_conf_num = 1`,
		``,
	}, "\n")
	if err := os.MkdirAll(cdir, 0o711); err != nil {
		return err
	}
	cfgPath := filepath.Join(cdir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("containerd is not installed (apt-get install containerd): %w", err)
	}
	p, err := c.start("containerd", bin, "--config="+cfgPath)
	if err != nil {
		return err
	}
	c.containerd = p
	if err := waitFor(ctx, "containerd", 200*time.Millisecond, []*proc{p}, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "-a", c.ContainerdSocket, "version").Run()
	}); err != nil {
		return err
	}
	images := filepath.Join(c.Dir, "test-images.tar")
	if err := writeTestImages(images, busyboxPath); err != nil {
		return fmt.Errorf("test images: %w", err)
	}
	return c.ImportImages(ctx, images)
}

// ImportImages imports an image archive (docker save or OCI layout) into the
// cluster's containerd, where pods find it by the names the archive gives.
func (c *Cluster) ImportImages(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, "ctr", "-a", c.ContainerdSocket, "-n", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", archive, err, out)
	}
	return nil
}

func (c *Cluster) startKubelet(ctx context.Context, pk *pki, port int) error {
	for _, ctl := range cgroupV1Controllers {
		base := filepath.Join("/sys/fs/cgroup", ctl)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		if err := os.Mkdir(filepath.Join(base, c.cgroupRoot), 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cgroup root: %w", err)
		}
	}
	kdir := filepath.Join(c.Dir, "kubelet")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
# No KUBE-FIREWALL, KUBE-KUBELET-CANARY or KUBE-IPTABLES-HINT chains: they
# are host-wide, outlive the cluster, and no kube-proxy runs here.
makeIPTablesUtilChains: false
podLogsDir: %s
volumePluginDir: %s
resolvConf: /etc/resolv.conf
maxPods: 140
serializeImagePulls: false
# Tests import images by hand (paddock.local/...) whose content other tests
# pull from a registry with a pull Secret (TestImagePushOnKubernetes). The
# kubelet's default (NeverVerifyPreloadedImages) then holds the content as
# pulled with credentials and re-pulls it, under the imported name, for a
# pod without them: a registry that does not exist. One node, one tenant.
imagePullCredentialsVerificationPolicy: NeverVerify
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusReportFrequency: 10s
`, c.subnet.gateway(), port, pk.path("kubelet-serving.crt"), pk.path("kubelet-serving.key"), pk.path("ca.crt"),
		c.ContainerdSocket, c.cgroupRoot, filepath.Join(c.Dir, "pod-logs"), filepath.Join(c.Dir, "volume-plugins"))
	if err := os.MkdirAll(kdir, 0o750); err != nil {
		return err
	}
	cfgPath := filepath.Join(c.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := c.start("kubelet", "kubelet",
		"--config="+cfgPath,
		"--kubeconfig="+filepath.Join(c.Dir, "kubelet.kubeconfig"),
		"--root-dir="+kdir,
		"--cert-dir="+filepath.Join(kdir, "pki"),
		"--hostname-override="+c.NodeName,
		"--node-ip="+c.subnet.gateway().String(),
		"--v=1",
	)
	if err != nil {
		return err
	}
	c.kubelet = p
	return waitFor(ctx, "node "+c.NodeName+" Ready", time.Second, []*proc{p, c.containerd}, func(ctx context.Context) error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node not ready: %s", cond.Message)
			}
		}
		return fmt.Errorf("node has no Ready condition yet")
	})
}

// waitDefaultServiceAccount waits for the controller manager to make the
// default namespace's service account, which every pod there needs.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return waitFor(ctx, "default service account", 300*time.Millisecond, c.procs, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}
