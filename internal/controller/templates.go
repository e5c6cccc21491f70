package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Reserved labels: pooled and build sandboxes are ordinary sandboxes the
// controller finds by these, so a caller may not set them.
const (
	labelTemplate   = "paddock.dev/template"
	labelBuild      = "paddock.dev/build"
	labelBuilder    = "paddock.dev/builder"
	labelPool       = "paddock.dev/pool"
	labelPoolReady  = "paddock.dev/pool-ready"
	labelIdentifier = "paddock.dev/identifier"
)

// buildTimeout bounds a whole template build.
const buildTimeout = time.Hour

// templatePlan is what creating from a template adds to a sandbox record.
type templatePlan struct {
	layers []string
	labels map[string]string
	keep   bool
}

func (p *templatePlan) apply(rec *store.Sandbox) {
	if p == nil {
		return
	}
	rec.SnapshotLayers = append([]string(nil), p.layers...)
	if len(p.labels) > 0 && rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	maps.Copy(rec.Labels, p.labels)
	if p.keep {
		rec.KeepAlive = true
	}
}

// hasReservedLabel reports whether l sets one of the labels the controller
// finds pooled and build sandboxes by. Other paddock.dev/ labels are free:
// the CLI marks `do` sandboxes with one, and the E2B facade its own.
func hasReservedLabel(l map[string]string) bool {
	for _, k := range []string{labelTemplate, labelBuild, labelBuilder, labelPool, labelPoolReady, labelIdentifier, labelClusterPool} {
		if _, ok := l[k]; ok {
			return true
		}
	}
	return false
}

// templateLayersInUse adds the layers of every template and build cache
// entry to used; false means they could not be listed, and nothing may be
// collected this time.
func (c *Controller) templateLayersInUse(ctx context.Context, used map[string]bool) bool {
	ts, err := c.opts.Store.ListTemplates(ctx)
	if err != nil {
		c.log.Error("layer collection: list templates", "err", err)
		return false
	}
	for _, t := range ts {
		for _, d := range t.Layers {
			used[d] = true
		}
	}
	es, err := c.opts.Store.ListBuildCache(ctx)
	if err != nil {
		c.log.Error("layer collection: list build cache", "err", err)
		return false
	}
	for _, e := range es {
		for _, d := range e.Layers {
			used[d] = true
		}
	}
	return true
}

// buildState is what the steps so far make the build and the template
// start with.
type buildState struct {
	env  map[string]string
	cwd  string
	user string
}

func (b *buildState) step(st api.TemplateStep) {
	switch st.Kind {
	case api.StepEnv:
		maps.Copy(b.env, st.Env)
	case api.StepWorkdir:
		b.cwd = st.Dir
	case api.StepUser:
		b.user = st.User
	}
}

