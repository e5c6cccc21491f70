package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/oci"
)

// knownRuntimes are the runtimes Paddock can drive, in the order `paddock
// info` lists them.
var knownRuntimes = []struct{ api, bin string }{
	{api.RuntimeRunc, oci.KindRunc},
	{api.RuntimeGVisor, oci.KindRunsc},
	{api.RuntimeCrun, oci.KindCrun},
}

// diskPoolPerSize is how many formatted disk images of each recently used
// size a runtime keeps ready, so a start does not wait for mkfs.
const diskPoolPerSize = 2

// closeBackends lets backends finish their background work (a disk image
// being formatted) before the daemon exits.
func closeBackends(backends map[string]runtime.Backend) {
	for _, b := range backends {
		if c, ok := b.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// probeRuntimes probes every known runtime at once and builds a backend for
// each that works. A runtime that does not work is reported with its
// reason, never fatal: the daemon serves with what works.
func probeRuntimes(ctx context.Context, cfg config.Config, agentBin string, log *slog.Logger) (map[string]runtime.Backend, []api.RuntimeInfo) {
	infos := make([]api.RuntimeInfo, len(knownRuntimes))
	backends := make([]runtime.Backend, len(knownRuntimes))
	var wg sync.WaitGroup
	for i, rt := range knownRuntimes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bin, note := "", ""
			if rt.bin == oci.KindRunsc {
				bin, note = cfg.RunscPath() // the pinned build, or Debian's
			}
			pr := oci.Probe(ctx, rt.bin, bin, filepath.Join(cfg.StateDir, "runtime", "probe"), agentBin)
			info := api.RuntimeInfo{Name: rt.api, Binary: rt.bin, Path: pr.Path, Version: pr.Version, Available: pr.Available, Reason: pr.Reason, Note: note}
			if pr.Available {
				opts := oci.Options{Runtime: rt.bin, Binary: pr.Path, Root: cfg.RuntimeDir(rt.bin), Logger: log.With("part", "runtime", "runtime", rt.api), DiskPool: diskPoolPerSize, UserNamespaces: cfg.UserNamespaces}
				if rt.bin == oci.KindRunsc {
					opts.Platform = cfg.RunscPlatform
				}
				b, err := oci.New(opts)
				if err != nil {
					info.Available, info.Reason = false, err.Error()
				} else {
					backends[i] = b
					if rt.bin != oci.KindRunsc {
						info.UserNamespaces = "on"
						if on, why := b.UserNamespaces(); !on {
							info.UserNamespaces = "off: " + why
						}
					}
					if p := b.Platform(); p != "" {
						info.Note = strings.TrimPrefix(info.Note+", platform "+p, ", ")
					}
				}
			}
			infos[i] = info
		}()
	}
	wg.Wait()
	out := map[string]runtime.Backend{}
	for i, rt := range knownRuntimes {
		if backends[i] != nil {
			out[rt.api] = backends[i]
			continue
		}
		log.Warn("runtime not available", "runtime", rt.api, "reason", infos[i].Reason)
	}
	return out, infos
}

// loadPolicy loads the admission policy: the named file, which must exist,
// or else <StateDir>/policy.json if a PUT /v1/policy wrote one.
func loadPolicy(ctrl *controller.Controller, cfg config.Config) error {
	if cfg.PolicyFile != "" {
		return ctrl.LoadPolicy(cfg.PolicyFile, true)
	}
	return ctrl.LoadPolicy(filepath.Join(cfg.StateDir, "policy.json"), false)
}

// KubernetesRuntimes builds the Kubernetes backends (kubewire.Runtimes)
// for the runtimes names lists, in that order, whose pods' images carry
// the agent agentID names (image.AgentID).
type KubernetesRuntimes func(ctx context.Context, cfg config.Config, log *slog.Logger, names []string, agentID string) (map[string]runtime.Backend, []api.RuntimeInfo, error)

// kubeRuntimes is the binary's Kubernetes backend, if it links one.
var kubeRuntimes KubernetesRuntimes

// LinkKubernetes gives the daemon its Kubernetes backend. Only
// cmd/paddock-kubernetes links one, before anything runs; the paddock
// binary runs that one for `serve --backend kubernetes` (internal/kubebin).
func LinkKubernetes(f KubernetesRuntimes) { kubeRuntimes = f }

// HasKubernetes says whether this binary links the Kubernetes backend.
func HasKubernetes() bool { return kubeRuntimes != nil }

// egressApplier changes a running sandbox's reach on the cluster after its
// network rules changed. Every Kubernetes backend names a sandbox's
// NetworkPolicy alike, so the first that can does it for any runtime.
func egressApplier(backends map[string]runtime.Backend) func(ctx context.Context, id string, e runtime.Egress) error {
	type egressSetter interface {
		SetEgress(ctx context.Context, id string, e runtime.Egress) error
	}
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if s, ok := backends[n].(egressSetter); ok {
			return s.SetEgress
		}
	}
	return nil
}

// imagePusher is what pushes the images pods run to the cluster's
// registry when the config asks for it (kubernetes.image_push), and
// deletes them there when they leave the store, or nil.
func imagePusher(cfg config.Config, images *image.Store, agentBin, agentID string, log *slog.Logger) (*image.Pusher, error) {
	if !cfg.Kubernetes.ImagePush {
		return nil, nil
	}
	auth, err := image.RegistryKeychain(cfg.Kubernetes.RegistryConfig)
	if err != nil {
		return nil, err
	}
	p, err := image.NewPusher(image.PusherOptions{
		Prefix: cfg.Kubernetes.ImagePrefix, AgentBinary: agentBin, AgentID: agentID, TempDir: images.Dir(), Auth: auth,
		LayerCache: filepath.Join(cfg.StateDir, "pushed-layers.json"),
		Logger:     log.With("part", "images", "registry", cfg.Kubernetes.ImagePrefix),
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
