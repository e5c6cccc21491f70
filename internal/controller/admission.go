package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/store"
)

// Bounds on a policy document, which may come from any local caller.
const (
	maxPolicyBytes   = 1 << 20
	maxPolicyEntries = 1024
	maxPolicyEntry   = 256
	maxQuota         = 1_000_000
)

var (
	policyImageRE = lazyre.New(`^([a-zA-Z0-9][a-zA-Z0-9_./:@-]{0,254}|sha256:[a-f0-9]{64})$`)
)

// admission holds the admission policy and serialises quota checks with
// the insertion of the record they admit, so concurrent creates by one
// key can never together pass its quota.
type admission struct {
	quotaMu sync.Mutex

	mu     sync.RWMutex
	policy compiledPolicy
	path   string // where SetPolicy persists; "" keeps it in memory only

	probeMu  sync.RWMutex
	runtimes []api.RuntimeInfo
	layout   string
	version  string
}

// compiledPolicy is a validated policy with its limits parsed.
type compiledPolicy struct {
	doc      api.Policy
	maxRes   api.Resources // zero fields bound nothing
	lifetime time.Duration
	active   bool
}

// ParsePolicy reads a policy document (JSON), refusing unknown fields and
// anything that does not validate.
func ParsePolicy(data []byte) (api.Policy, error) {
	var p api.Policy
	if len(data) > maxPolicyBytes {
		return p, errdefs.Invalid("policy is larger than %d bytes", maxPolicyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, errdefs.Invalid("policy is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return p, errdefs.Invalid("policy has data after the JSON object")
	}
	if _, err := compilePolicy(p); err != nil {
		return p, err
	}
	return p, nil
}

func compilePolicy(p api.Policy) (compiledPolicy, error) {
	cp := compiledPolicy{doc: p}
	if len(p.AllowedImages) > maxPolicyEntries || len(p.AllowedRuntimes) > maxPolicyEntries || len(p.AllowedTemplates) > maxPolicyEntries {
		return cp, errdefs.Invalid("policy lists more than %d entries", maxPolicyEntries)
	}
	for _, im := range p.AllowedImages {
		if len(im) > maxPolicyEntry || !policyImageRE.MatchString(im) {
			return cp, errdefs.Invalid("policy allowed_images: %q is not an image name or sha256:<64 hex> digest", truncate(im, 80))
		}
	}
	for _, t := range p.AllowedTemplates {
		if !nameRE.MatchString(t) {
			return cp, errdefs.Invalid("policy allowed_templates: %q is not a template name", truncate(t, 80))
		}
	}
	for _, rt := range p.AllowedRuntimes {
		switch rt {
		case api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun:
		default:
			return cp, errdefs.Invalid("policy allowed_runtimes: %q is not a runtime (want %s, %s or %s)", truncate(rt, 40), api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun)
		}
	}
	if p.MaxSize != "" {
		r, err := lookupSize(p.MaxSize)
		if err != nil {
			return cp, fmt.Errorf("policy max_size: %w", err)
		}
		cp.maxRes = r
	}
	if m := p.MaxResources; m != nil {
		if m.CPU < 0 || m.MemoryMB < 0 || m.DiskMB < 0 || m.Pids < 0 {
			return cp, errdefs.Invalid("policy max_resources must not be negative")
		}
		cp.maxRes = tighter(cp.maxRes, *m)
	}
	if p.MaxLifetime != "" {
		d, err := parseDuration("policy max_lifetime", p.MaxLifetime, time.Second)
		if err != nil {
			return cp, err
		}
		cp.lifetime = d
	}
	if p.MaxSandboxesPerKey < 0 || p.MaxSandboxesPerKey > maxQuota || p.MaxSandboxesLocal < 0 || p.MaxSandboxesLocal > maxQuota {
		return cp, errdefs.Invalid("policy sandbox quotas must be between 0 (no bound) and %d", maxQuota)
	}
	cp.active = len(p.AllowedImages) > 0 || len(p.AllowedRuntimes) > 0 || len(p.AllowedTemplates) > 0 || cp.maxRes != (api.Resources{}) ||
		cp.lifetime > 0 || p.MaxSandboxesPerKey > 0 || p.MaxSandboxesLocal > 0
	return cp, nil
}

// tighter takes, field by field, the smaller non-zero bound.
func tighter(a, b api.Resources) api.Resources {
	pickF := func(x, y float64) float64 {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	pickI := func(x, y int64) int64 {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	return api.Resources{CPU: pickF(a.CPU, b.CPU), MemoryMB: pickI(a.MemoryMB, b.MemoryMB), DiskMB: pickI(a.DiskMB, b.DiskMB), Pids: pickI(a.Pids, b.Pids)}
}

// LoadPolicy reads the policy file at path and makes it the policy that
// PUT /v1/policy later rewrites. A missing file is an error only when
// mustExist; otherwise the policy starts empty and is created on the first
// PUT.
func (c *Controller) LoadPolicy(path string, mustExist bool) error {
	cp, err := compilePolicy(api.Policy{AllowNetwork: true})
	if err != nil {
		return err
	}
	if path != "" {
		data, rerr := os.ReadFile(path)
		switch {
		case rerr == nil:
			p, perr := ParsePolicy(data)
			if perr != nil {
				return fmt.Errorf("policy file %s: %w", path, perr)
			}
			if cp, err = compilePolicy(p); err != nil {
				return err
			}
		case errors.Is(rerr, os.ErrNotExist) && !mustExist:
		default:
			return fmt.Errorf("policy file: %w", rerr)
		}
	}
	c.adm.mu.Lock()
	c.adm.policy, c.adm.path = cp, path
	c.adm.mu.Unlock()
	return nil
}

// Policy returns the admission policy in force.
func (c *Controller) Policy() api.Policy {
	c.adm.mu.RLock()
	defer c.adm.mu.RUnlock()
	return c.adm.policy.doc
}

// SetPolicy validates p, persists it (atomically, when the daemon has a
// policy file) and puts it in force for every later create. Sandboxes
// admitted under the old policy are left alone.
func (c *Controller) SetPolicy(ctx context.Context, p api.Policy) (api.Policy, error) {
	cp, err := compilePolicy(p)
	if err != nil {
		return api.Policy{}, err
	}
	c.adm.mu.Lock()
	defer c.adm.mu.Unlock()
	if c.adm.path != "" {
		if err := writePolicyFile(c.adm.path, p); err != nil {
			return api.Policy{}, err
		}
	}
	c.adm.policy = cp
	c.log.Info("admission policy replaced", "caller", Caller(ctx), "active", cp.active)
	return p, nil
}

func writePolicyFile(path string, p api.Policy) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode policy: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".policy-*")
	if err != nil {
		return fmt.Errorf("write policy file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write policy file: %w", err)
	}
	return nil
}

func denied(rule, format string, args ...any) error {
	return fmt.Errorf("admission policy rule %s: %s: %w", rule, fmt.Sprintf(format, args...), errdefs.ErrPermissionDenied)
}

// checkPolicy applies the policy's per-sandbox rules to rec, filling its
// lifetime from max_lifetime when the create set none.
func (cp *compiledPolicy) check(rec *store.Sandbox) error {
	p := cp.doc
	if len(p.AllowedImages) > 0 && !slices.Contains(p.AllowedImages, rec.Image) && !slices.Contains(p.AllowedImages, rec.ImageDigest) {
		return denied("allowed_images", "image %s (%s) is not allowed (allowed: %s)", rec.Image, rec.ImageDigest, strings.Join(p.AllowedImages, ", "))
	}
	if t := rec.Labels[labelTemplate]; t != "" && len(p.AllowedTemplates) > 0 && !slices.Contains(p.AllowedTemplates, t) {
		return denied("allowed_templates", "template %s is not allowed (allowed: %s)", t, strings.Join(p.AllowedTemplates, ", "))
	}
	if len(p.AllowedRuntimes) > 0 && !slices.Contains(p.AllowedRuntimes, rec.Runtime) {
		return denied("allowed_runtimes", "runtime %s is not allowed (allowed: %s)", rec.Runtime, strings.Join(p.AllowedRuntimes, ", "))
	}
	if why := exceedsLimit(rec.Resources, cp.maxRes); why != "" {
		rule := "max_resources"
		if p.MaxSize != "" && exceedsLimit(rec.Resources, mustSize(p.MaxSize)) != "" {
			rule = "max_size " + p.MaxSize
		}
		return denied(rule, "%s", why)
	}
	if cp.lifetime > 0 {
		if rec.Timeout == 0 {
			rec.Timeout = cp.lifetime
		} else if rec.Timeout > cp.lifetime {
			return denied("max_lifetime", "timeout %s is longer than %s", rec.Timeout, cp.lifetime)
		}
	}
	return nil
}

func mustSize(name string) api.Resources {
	r, _ := lookupSize(name)
	return r
}

// admitAndRecord applies the policy to rec, then counts the caller's
// sandboxes and inserts rec under one lock: the insert is the
// reservation, so no two concurrent creates see the same free slot. A
// create that fails later leaves its record in state error, which still
// counts until it is deleted.
func (c *Controller) admitAndRecord(ctx context.Context, rec *store.Sandbox) error {
	rec.KeyID = Caller(ctx)
	if rec.KeyID == "" {
		return errNoCaller
	}
	c.adm.mu.RLock()
	cp := c.adm.policy
	c.adm.mu.RUnlock()
	if err := cp.check(rec); err != nil {
		return err
	}
	limit := cp.doc.MaxSandboxesPerKey
	rule := "max_sandboxes_per_key"
	if rec.KeyID == api.CallerLocal {
		limit, rule = cp.doc.MaxSandboxesLocal, "max_sandboxes_local"
	}
	c.adm.quotaMu.Lock()
	defer c.adm.quotaMu.Unlock()
	all, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return err
	}
	if err := c.checkDisk(all, rec); err != nil { // diskadmission.go
		return err
	}
	if limit == 0 {
		return c.createRecord(ctx, rec)
	}
	n := 0
	for _, s := range all {
		if s.KeyID == rec.KeyID {
			n++
		}
	}
	if n >= limit {
		who := "API key " + rec.KeyID
		if rec.KeyID == api.CallerLocal {
			who = "the local caller"
		}
		return denied(rule, "%s has %d of %d sandboxes; delete one first", who, n, limit)
	}
	return c.createRecord(ctx, rec)
}

// createRecord saves a new sandbox's record and tells the event streams.
func (c *Controller) createRecord(ctx context.Context, rec *store.Sandbox) error {
	if err := c.opts.Store.CreateSandbox(ctx, rec); err != nil {
		return err
	}
	c.changed(rec, "", rec.State, "created")
	return nil
}