func hashKey(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BuildTemplate runs spec's steps in a sandbox and records the result as
// a template. Each step's result is cached under the hash of the base,
// every step up to it and the content it copies, so an unchanged rebuild
// runs nothing. A failed step leaves the previous template (if any) as it
// was. emit gets progress; the returned error is also reported by the
// caller's end event.
func (c *Controller) BuildTemplate(ctx context.Context, spec api.TemplateSpec, bc *BuildContext, emit func(api.TemplateBuildEvent) error) (*api.Template, error) {
	if err := validateTemplateSpec(&spec); err != nil {
		return nil, err
	}
	if _, err := c.snapStore(); err != nil {
		return nil, err
	}
	// A copy of a path missing from the context fails before any image
	// is resolved or built.
	for i, s := range spec.Steps {
		if s.Kind == api.StepCopy {
			if _, _, err := bc.selectCopy(s.Src); err != nil {
				return nil, fmt.Errorf("step %d: %w", i+1, err)
			}
		}
	}
	st := &buildState{env: map[string]string{}, user: "root"}
	var (
		imgRef, imgDigest string
		baseLayers        []string
		effective         = spec
	)
	if spec.Template != "" {
		base, err := c.opts.Store.GetTemplate(ctx, spec.Template)
		if err != nil {
			return nil, fmt.Errorf("base template: %w", err)
		}
		imgRef, imgDigest, baseLayers = base.Image, base.ImageDigest, base.Layers
		maps.Copy(st.env, base.Spec.Env)
		st.cwd = base.Spec.Cwd
		if effective.Runtime == "" {
			effective.Runtime = base.Spec.Runtime
		}
		if len(effective.Start) == 0 {
			effective.Start, effective.Ready = base.Spec.Start, base.Spec.Ready
		}
	} else {
		imgRef = spec.Image
		if imgRef == "" {
			imgRef = c.cfg.DefaultImage
		}
		img, err := c.image(ctx, imgRef)
		if err != nil {
			return nil, err
		}
		imgDigest = img.Digest
	}
	// Keys first: a copy of a path missing from the context fails before
	// anything starts.
	keys := make([]string, len(spec.Steps))
	copies := make([][]contextFile, len(spec.Steps))
	parentJSON, _ := json.Marshal(baseLayers)
	prev := hashKey([]byte("paddock-template-v1"), []byte(imgDigest), parentJSON)
	for i, s := range spec.Steps {
		stepJSON, _ := json.Marshal(s)
		var content string
		if s.Kind == api.StepCopy {
			files, sum, err := bc.selectCopy(s.Src)
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i+1, err)
			}
			copies[i], content = files, sum
		}
		keys[i] = hashKey([]byte(prev), stepJSON, []byte(content))
		prev = keys[i]
	}
	// The deepest step already cached is where the build resumes.
	done, layers := 0, baseLayers
	for i := len(keys) - 1; i >= 0; i-- {
		if e, err := c.opts.Store.GetBuildCache(ctx, keys[i]); err == nil && c.layersPresent(e.Layers) {
			done, layers = i+1, e.Layers
			break
		}
	}
	n := len(spec.Steps)
	for i := 0; i < done; i++ {
		st.step(spec.Steps[i])
		if err := emit(api.TemplateBuildEvent{Type: api.BuildStep, Step: i + 1, Steps: n, Kind: spec.Steps[i].Kind, Cached: true}); err != nil {
			return nil, err
		}
	}
	if done < n {
		var err error
		layers, err = c.runSteps(ctx, &spec, imgDigest, layers, keys, copies, done, st, emit)
		if err != nil {
			return nil, err
		}
	} else {
		for _, s := range spec.Steps[done:] {
			st.step(s)
		}
	}
	buildID := prev
	if err := c.opts.Store.PruneBuildCache(context.WithoutCancel(ctx), spec.Name, keys); err != nil {
		c.log.Warn("prune build cache", "template", spec.Name, "err", err)
	}
	env := maps.Clone(st.env)
	maps.Copy(env, spec.Env)
	effective.Env = env
	if effective.Cwd == "" {
		effective.Cwd = st.cwd
	}
	rec := &store.Template{
		Name: spec.Name, Spec: effective, Image: imgRef, ImageDigest: imgDigest,
		Layers: layers, BuildID: buildID,
	}
	if old, err := c.opts.Store.GetTemplate(ctx, spec.Name); err == nil {
		rec.CreatedAt = old.CreatedAt
	}
	// Recorded under the image lock, so the image cannot be collected
	// between the build sandbox going away and the template naming it.
	imageUse.RLock()
	if _, err := c.opts.Images.Resolve(ctx, imgDigest); err != nil {
		imageUse.RUnlock()
		return nil, fmt.Errorf("template %s: its image %s went away during the build: %w", spec.Name, imgDigest, errdefs.ErrUnavailable)
	}
	err := c.opts.Store.PutTemplate(context.WithoutCancel(ctx), rec)
	imageUse.RUnlock()
	if err != nil {
		return nil, err
	}
	c.log.Info("template built", "template", spec.Name, "build", buildID[:12], "cached_steps", done, "steps", n)
	c.pools.kick()
	return templateAPI(rec), nil
}

// layersPresent reports whether every layer is still on disk.
func (c *Controller) layersPresent(layers []string) bool {
	ss, err := c.snapStore()
	if err != nil {
		return false
	}
	for _, d := range layers {
		if _, err := ss.LayerPath(d); err != nil {
			return false
		}
	}
	return true
}

// runSteps starts a build sandbox on the cached result and runs the
// remaining steps in it. After each step that changes files the whole
// writable layer is committed on top of the layers the sandbox started
// with, so every cache entry is a complete chain of its own.
func (c *Controller) runSteps(ctx context.Context, spec *api.TemplateSpec, imgDigest string, layers []string, keys []string, copies [][]contextFile, from int, st *buildState, emit func(api.TemplateBuildEvent) error) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	sb, err := c.create(ctx, api.CreateSandboxRequest{
		Image: imgDigest, Runtime: spec.Runtime, Timeout: buildTimeout.String(),
		Labels: map[string]string{labelBuilder: spec.Name},
	}, &templatePlan{layers: layers, keep: true})
	if err != nil {
		return nil, fmt.Errorf("start the build sandbox: %w", err)
	}
	c.pools.setBuilding(sb.ID, true)
	defer func() {
		if err := c.destroy(context.WithoutCancel(ctx), sb.ID, "template build finished"); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Error("destroy build sandbox", "sandbox", sb.ID, "err", err)
		}
		c.pools.setBuilding(sb.ID, false)
	}()
	n := len(spec.Steps)
	for i := from; i < n; i++ {
		s := spec.Steps[i]
		if err := emit(api.TemplateBuildEvent{Type: api.BuildStep, Step: i + 1, Steps: n, Kind: s.Kind}); err != nil {
			return nil, err
		}
		switch s.Kind {
		case api.StepRun:
			if err := c.runStep(ctx, sb.ID, i+1, n, s.Run, st, emit); err != nil {
				return nil, err
			}
		case api.StepCopy:
			if err := c.copyStep(ctx, sb.ID, s.Dst, st.user, copies[i]); err != nil {
				return nil, fmt.Errorf("step %d (copy %s): %w", i+1, rules.Truncate(s.Src, 80), err)
			}
		default:
			st.step(s)
		}
		if s.Kind == api.StepRun || s.Kind == api.StepCopy {
			chain, err := c.commitBuildLayer(ctx, sb.ID, keys[i], spec.Name)
			if err != nil {
				return nil, fmt.Errorf("step %d: commit: %w", i+1, err)
			}
			layers = chain
		} else if err := c.opts.Store.PutBuildCache(ctx, &store.BuildCacheEntry{Key: keys[i], Template: spec.Name, Layers: layers}); err != nil {
			return nil, err
		}
	}
	return layers, nil
}

