package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/daemon"
	"github.com/paddock-dev/paddock/internal/kubebin"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		printConfig bool
		policyFile  string
		flags       struct {
			stateDir, socket, listen, logLevel                                                                            string
			backend, kubeconfig, kubeNamespace, kubeRuntimeClasses, kubeEgressProxy, kubeEgressProxyPods, kubeImagePrefix string
			kubeStartTimeout                                                                                              time.Duration
			kubeQPS                                                                                                       int
			kubeImagePush                                                                                                 bool
		}
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Paddock daemon",
		Long: `Run the Paddock daemon: the API on a unix socket (and optionally TCP, where API
keys are required), the sandboxes' controller, and the image store.

Stopping the daemon leaves sandboxes running; the next start re-adopts them.
Environment: PADDOCK_STATE_DIR, PADDOCK_SOCKET, PADDOCK_LISTEN, PADDOCK_LOG_LEVEL,
PADDOCK_POLICY_FILE, PADDOCK_DEFAULT_RUNTIME (runc, gvisor or crun: for creates that name
none, E2B's included), PADDOCK_BACKEND, PADDOCK_KUBECONFIG, PADDOCK_KUBE_NAMESPACE,
PADDOCK_KUBE_IMAGE_PREFIX; sandbox networking: PADDOCK_NETWORK_RANGE,
PADDOCK_FIREWALL and PADDOCK_EGRESS_* (docs/networking.md). --print-config
shows every setting.

With --backend kubernetes, sandboxes run as agent-sandbox Sandbox objects on
the cluster the kubeconfig names (docs/kubernetes.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if err := cfg.ApplyEnv(os.Getenv); err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("state-dir") {
				cfg.StateDir = flags.stateDir
			}
			if f.Changed("socket") {
				cfg.Socket = flags.socket
			}
			if f.Changed("listen") {
				cfg.Listen = flags.listen
			}
			if f.Changed("log-level") {
				cfg.LogLevel = flags.logLevel
			}
			if f.Changed("backend") {
				cfg.Backend = flags.backend
			}
			if f.Changed("kubeconfig") {
				abs, err := filepath.Abs(flags.kubeconfig)
				if err != nil {
					return err
				}
				cfg.Kubernetes.Kubeconfig = abs
			}
			if f.Changed("kube-namespace") {
				cfg.Kubernetes.Namespace = flags.kubeNamespace
			}
			if f.Changed("kube-runtime-classes") {
				m, err := config.ParseRuntimeClasses(flags.kubeRuntimeClasses)
				if err != nil {
					return fmt.Errorf("--kube-runtime-classes: %w", err)
				}
				cfg.Kubernetes.RuntimeClasses = m
			}
			if f.Changed("kube-start-timeout") {
				cfg.Kubernetes.StartTimeout = flags.kubeStartTimeout
			}
			if f.Changed("kube-qps") {
				cfg.Kubernetes.QPS = flags.kubeQPS
			}
			if f.Changed("kube-image-prefix") {
				cfg.Kubernetes.ImagePrefix = flags.kubeImagePrefix
			}
			if f.Changed("kube-image-push") {
				cfg.Kubernetes.ImagePush = flags.kubeImagePush
			}
			if f.Changed("kube-egress-proxy") {
				cfg.Kubernetes.EgressProxy = flags.kubeEgressProxy
			}
			if f.Changed("kube-egress-proxy-pods") {
				cfg.Kubernetes.EgressProxyPods = flags.kubeEgressProxyPods
			}
			if f.Changed("policy") {
				abs, err := filepath.Abs(policyFile)
				if err != nil {
					return err
				}
				cfg.PolicyFile = abs
			}
			if printConfig {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(cfg); err != nil {
					return err
				}
				return cfg.Validate()
			}
			if cfg.Backend == config.BackendKubernetes && !daemon.HasKubernetes() {
				// The daemon with the cluster's client libraries is a
				// binary of its own; it takes over this process.
				if err := cfg.Validate(); err != nil {
					return err
				}
				return kubebin.Exec(cfg.BinDir(), os.Args[1:])
			}
			var level slog.Level
			_ = level.UnmarshalText([]byte(cfg.LogLevel))
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return daemon.Run(cmd.Context(), cfg, log, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&flags.stateDir, "state-dir", config.DefaultStateDir, "directory for the database, images and sandboxes")
	f.StringVar(&flags.socket, "socket", config.DefaultSocket, "unix socket to serve the API on")
	f.StringVar(&flags.listen, "listen", "", "also serve on this TCP address (API keys required), e.g. 127.0.0.1:8080")
	f.StringVar(&flags.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&policyFile, "policy", "", "admission policy file (JSON; docs/admission.md); PUT /v1/policy rewrites it")
	f.StringVar(&flags.backend, "backend", config.BackendLocal, "where sandboxes run: local or kubernetes")
	f.StringVar(&flags.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (--backend kubernetes; default: in-cluster)")
	f.StringVar(&flags.kubeNamespace, "kube-namespace", "default", "namespace of the sandboxes' objects (--backend kubernetes)")
	f.StringVar(&flags.kubeRuntimeClasses, "kube-runtime-classes", "runc=", "Paddock runtimes offered and their RuntimeClasses, as RUNTIME=CLASS,... (empty CLASS: the cluster's default; --backend kubernetes)")
	f.StringVar(&flags.kubeEgressProxy, "kube-egress-proxy", "", "serve the egress proxy for the pods of sandboxes with network egress on this IPV4:PORT, an address the pods reach (--backend kubernetes; without it, egress is refused)")
	f.StringVar(&flags.kubeEgressProxyPods, "kube-egress-proxy-pods", "", "the pods serving --kube-egress-proxy as NAMESPACE/KEY=VALUE,... (the daemon's own, in the cluster): sandboxes' NetworkPolicies name them by labels instead of by address")
	f.StringVar(&flags.kubeImagePrefix, "kube-image-prefix", "paddock.local", "registry and path the sandboxes' images are named under on the nodes (--backend kubernetes)")
	f.BoolVar(&flags.kubeImagePush, "kube-image-push", false, "push each image a pod runs, with the agent added, to --kube-image-prefix before the pod names it (--backend kubernetes; credentials: PADDOCK_KUBE_REGISTRY_CONFIG or Docker's config.json)")
	f.IntVar(&flags.kubeQPS, "kube-qps", 100, "requests a second the daemon sends the API server at most, bursts of twice as many (--backend kubernetes)")
	f.DurationVar(&flags.kubeStartTimeout, "kube-start-timeout", 3*time.Minute, "how long a sandbox's pod may take to run (scheduling, volumes, image pull) before its start fails with the cluster's reason (--backend kubernetes)")
	f.BoolVar(&printConfig, "print-config", false, "print the resulting configuration and exit")
	return cmd
}
