package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/users"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
)

// maxInitBody bounds POST /init.
const maxInitBody = 1 << 20

type infoService struct{ a *Agent }

var _ agentv1connect.AgentServiceHandler = (*infoService)(nil)

func (s *infoService) Info(context.Context, *connect.Request[agentv1.InfoRequest]) (*connect.Response[agentv1.InfoResponse], error) {
	return connect.NewResponse(&agentv1.InfoResponse{
		Version:           s.a.opts.Version,
		EnvdVersion:       EnvdVersion,
		Pid:               uint32(os.Getpid()),
		StartedAtUnixNano: s.a.started.UnixNano(),
		ProcessCount:      uint32(s.a.procs.count()),
	}), nil
}

func (a *Agent) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Envd-Version", EnvdVersion)
	w.WriteHeader(http.StatusNoContent)
}

// initRequest is the part of envd's /init body the agent acts on; time
// sync, tokens and volume mounts are the daemon's business.
type initRequest struct {
	EnvVars        map[string]string `json:"envVars"`
	DefaultUser    string            `json:"defaultUser"`
	DefaultWorkdir string            `json:"defaultWorkdir"`
}

func (a *Agent) handleInit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Envd-Version", EnvdVersion)
	var req initRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(io.LimitReader(r.Body, maxInitBody)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			reply.Status(w, http.StatusBadRequest, "init body is not valid JSON")
			return
		}
	}
	if req.DefaultUser != "" && !users.ValidName(req.DefaultUser) {
		reply.Status(w, http.StatusBadRequest, "invalid default user")
		return
	}
	if req.DefaultWorkdir != "" && (!filepath.IsAbs(req.DefaultWorkdir) || strings.IndexByte(req.DefaultWorkdir, 0) >= 0) {
		reply.Status(w, http.StatusBadRequest, "default workdir must be an absolute path")
		return
	}
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			reply.Status(w, http.StatusBadRequest, fmt.Sprintf("invalid environment variable %q", k))
			return
		}
	}
	a.mu.Lock()
	for k, v := range req.EnvVars {
		a.env = setEnv(a.env, k, v)
	}
	if req.DefaultUser != "" {
		a.defaultUser = req.DefaultUser
	}
	if req.DefaultWorkdir != "" {
		a.defaultCwd = filepath.Clean(req.DefaultWorkdir)
	}
	a.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func (a *Agent) handleEnvs(w http.ResponseWriter, r *http.Request) {
	m := make(map[string]string)
	for _, kv := range a.sandboxEnv() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}