func (c *Controller) runStep(ctx context.Context, id string, step, n int, cmd string, st *buildState, emit func(api.TemplateBuildEvent) error) error {
	var tail bytes.Buffer
	var exit *api.ExecEvent
	err := c.Exec(ctx, id, api.ExecRequest{
		Cmd: []string{"/bin/sh", "-c", cmd}, Env: maps.Clone(st.env), Cwd: st.cwd, User: st.user,
		Timeout: buildTimeout.String(),
	}, func(ev api.ExecEvent) error {
		switch ev.Type {
		case "stdout", "stderr":
			tail.Write(ev.Data)
			if tail.Len() > 4096 {
				tail.Next(tail.Len() - 4096)
			}
			return emit(api.TemplateBuildEvent{Type: api.BuildOutput, Step: step, Steps: n, Kind: api.StepRun, Data: ev.Data})
		case "end":
			e := ev
			exit = &e
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("step %d (run): %w", step, err)
	}
	if exit == nil || exit.ExitCode == nil || *exit.ExitCode != 0 || exit.Error != nil {
		code, reason := -1, ""
		if exit != nil {
			if exit.ExitCode != nil {
				code = *exit.ExitCode
			}
			if exit.Error != nil {
				reason = exit.Error.Message
			}
		}
		msg := fmt.Sprintf("step %d (run %q) failed with exit code %d", step, rules.Truncate(cmd, 60), code)
		if reason != "" {
			msg += ": " + reason
		}
		if tail.Len() > 0 {
			msg += "; output ends:\n" + tail.String()
		}
		return fmt.Errorf("%s: %w", msg, errdefs.ErrFailedPrecondition)
	}
	return nil
}

func (c *Controller) copyStep(ctx context.Context, id, dst, user string, files []contextFile) error {
	data, err := tarOf(files)
	if err != nil {
		return err
	}
	ag, _, done, err := c.Agent(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	return ag.TarIn(ctx, dst, user, bytes.NewReader(data))
}

// commitBuildLayer captures the build sandbox's writable layer and caches
// the chain under key before the collector can see the layer unused.
func (c *Controller) commitBuildLayer(ctx context.Context, id, key, template string) ([]string, error) {
	rec, _, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	chain, _, err := c.captureLayer(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer c.snaps.mu.Unlock()
	out := make([]string, 0, len(chain))
	for _, l := range chain {
		out = append(out, l.Digest)
	}
	if err := c.opts.Store.PutBuildCache(context.WithoutCancel(ctx), &store.BuildCacheEntry{Key: key, Template: template, Layers: out}); err != nil {
		return nil, err
	}
	return out, nil
}

func templateAPI(t *store.Template) *api.Template {
	out := &api.Template{
		Name: t.Name, Spec: t.Spec, Image: t.Image, ImageDigest: t.ImageDigest,
		Layers: append([]string{}, t.Layers...), BuildID: t.BuildID,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	return out
}

// GetTemplate returns a template by name.
func (c *Controller) GetTemplate(ctx context.Context, name string) (*api.Template, error) {
	if !rules.ValidName(name) {
		return nil, errdefs.Invalid("template name %q is not valid", rules.Truncate(name, 80))
	}
	t, err := c.opts.Store.GetTemplate(ctx, name)
	if err != nil {
		return nil, err
	}
	return templateAPI(t), nil
}

// ListTemplates lists templates by name.
func (c *Controller) ListTemplates(ctx context.Context) ([]api.Template, error) {
	ts, err := c.opts.Store.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Template{}
	for _, t := range ts {
		out = append(out, *templateAPI(t))
	}
	return out, nil
}

// DeleteTemplate removes a template and its build cache. Sandboxes made
// from it keep running; pools of it stop refilling and say why.
func (c *Controller) DeleteTemplate(ctx context.Context, name string) error {
	if err := requireScopeAll(ctx, "deleting a template"); err != nil { // scope.go
		return err
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("template name %q is not valid", rules.Truncate(name, 80))
	}
	if err := c.opts.Store.DeleteTemplate(ctx, name); err != nil {
		return err
	}
	c.log.Info("template deleted", "template", name)
	c.pools.kick()
	go c.collectLayers(context.WithoutCancel(ctx))
	return nil
}
