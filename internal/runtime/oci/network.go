package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// applyNetwork joins a prepared network namespace (egress mode) and gives
// the sandbox the resolver Paddock generated for it. runc and crun put the
// container in the namespace; runsc puts its sandbox there and, seeing the
// path, runs with --network=sandbox (runscNetworkArgs).
func applyNetwork(s *specs.Spec, spec runtime.Spec) {
	if spec.NetNSPath != "" {
		for i, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				s.Linux.Namespaces[i].Path = spec.NetNSPath
			}
		}
	}
	if spec.ResolvConf != "" {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: "/etc/resolv.conf", Type: "bind", Source: spec.ResolvConf,
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"},
		})
	}
	if spec.TrustBundle != "" {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: runtime.TrustBundlePath, Type: "bind", Source: spec.TrustBundle,
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"},
		})
	}
}
