package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// measureNetworkGVisor is measureNetwork on gVisor: egress there has runsc
// run its own netstack on the prepared namespace (--network=sandbox).
func (s *Suite) measureNetworkGVisor(ctx context.Context) Comparison {
	const id, title = "network-create-gvisor", "Create to first exec with egress networking vs without (busybox, gVisor)"
	series := s.interleaveN(ctx, ItemNetwork, []Variant{
		{Name: "create --network egress + exec (gvisor)", Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExecOn(ctx, api.RuntimeGVisor, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{Mode: "egress", AllowHosts: []string{"example.com"}}})
		}},
		{Name: "create (no network) + exec (gvisor)", Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExecOn(ctx, api.RuntimeGVisor, api.CreateSandboxRequest{Image: "busybox"})
		}},
	})
	note := "On gVisor, egress also has runsc copy the namespace's address and routes into its netstack when the sandbox starts; removal is not timed."
	return NewComparison(id, title, note, series)
}

// createFirstExecOn creates a labelled sandbox on runtime rt from req,
// runs `true`, and removes it untimed.
func (s *Suite) createFirstExecOn(ctx context.Context, rt string, req api.CreateSandboxRequest) (time.Duration, error) {
	req.Runtime, req.KeepAlive = rt, true
	req.Labels = map[string]string{runLabel: s.label}
	var sbID string
	d, err := Timed(func() error {
		sb, err := s.c.Create(ctx, req)
		if err != nil {
			return err
		}
		sbID = sb.ID
		return s.execTrue(ctx, sb.ID)
	})
	if sbID != "" {
		if derr := s.destroy(ctx, sbID); derr != nil && err == nil {
			err = fmt.Errorf("destroy: %w", derr)
		}
	}
	return d, err
}
