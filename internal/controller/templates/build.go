package templates

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
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// buildTimeout bounds a whole template build.
const buildTimeout = time.Hour

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

// mayReplace refuses a build that would replace a template ctx's caller
// did not build, unless the caller has scope all: the others' sandboxes
// are made from it, and one tenant must not change what they run. The
// refusal is the same whoever built it.
func mayReplace(ctx context.Context, old *store.Template) error {
	if old.Owner != "" && old.Owner == controller.Caller(ctx) {
		return nil
	}
	return controller.RequireScopeAll(ctx, fmt.Sprintf("rebuilding template %s, which this key did not build,", old.Name))
}

// Build runs spec's steps in a sandbox and records the result as a
// template built by ctx's caller. Each step's result is cached under the
// hash of the builder, the base, every step up to it and the content it
// copies, so an unchanged rebuild by the same key runs nothing. A failed
// step leaves the previous template (if any) as it was. A key of scope
// own may rebuild only the templates it built. emit gets progress; the
// returned error is also reported by the caller's end event.
func (s *Service) Build(ctx context.Context, spec api.TemplateSpec, bc *BuildContext, emit func(api.TemplateBuildEvent) error) (*api.Template, error) {
	if err := controller.RequireCaller(ctx); err != nil {
		return nil, err
	}
	if err := validateTemplateSpec(&spec); err != nil {
		return nil, err
	}
	if err := s.core.CanKeepLayers(); err != nil {
		return nil, err
	}
	if err := s.mayBuildIn(ctx, spec.Name); err != nil { // tags.go
		return nil, err
	}
	// A copy of a path missing from the context fails before any image
	// is resolved or built.
	for i, st := range spec.Steps {
		if st.Kind == api.StepCopy {
			if _, _, err := bc.selectCopy(st.Src); err != nil {
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
		base, err := s.st.GetTemplate(ctx, spec.Template)
		if err != nil {
			return nil, fmt.Errorf("base template: %w", err)
		}
		imgRef, imgDigest, baseLayers = base.Image, base.ImageDigest, base.Layers
		maps.Copy(st.env, base.Spec.Env)
		st.cwd = base.Spec.Cwd
		if effective.Runtime == "" {
			effective.Runtime = base.Spec.Runtime
		}
		if effective.User == "" {
			effective.User = base.Spec.User
		}
		if len(effective.Start) == 0 {
			effective.Start, effective.Ready = base.Spec.Start, base.Spec.Ready
		}
	} else {
		var err error
		if imgRef, imgDigest, err = s.core.ResolveImage(ctx, spec.Image); err != nil {
			return nil, err
		}
	}
	seed := cacheSeed(controller.Caller(ctx), imgDigest, baseLayers)
	keys, copies, err := stepKeys(spec, bc, seed)
	if err != nil {
		return nil, err
	}
	// The deepest step already cached is where the build resumes.
	done, layers := 0, baseLayers
	for i := len(keys) - 1; i >= 0; i-- {
		if e, err := s.st.GetBuildCache(ctx, keys[i]); err == nil && s.core.LayersPresent(e.Layers) {
			done, layers = i+1, e.Layers
			break
		}
	}
	n := len(spec.Steps)
	if done < n && !s.core.BuildStartsOnLayers(spec.Runtime) {
		// The build's pod starts from the image alone (Kubernetes without
		// pushed images): it runs every step, and cannot start on another
		// template's files.
		if len(baseLayers) > 0 {
			return nil, fmt.Errorf("template %s: a template built on a template with build steps cannot be built on this runtime without pushed images (its pod starts from the image alone: see --kube-image-push); build it on %s's image with the base template's steps: %w",
				spec.Name, spec.Template, errdefs.ErrFailedPrecondition)
		}
		done, layers = 0, baseLayers
	}
	for i := 0; i < done; i++ {
		st.step(spec.Steps[i])
		if err := emit(api.TemplateBuildEvent{Type: api.BuildStep, Step: i + 1, Steps: n, Kind: spec.Steps[i].Kind, Cached: true}); err != nil {
			return nil, err
		}
	}
	if done < n {
		if layers, err = s.runSteps(ctx, &spec, imgDigest, layers, keys, copies, done, st, emit); err != nil {
			return nil, err
		}
	}
	buildID := seed
	if n > 0 {
		buildID = keys[n-1]
	}
	if err := s.st.PruneBuildCache(context.WithoutCancel(ctx), spec.Name, keys); err != nil {
		s.log.Warn("prune build cache", "template", spec.Name, "err", err)
	}
	env := maps.Clone(st.env)
	maps.Copy(env, spec.Env)
	effective.Env = env
	if effective.Cwd == "" {
		effective.Cwd = st.cwd
	}
	rec := &store.Template{
		Name: spec.Name, Spec: effective, Image: imgRef, ImageDigest: imgDigest,
		Layers: layers, BuildID: buildID, Owner: controller.Caller(ctx),
	}
	if err := s.record(ctx, rec); err != nil {
		return nil, err
	}
	s.log.Info("template built", "template", spec.Name, "build", buildID[:12], "cached_steps", done, "steps", n)
	return templateAPI(rec), nil
}

// MayBuild refuses, before anything is built, a build of name ctx's
// caller could not record (Build checks again when it records).
func (s *Service) MayBuild(ctx context.Context, name string) error {
	if err := controller.RequireCaller(ctx); err != nil {
		return err
	}
	name, err := templateRef(name)
	if err != nil {
		return err
	}
	return s.mayBuildIn(ctx, name)
}

// record stores a built template, checking again, with no other record
// of this daemon between, that it replaces none the caller may not.
func (s *Service) record(ctx context.Context, rec *store.Template) error {
	s.recording.Lock()
	defer s.recording.Unlock()
	if err := s.mayBuildIn(ctx, rec.Name); err != nil {
		return err
	}
	if old, err := s.st.GetTemplate(ctx, rec.Name); err == nil {
		rec.CreatedAt = old.CreatedAt
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return s.core.PutTemplate(ctx, rec)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// cacheSeed is what the first step's cache key is made from: the builder,
// the image and the layers of the base template. The builder is part of
// it because the build sandbox is the builder's own, which it can reach
// while a step runs: a result cached for one key must never be what
// another key's build of the same steps starts from.
func cacheSeed(builder, imgDigest string, baseLayers []string) string {
	return hashKey([]byte("paddock-template-v2"), []byte(builder), []byte(imgDigest), mustJSON(baseLayers))
}

// stepKeys returns each step's cache key (the hash of the seed, every
// step up to it and the content it copies) and the files each copy step
// copies.
func stepKeys(spec api.TemplateSpec, bc *BuildContext, seed string) ([]string, [][]contextFile, error) {
	keys := make([]string, len(spec.Steps))
	copies := make([][]contextFile, len(spec.Steps))
	prev := seed
	for i, s := range spec.Steps {
		var content string
		if s.Kind == api.StepCopy {
			files, sum, err := bc.selectCopy(s.Src)
			if err != nil {
				return nil, nil, fmt.Errorf("step %d: %w", i+1, err)
			}
			copies[i], content = files, sum
		}
		keys[i] = hashKey([]byte(prev), mustJSON(s), []byte(content))
		prev = keys[i]
	}
	return keys, copies, nil
}

// runSteps starts a build sandbox on the cached result and runs the
// remaining steps in it. After each step that changes files the whole
// writable layer is committed on top of the layers the sandbox started
// with, so every cache entry is a complete chain of its own.
func (s *Service) runSteps(ctx context.Context, spec *api.TemplateSpec, imgDigest string, layers []string, keys []string, copies [][]contextFile, from int, st *buildState, emit func(api.TemplateBuildEvent) error) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	id, err := s.core.StartBuild(ctx, spec.Name, api.CreateSandboxRequest{
		Image: imgDigest, Runtime: spec.Runtime, Timeout: buildTimeout.String(),
	}, layers)
	if err != nil {
		return nil, fmt.Errorf("start the build sandbox: %w", err)
	}
	defer s.core.EndBuild(context.WithoutCancel(ctx), id)
	n := len(spec.Steps)
	for i := from; i < n; i++ {
		step := spec.Steps[i]
		if err := emit(api.TemplateBuildEvent{Type: api.BuildStep, Step: i + 1, Steps: n, Kind: step.Kind}); err != nil {
			return nil, err
		}
		switch step.Kind {
		case api.StepRun:
			if err := s.runStep(ctx, id, i+1, n, step.Run, st, emit); err != nil {
				return nil, err
			}
		case api.StepCopy:
			if err := s.copyStep(ctx, id, step.Dst, st.user, copies[i]); err != nil {
				return nil, fmt.Errorf("step %d (copy %s): %w", i+1, rules.Truncate(step.Src, 80), err)
			}
		default:
			st.step(step)
		}
		if step.Kind == api.StepRun || step.Kind == api.StepCopy {
			key := keys[i]
			chain, err := s.core.CommitBuildLayer(ctx, id, func(chain []string) error {
				return s.st.PutBuildCache(context.WithoutCancel(ctx), &store.BuildCacheEntry{Key: key, Template: spec.Name, Layers: chain})
			})
			if err != nil {
				return nil, fmt.Errorf("step %d: commit: %w", i+1, err)
			}
			layers = chain
		} else if err := s.st.PutBuildCache(ctx, &store.BuildCacheEntry{Key: keys[i], Template: spec.Name, Layers: layers}); err != nil {
			return nil, err
		}
	}
	return layers, nil
}

func (s *Service) runStep(ctx context.Context, id string, step, n int, cmd string, st *buildState, emit func(api.TemplateBuildEvent) error) error {
	var tail bytes.Buffer
	var exit *api.ExecEvent
	err := s.core.Exec(ctx, id, api.ExecRequest{
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

func (s *Service) copyStep(ctx context.Context, id, dst, user string, files []contextFile) error {
	data, err := tarOf(files)
	if err != nil {
		return err
	}
	ag, _, done, err := s.core.Agent(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	return ag.TarIn(ctx, dst, user, bytes.NewReader(data))
}
