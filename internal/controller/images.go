package controller

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/image"
)

// imageUse orders image removal against sandbox creation: a create holds it
// shared from resolving its image until the sandbox is recorded (so the
// image shows as in use), removal and collection hold it exclusively. It is
// per process, like the image store's directory it guards.
var imageUse sync.RWMutex

// HoldImages keeps every create from resolving an image until release is
// called: what removes images or collects layers (internal/controller/images)
// holds it, so an image cannot go between a create resolving it and the
// sandbox being recorded as its user.
func (c *Controller) HoldImages() (release func()) {
	imageUse.Lock()
	return imageUse.Unlock
}

// Image resolves ref to an image, building a built-in one on first use.
func (c *Controller) Image(ctx context.Context, ref string) (*image.Image, error) {
	return c.image(ctx, ref) // sandbox.go
}

// imageEnv is the sandbox's environment: the image's, then the request's,
// which wins for a name both set, then the agent's settings from the
// image's config.
func imageEnv(img *image.Image, env map[string]string) []string {
	out := make([]string, 0, len(img.Env)+len(env))
	for _, kv := range img.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := env[k]; !override {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	// The image's User and WorkingDir become the agent's defaults for
	// requests that name no user or directory. The agent keeps its own
	// variables from the processes it starts.
	if img.User != "" {
		out = append(out, wire.EnvDefaultUser+"="+img.User)
	}
	if img.WorkingDir != "" {
		out = append(out, wire.EnvDefaultCwd+"="+img.WorkingDir)
	}
	return out
}

// withDefaults replaces, in a sandbox's environment, the agent's defaults
// for requests that name no user or directory (a template's, over its
// image's).
func withDefaults(env []string, user, cwd string) []string {
	if user == "" && cwd == "" {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if (user != "" && k == wire.EnvDefaultUser) || (cwd != "" && k == wire.EnvDefaultCwd) {
			continue
		}
		out = append(out, kv)
	}
	if user != "" {
		out = append(out, wire.EnvDefaultUser+"="+user)
	}
	if cwd != "" {
		out = append(out, wire.EnvDefaultCwd+"="+cwd)
	}
	return out
}

// sharedImporter says whether the images owner imported or pulled are
// everyone's to find by name: the operator's (the unix socket, keys of
// scope all, and records older than owners), not a tenant's.
func (c *Controller) sharedImporter(ctx context.Context, owner string) bool {
	return owner == "" || owner == api.CallerLocal || c.KeyScope(ctx, owner) == api.KeyScopeAll
}
