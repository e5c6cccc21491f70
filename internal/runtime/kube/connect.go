package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiTimeout bounds each call to the API server.
const apiTimeout = 15 * time.Second

// Cluster is a connection to a cluster's API server.
type Cluster struct {
	Client client.Client
	// Watcher opens the backend's watches: the same server, without the
	// per-request timeout (a watch asks the server for at most
	// watchSeconds, and is given up a little after that).
	Watcher client.WithWatch
	// Server is the API server's URL, Version its Kubernetes version.
	Server, Version string
}

// Connect reaches the API server named by kubeconfig ("" = the pod's own
// service account), and checks that it answers and serves agent-sandbox's
// Sandbox kind: a cluster without the CRDs is refused with what to install.
// qps bounds the requests a second sent to it (bursts of twice as many).
func Connect(ctx context.Context, kubeconfig string, qps int) (*Cluster, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.UserAgent = "paddock"
	// Every call the backend makes but a watch is a short one, so a
	// server that does not answer within this is taken as away: a create
	// fails in tens of seconds, not minutes.
	wcfg := rest.CopyConfig(cfg)
	cfg.Timeout = apiTimeout
	cfg.QPS, cfg.Burst = float32(qps), 2*qps
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ver, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("kubernetes API server %s does not answer: %w", cfg.Host, err)
	}
	if _, err := dc.ServerResourcesForGroupVersion(sandboxv1.GroupVersion.String()); err != nil {
		return nil, fmt.Errorf("kubernetes API server %s does not serve %s (install agent-sandbox's CRDs and controller: deploy/kubernetes): %w", cfg.Host, sandboxv1.GroupVersion, err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	wcfg.UserAgent = "paddock"
	wcl, err := client.NewWithWatch(wcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{Client: cl, Watcher: wcl, Server: cfg.Host, Version: ver.GitVersion}, nil
}

// Scheme holds the kinds the backend uses: pods, Secrets, PVCs,
// NetworkPolicies, and agent-sandbox's Sandboxes and its extensions'
// templates, warm pools and claims.
func Scheme() (*kruntime.Scheme, error) {
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{corev1.AddToScheme, networkingv1.AddToScheme, sandboxv1.AddToScheme, extv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}
