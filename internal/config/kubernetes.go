package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Backends Paddock runs sandboxes on.
const (
	// BackendLocal: containers on this host (runc, runsc, crun).
	BackendLocal = "local"
	// BackendKubernetes: agent-sandbox Sandbox objects on a cluster.
	BackendKubernetes = "kubernetes"
)

// Kubernetes configures the Kubernetes backend (Backend "kubernetes").
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file ($PADDOCK_KUBECONFIG, `serve
	// --kubeconfig`); "" uses the pod's service account (in-cluster).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace holds the sandboxes' objects ($PADDOCK_KUBE_NAMESPACE).
	Namespace string `json:"namespace"`
	// ImagePrefix is where sandbox images are named on the nodes
	// ($PADDOCK_KUBE_IMAGE_PREFIX): a registry the nodes pull from, to
	// which `paddock image export --prefix` archives were pushed, or the
	// default paddock.local for archives imported with ctr on each node.
	ImagePrefix string `json:"image_prefix"`
	// ImagePush has the daemon push each image a sandbox or warm pool
	// runs (base images, imported images, templates' images, each with
	// the agent added) to ImagePrefix before a pod names it, once per
	// image ($PADDOCK_KUBE_IMAGE_PUSH, `serve --kube-image-push`), so
	// nothing is exported or imported by hand. ImagePrefix must then be
	// a registry (not paddock.local).
	ImagePush bool `json:"image_push,omitempty"`
	// RegistryConfig is a file of credentials for the push, in Docker's
	// config.json form ($PADDOCK_KUBE_REGISTRY_CONFIG); "" reads Docker's
	// own ($DOCKER_CONFIG or ~/.docker/config.json), and a registry no
	// file names is reached anonymously.
	RegistryConfig string `json:"registry_config,omitempty"`
	// ImagePullSecret names a Secret of type kubernetes.io/dockerconfigjson
	// in Namespace that every pod pulls its image with
	// ($PADDOCK_KUBE_IMAGE_PULL_SECRET); "" gives pods none (the nodes'
	// own credentials, or a public registry).
	ImagePullSecret string `json:"image_pull_secret,omitempty"`
	// RuntimeClasses maps Paddock's runtime names to RuntimeClass names
	// ("" = the cluster's default handler). A runtime absent here is not
	// offered.
	RuntimeClasses map[string]string `json:"runtime_classes"`
	// HomeVolume puts each sandbox's /home/user on a PersistentVolumeClaim,
	// so its files survive a stop (default true); HomeStorageClass names
	// the claims' StorageClass ("" = the cluster's default).
	HomeVolume       bool   `json:"home_volume"`
	HomeStorageClass string `json:"home_storage_class,omitempty"`
	// Instance tells this daemon's objects from another daemon's in the
	// same namespace; default: derived from the host name and state dir.
	Instance string `json:"instance,omitempty"`
	// EgressProxy is where the daemon serves the egress proxy for the
	// pods of sandboxes with network egress ($PADDOCK_KUBE_EGRESS_PROXY,
	// `serve --kube-egress-proxy`): IPV4:PORT, an address the pods reach
	// (port 0 picks one). Empty: network egress is refused.
	EgressProxy string `json:"egress_proxy,omitempty"`
	// EgressProxyPods names the pods that serve EgressProxy, as
	// NAMESPACE/KEY=VALUE[,KEY=VALUE...] ($PADDOCK_KUBE_EGRESS_PROXY_PODS,
	// `serve --kube-egress-proxy-pods`): the daemon's own pods, when it
	// runs in the cluster. The sandboxes' NetworkPolicies then let them
	// reach those pods by namespace and labels instead of by address,
	// which many network plugins do not match against pods' addresses.
	// Empty: by address.
	EgressProxyPods string `json:"egress_proxy_pods,omitempty"`
	// StartTimeout bounds the wait for a sandbox's pod to run
	// ($PADDOCK_KUBE_START_TIMEOUT, `serve --kube-start-timeout`; default
	// 3m): scheduling, volumes and the image's pull included. A pod that
	// does not run by then fails the start with the cluster's reason.
	StartTimeout time.Duration `json:"start_timeout"`
	// QPS is how many requests a second the daemon sends the API server
	// at most, all sandboxes together, with bursts of twice as many
	// ($PADDOCK_KUBE_QPS, `serve --kube-qps`; default 100). A create
	// takes about five; watches are not counted.
	QPS int `json:"qps"`
}

// Bounds of Kubernetes.StartTimeout and Kubernetes.QPS.
const (
	minKubeStartTimeout = 5 * time.Second
	maxKubeStartTimeout = time.Hour
	minKubeQPS          = 5
	maxKubeQPS          = 5000
)

