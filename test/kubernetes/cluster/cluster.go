package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options configure Start.
type Options struct {
	// BinDir holds bin/ and crds/ as build.sh writes them. Required.
	BinDir string
	// ParentDir is where the cluster's directory is made; default the
	// system's temporary directory. Keep it short: unix socket paths in it
	// must fit in 108 bytes.
	ParentDir string
	// BusyboxPath is the static busybox the test images are made from;
	// default /bin/busybox.
	BusyboxPath string
	// Logger receives progress; default discards.
	Logger *slog.Logger
}

// Cluster is a running one-node cluster.
type Cluster struct {
	// Dir holds everything the cluster writes: certificates, configs, data,
	// the containerd and kubelet state, and logs/ with each component's log.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin clientset.
	Client *kubernetes.Clientset
	// NodeName is the name the kubelet registers.
	NodeName string
	// ContainerdSocket is the cluster's containerd address.
	ContainerdSocket string

	binDir     string
	log        *slog.Logger
	id         string
	netName    string
	cgroupRoot string
	subnet     *subnet
	procs      []*proc
	kubelet    *proc
	containerd *proc
	stopped    bool

	stopProvisioner context.CancelFunc // storage.go
	// kubeChainsBefore: the host had KUBE- iptables chains before the
	// cluster started (net.go, iptablesLeftovers).
	kubeChainsBefore bool
}

// Start brings a cluster up and returns when its node is Ready and the
// agent-sandbox CRDs are established. On error, what was started is torn
// down again.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.BinDir == "" {
		return nil, errors.New("cluster: BinDir is required")
	}
	if o.BusyboxPath == "" {
		o.BusyboxPath = "/bin/busybox"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(filepath.Join(o.BinDir, ".complete")); err != nil {
		return nil, fmt.Errorf("cluster: %s is not a complete build (run build.sh): %w", o.BinDir, err)
	}
	dir, err := os.MkdirTemp(o.ParentDir, "pk8s-")
	if err != nil {
		return nil, err
	}
	id := strings.TrimPrefix(filepath.Base(dir), "pk8s-")
	c := &Cluster{
		Dir:              dir,
		Kubeconfig:       filepath.Join(dir, "admin.kubeconfig"),
		NodeName:         "pk8s-" + strings.ToLower(id),
		ContainerdSocket: filepath.Join(dir, "containerd.sock"),
		binDir:           o.BinDir,
		log:              o.Logger,
		id:               id,
		netName:          "pk8s-" + strings.ToLower(id),
		cgroupRoot:       "/pk8s-" + strings.ToLower(id),
	}
	c.kubeChainsBefore = hasKubeChains()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.logTails(20))
			if serr := c.Stop(context.WithoutCancel(ctx)); serr != nil {
				c.log.Warn("teardown after failed start", "err", serr)
			}
			err = fmt.Errorf("cluster start: %w", err)
		}
	}()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if c.subnet, err = claimSubnet(); err != nil {
		return nil, err
	}
	if err := c.subnet.deleteBridge(); err != nil {
		return nil, err
	}
	if err := c.subnet.createBridge(); err != nil {
		return nil, err
	}
	c.log.Info("cluster dir", "dir", dir, "subnet", c.subnet.prefix, "node", c.NodeName)

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kubeletPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	pk, err := c.makePKI()
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	for name, cert := range map[string]string{"admin": "admin", "kubelet": "node"} {
		if err := writeKubeconfig(filepath.Join(dir, name+".kubeconfig"), server, pk, cert); err != nil {
			return nil, err
		}
	}

	etcd, err := c.start("etcd", "etcd",
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--advertise-client-urls=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster=default=http://127.0.0.1:"+strconv.Itoa(peerPort),
		// A test cluster's data dies with it: fsync buys nothing here and
		// costs a lot on a busy disk.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "etcd", 200*time.Millisecond, []*proc{etcd}, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(etcdPort)+"/health")
	}); err != nil {
		return nil, err
	}

	svcRange := "10.214." + strconv.Itoa(int(c.subnet.prefix.Addr().As4()[2])) + ".0/24"
	api, err := c.start("kube-apiserver", "kube-apiserver",
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+pk.path("apiserver.crt"),
		"--tls-private-key-file="+pk.path("apiserver.key"),
		"--client-ca-file="+pk.path("ca.crt"),
		"--kubelet-client-certificate="+pk.path("apiserver-kubelet.crt"),
		"--kubelet-client-key="+pk.path("apiserver-kubelet.key"),
		"--service-account-key-file="+pk.path("sa.pub"),
		"--service-account-signing-key-file="+pk.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range="+svcRange,
		"--authorization-mode=Node,RBAC",
		// The node's InternalIP is the bridge's gateway, where the kubelet
		// serves; its host name resolves nowhere.
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
		// The kubernetes Service would list 127.0.0.1, which Endpoints
		// refuse; pods here do not talk to the API through it.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
	)
	if err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "kube-apiserver", 300*time.Millisecond, []*proc{etcd, api}, func(ctx context.Context) error {
		_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}

	if err := c.startContainerd(ctx, o.BusyboxPath); err != nil {
		return nil, err
	}
	if err := c.writeCNIConfig(); err != nil {
		return nil, err
	}
	if err := c.startKubelet(ctx, pk, kubeletPort); err != nil {
		return nil, err
	}

	admin := "--kubeconfig=" + c.Kubeconfig
	if _, err := c.start("kube-controller-manager", "kube-controller-manager", admin,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(cmPort),
		"--leader-elect=false",
		"--service-account-private-key-file="+pk.path("sa.key"),
		"--root-ca-file="+pk.path("ca.crt"),
		"--use-service-account-credentials=false",
		"--cluster-name="+c.netName,
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	if _, err := c.start("kube-scheduler", "kube-scheduler", admin,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedPort),
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	if err := c.installAgentSandbox(ctx); err != nil {
		return nil, err
	}
	if err := c.startProvisioner(ctx); err != nil { // storage.go
		return nil, err
	}
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) makePKI() (*pki, error) {
	pk, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	certs := []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		// The node's address too: pods reach the API server there
		// (ForwardAPIServer).
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", c.subnet.gateway().String(), "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
		{"apiserver-kubelet", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"admin", "paddock-test-admin", []string{"system:masters"}, nil},
		{"node", "system:node:" + c.NodeName, []string{"system:nodes"}, nil},
		{"kubelet-serving", c.NodeName, nil, []string{"127.0.0.1", c.subnet.gateway().String(), c.NodeName}},
	}
	for _, ct := range certs {
		if err := pk.issue(ct.name, ct.cn, ct.orgs, ct.hosts); err != nil {
			return nil, err
		}
	}
	return pk, pk.serviceAccountKey()
}

func writeKubeconfig(path, server string, pk *pki, cert string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
`, server, pk.path("ca.crt"), pk.path(cert+".crt"), pk.path(cert+".key"))
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
