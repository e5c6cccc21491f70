package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"os"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// A warm pool's pod on a cluster is made before anyone asks for it and
// the daemon cannot reach its agent before the claim, so a template's
// start command is given to the agent (wire.EnvStart), which starts it as
// the background process "start" at boot and checks its readiness itself.
// wire.StartedPath tells the kubelet's readiness probe how that went: the
// pod is ready, and the cluster's pool counts it, once the check passed.

// Start states, in Agent.startState.
const (
	startNone    int32 = iota // no start command, or it passed its check
	startWaiting              // started, its check not passed yet
	startFailed               // it did not start or its check failed
)

// startFromEnv starts the command EnvStart carries, if any, and follows
// its readiness check in the background.
func (a *Agent) startFromEnv(ctx context.Context) {
	raw := os.Getenv(wire.EnvStart)
	if raw == "" {
		return
	}
	var spec wire.StartSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil || len(spec.Cmd) == 0 {
		a.log.Error("start command from the environment is not valid", "err", err)
		a.startState.Store(startFailed)
		return
	}
	a.startState.Store(startWaiting)
	go func() {
		if err := a.runStart(ctx, spec); err != nil {
			a.log.Error("start command", "err", err)
			a.startState.Store(startFailed)
			return
		}
		a.log.Info("start command ready", "cmd", spec.Cmd[0])
		a.startState.Store(startNone)
	}()
}

// runStart starts spec's command and waits for its check, as the daemon
// does for a sandbox it starts itself (through the same services).
func (a *Agent) runStart(ctx context.Context, spec wire.StartSpec) error {
	if _, err := a.startBackground(ctx, &agentv1.StartProcessRequest{
		Id: wire.StartProcessID, Cmd: spec.Cmd, Cwd: spec.Cwd, User: spec.User,
	}); err != nil {
		return err
	}
	w := &agentv1.WaitProcessRequest{Id: wire.StartProcessID, TimeoutMs: spec.ReadyTimeoutMs}
	if w.TimeoutMs <= 0 {
		w.TimeoutMs = wire.DefaultReadyTimeout.Milliseconds()
	}
	switch {
	case spec.ReadyPort != 0:
		w.Condition, w.Port = "port", uint32(spec.ReadyPort)
	case spec.ReadyLog != "":
		w.Condition, w.Pattern = "log", spec.ReadyLog
	default:
		return nil
	}
	_, err := (&bgService{a: a}).WaitProcess(ctx, connect.NewRequest(w))
	return err
}

// handleStarted answers wire.StartedPath.
func (a *Agent) handleStarted(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch a.startState.Load() {
	case startWaiting:
		http.Error(w, "start command not ready", http.StatusServiceUnavailable)
	case startFailed:
		http.Error(w, "start command failed", http.StatusInternalServerError)
	default:
		_, _ = w.Write([]byte("ready\n"))
	}
}