func defaultKubernetes() Kubernetes {
	return Kubernetes{Namespace: "default", ImagePrefix: "paddock.local", RuntimeClasses: map[string]string{"runc": ""}, HomeVolume: true, StartTimeout: 3 * time.Minute, QPS: 100}
}

// ParseRuntimeClasses reads a runtime-to-RuntimeClass map written as
// comma-separated RUNTIME=CLASS pairs ("runc=,gvisor=gvisor"; an empty
// CLASS is the cluster's default handler), as PADDOCK_KUBE_RUNTIME_CLASSES
// and `serve --kube-runtime-classes` take it. Names are checked by Validate.
func ParseRuntimeClasses(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		rt, class, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("runtime classes: %q is not RUNTIME=CLASS (an empty CLASS is the cluster's default, as in runc=)", pair)
		}
		rt, class = strings.TrimSpace(rt), strings.TrimSpace(class)
		if _, dup := m[rt]; dup {
			return nil, fmt.Errorf("runtime classes: runtime %q is given twice", rt)
		}
		m[rt] = class
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("runtime classes: %q names no runtime", s)
	}
	return m, nil
}

func (c *Config) applyKubernetesEnv(getenv func(string) string) error {
	if v := getenv("PADDOCK_BACKEND"); v != "" {
		c.Backend = v
	}
	if v := getenv("PADDOCK_KUBECONFIG"); v != "" {
		c.Kubernetes.Kubeconfig = v
	}
	if v := getenv("PADDOCK_KUBE_NAMESPACE"); v != "" {
		c.Kubernetes.Namespace = v
	}
	if v := getenv("PADDOCK_KUBE_IMAGE_PREFIX"); v != "" {
		c.Kubernetes.ImagePrefix = v
	}
	if v := getenv("PADDOCK_KUBE_IMAGE_PUSH"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_KUBE_IMAGE_PUSH: %q is not true or false", v)
		}
		c.Kubernetes.ImagePush = b
	}
	if v := getenv("PADDOCK_KUBE_REGISTRY_CONFIG"); v != "" {
		c.Kubernetes.RegistryConfig = v
	}
	if v := getenv("PADDOCK_KUBE_IMAGE_PULL_SECRET"); v != "" {
		c.Kubernetes.ImagePullSecret = v
	}
	if v := getenv("PADDOCK_KUBE_EGRESS_PROXY"); v != "" {
		c.Kubernetes.EgressProxy = v
	}
	if v := getenv("PADDOCK_KUBE_EGRESS_PROXY_PODS"); v != "" {
		c.Kubernetes.EgressProxyPods = v
	}
	if v := getenv("PADDOCK_KUBE_START_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_KUBE_START_TIMEOUT: %w", err)
		}
		c.Kubernetes.StartTimeout = d
	}
	if v := getenv("PADDOCK_KUBE_QPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_KUBE_QPS: %q is not a whole number", v)
		}
		c.Kubernetes.QPS = n
	}
	if v := getenv("PADDOCK_KUBE_RUNTIME_CLASSES"); v != "" {
		m, err := ParseRuntimeClasses(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_KUBE_RUNTIME_CLASSES: %w", err)
		}
		c.Kubernetes.RuntimeClasses = m
	}
	return nil
}

// ParsePodSelector reads pods named as NAMESPACE/KEY=VALUE[,KEY=VALUE...]
// (Kubernetes.EgressProxyPods): at least one label, each a valid label
// key and value.
func ParsePodSelector(s string) (namespace string, labels map[string]string, err error) {
	ns, sel, ok := strings.Cut(s, "/")
	if !ok || !dnsLabel.MatchString(ns) {
		return "", nil, fmt.Errorf("%q: want NAMESPACE/KEY=VALUE[,KEY=VALUE...], such as paddock-system/app.kubernetes.io/name=paddock", s)
	}
	labels = map[string]string{}
	for _, pair := range strings.Split(sel, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !validLabelKey(k) || (v != "" && !labelName.MatchString(v)) {
			return "", nil, fmt.Errorf("%q: label %q is not KEY=VALUE with a valid label key and value", s, pair)
		}
		if _, dup := labels[k]; dup {
			return "", nil, fmt.Errorf("%q: label %q is given twice", s, k)
		}
		labels[k] = v
	}
	return ns, labels, nil
}

// validLabelKey: an optional DNS subdomain prefix and "/", then a name of
// at most 63 characters.
func validLabelKey(k string) bool {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if len(prefix) > 253 || !dnsSubdomain.MatchString(prefix) {
			return false
		}
		name = n
	}
	return labelName.MatchString(name)
}

