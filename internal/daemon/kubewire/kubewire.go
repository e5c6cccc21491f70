// Package kubewire builds the daemon's Kubernetes backends. It is linked
// only into cmd/paddock-kubernetes: the cluster's client libraries add
// about 30 ms of package initialisation and 30 MB to every start of the
// binary that holds them, which every CLI command would pay. `paddock
// serve --backend kubernetes` runs that binary instead (internal/kubebin).
package kubewire

import (
	"context"
	"log/slog"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/kube"
)

// Runtimes connects to the cluster the config names and builds one
// Kubernetes backend per runtime of names (in that order) that the config
// maps to a RuntimeClass. Unlike a local runtime, a cluster that cannot be
// reached is fatal: nothing would run.
func Runtimes(ctx context.Context, cfg config.Config, log *slog.Logger, names []string, agentID string) (map[string]runtime.Backend, []api.RuntimeInfo, error) {
	cl, err := kube.Connect(ctx, cfg.Kubernetes.Kubeconfig, cfg.Kubernetes.QPS)
	if err != nil {
		return nil, nil, err
	}
	var proxyPods *kube.PodSelector
	if cfg.Kubernetes.EgressProxyPods != "" {
		ns, labels, err := config.ParsePodSelector(cfg.Kubernetes.EgressProxyPods)
		if err != nil {
			return nil, nil, err
		}
		proxyPods = &kube.PodSelector{Namespace: ns, Labels: labels}
	}
	out := map[string]runtime.Backend{}
	var infos []api.RuntimeInfo
	for _, rt := range names {
		class, ok := cfg.Kubernetes.RuntimeClasses[rt]
		if !ok {
			continue
		}
		b, err := kube.New(kube.Options{
			Name: rt, Client: cl.Client, Watcher: cl.Watcher, Namespace: cfg.Kubernetes.Namespace, Instance: cfg.KubeInstance(),
			ImagePrefix: cfg.Kubernetes.ImagePrefix, AgentID: agentID, ImagePullSecret: cfg.Kubernetes.ImagePullSecret, RuntimeClass: class,
			HomeVolume: cfg.Kubernetes.HomeVolume, HomeStorageClass: cfg.Kubernetes.HomeStorageClass,
			StartTimeout: cfg.Kubernetes.StartTimeout, EgressProxyPods: proxyPods,
			Logger: log.With("part", "runtime", "runtime", rt, "backend", config.BackendKubernetes),
		})
		if err != nil {
			return nil, nil, err
		}
		out[rt] = b
		what, note := "kubernetes", "kubernetes, the cluster's default RuntimeClass"
		if class != "" {
			what += " (RuntimeClass " + class + ")"
			note = "kubernetes, RuntimeClass " + class
		}
		if cfg.Kubernetes.ImagePush {
			note += "; images pushed to " + cfg.Kubernetes.ImagePrefix
		} else {
			note += "; images found on the nodes as " + cfg.Kubernetes.ImagePrefix + "/NAME:DIGEST-AGENT"
		}
		infos = append(infos, api.RuntimeInfo{Name: rt, Binary: what, Path: cl.Server, Version: cl.Version, Available: true, Note: note})
	}
	log.Info("kubernetes backend", "server", cl.Server, "version", cl.Version, "namespace", cfg.Kubernetes.Namespace, "instance", cfg.KubeInstance())
	return out, infos, nil
}