var (
	labelName    = lazyre.New(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	dnsLabel     = lazyre.New(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = lazyre.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func (c *Config) validateKubernetes() []error {
	switch c.Backend {
	case BackendLocal:
		return nil
	case BackendKubernetes:
	default:
		return []error{fmt.Errorf("backend %q: want %s or %s", c.Backend, BackendLocal, BackendKubernetes)}
	}
	var errs []error
	k := c.Kubernetes
	if k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
		errs = append(errs, fmt.Errorf("kubeconfig %q must be an absolute path", k.Kubeconfig))
	}
	if !dnsLabel.MatchString(k.Namespace) {
		errs = append(errs, fmt.Errorf("kubernetes namespace %q is not a valid namespace name", k.Namespace))
	}
	if k.HomeStorageClass != "" && !dnsLabel.MatchString(k.HomeStorageClass) {
		errs = append(errs, fmt.Errorf("kubernetes home_storage_class %q is not a valid name", k.HomeStorageClass))
	}
	if k.Instance != "" && !dnsLabel.MatchString(k.Instance) {
		errs = append(errs, fmt.Errorf("kubernetes instance %q: want a DNS label (lower-case letters, digits, '-')", k.Instance))
	}
	if err := image.ValidateOCIPrefix(k.ImagePrefix); err != nil {
		errs = append(errs, fmt.Errorf("kubernetes image prefix: %w", err))
	}
	if k.ImagePush && k.ImagePrefix == defaultKubernetes().ImagePrefix {
		errs = append(errs, fmt.Errorf("kubernetes image_push: image_prefix %q is not a registry; set it to the registry and path the nodes pull from, such as registry.example.com/paddock", k.ImagePrefix))
	}
	if k.RegistryConfig != "" && !filepath.IsAbs(k.RegistryConfig) {
		errs = append(errs, fmt.Errorf("kubernetes registry_config %q must be an absolute path", k.RegistryConfig))
	}
	if k.ImagePullSecret != "" && (len(k.ImagePullSecret) > 253 || !dnsSubdomain.MatchString(k.ImagePullSecret)) {
		errs = append(errs, fmt.Errorf("kubernetes image_pull_secret %q is not a valid Secret name", k.ImagePullSecret))
	}
	if k.EgressProxy != "" {
		if ap, err := netip.ParseAddrPort(k.EgressProxy); err != nil || !ap.Addr().Is4() || ap.Addr().IsUnspecified() {
			errs = append(errs, fmt.Errorf("kubernetes egress_proxy %q: want IPV4:PORT, an address the pods reach (not 0.0.0.0)", k.EgressProxy))
		}
	}
	if k.EgressProxyPods != "" {
		if k.EgressProxy == "" {
			errs = append(errs, fmt.Errorf("kubernetes egress_proxy_pods is set without egress_proxy"))
		}
		if _, _, err := ParsePodSelector(k.EgressProxyPods); err != nil {
			errs = append(errs, fmt.Errorf("kubernetes egress_proxy_pods: %w", err))
		}
	}
	if k.StartTimeout < minKubeStartTimeout || k.StartTimeout > maxKubeStartTimeout {
		errs = append(errs, fmt.Errorf("kubernetes start_timeout %s: want %s to %s", k.StartTimeout, minKubeStartTimeout, maxKubeStartTimeout))
	}
	if k.QPS < minKubeQPS || k.QPS > maxKubeQPS {
		errs = append(errs, fmt.Errorf("kubernetes qps %d: want %d to %d", k.QPS, minKubeQPS, maxKubeQPS))
	}
	if len(k.RuntimeClasses) == 0 {
		errs = append(errs, fmt.Errorf("kubernetes runtime_classes is empty: no runtime would be offered"))
	}
	for rt, class := range k.RuntimeClasses {
		if rt != "runc" && rt != "gvisor" && rt != "crun" {
			errs = append(errs, fmt.Errorf("kubernetes runtime_classes: runtime %q: want runc, gvisor or crun", rt))
		}
		if class != "" && !dnsLabel.MatchString(class) {
			errs = append(errs, fmt.Errorf("kubernetes runtime_classes: RuntimeClass %q is not a valid name", class))
		}
	}
	return errs
}

// KubeInstance is Kubernetes.Instance, or one derived from the host name
// and the state dir, so two daemons never share one.
func (c *Config) KubeInstance() string {
	if c.Kubernetes.Instance != "" {
		return c.Kubernetes.Instance
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + c.StateDir))
	return "pd-" + hex.EncodeToString(sum[:6])
}
