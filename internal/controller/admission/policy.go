// Package admission holds the rules a create must pass before anything of
// it exists: the operator's admission policy (images, templates and
// runtimes allowed, the largest resources and lifetime, sandboxes per
// key) and the named size presets. It is pure: it reads what it is given
// and answers, so the controller's core applies it under its own lock
// with the records it listed (internal/controller/admission.go), and the
// API server parses a policy document with it before handing it over.
package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
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

var policyImageRE = lazyre.New(`^([a-zA-Z0-9][a-zA-Z0-9_./:@-]{0,254}|sha256:[a-f0-9]{64})$`)

// Policy is a validated admission policy with its limits parsed. The zero
// Policy admits everything.
type Policy struct {
	doc      api.Policy
	maxRes   api.Resources // zero fields bound nothing
	lifetime time.Duration
	active   bool
}

// Doc is the policy document as it was given.
func (p Policy) Doc() api.Policy { return p.doc }

// Active says whether the policy bounds anything at all.
func (p Policy) Active() bool { return p.active }

// Parse reads a policy document (JSON), refusing unknown fields and
// anything that does not validate.
func Parse(data []byte) (api.Policy, error) {
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
	if _, err := Compile(p); err != nil {
		return p, err
	}
	return p, nil
}

// Compile validates a policy document and parses its limits.
func Compile(p api.Policy) (Policy, error) {
	cp := Policy{doc: p}
	if len(p.AllowedImages) > maxPolicyEntries || len(p.AllowedRuntimes) > maxPolicyEntries || len(p.AllowedTemplates) > maxPolicyEntries {
		return cp, errdefs.Invalid("policy lists more than %d entries", maxPolicyEntries)
	}
	for _, im := range p.AllowedImages {
		if len(im) > maxPolicyEntry || !policyImageRE.MatchString(im) {
			return cp, errdefs.Invalid("policy allowed_images: %q is not an image name or sha256:<64 hex> digest", rules.Truncate(im, 80))
		}
	}
	for _, t := range p.AllowedTemplates {
		if _, ok := rules.TemplateRef(t); !ok {
			return cp, errdefs.Invalid("policy allowed_templates: %q is not a template name", rules.Truncate(t, 80))
		}
	}
	for _, rt := range p.AllowedRuntimes {
		switch rt {
		case api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun:
		default:
			return cp, errdefs.Invalid("policy allowed_runtimes: %q is not a runtime (want %s, %s or %s)", rules.Truncate(rt, 40), api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun)
		}
	}
	if p.MaxSize != "" {
		r, err := LookupSize(p.MaxSize)
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
		d, err := rules.ParseDuration("policy max_lifetime", p.MaxLifetime, time.Second)
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

// WriteFile saves a policy document at path atomically (a synced temporary
// file renamed over it), readable by its owner only.
func WriteFile(path string, p api.Policy) error {
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

// Denied is the refusal of a create by the policy rule named rule.
func Denied(rule, format string, args ...any) error {
	return fmt.Errorf("admission policy rule %s: %s: %w", rule, fmt.Sprintf(format, args...), errdefs.ErrPermissionDenied)
}

// Check applies the policy's per-sandbox rules to rec, made from template
// ("" for none), filling its lifetime from max_lifetime when the create
// set none.
func (p *Policy) Check(rec *store.Sandbox, template string) error {
	d := p.doc
	if len(d.AllowedImages) > 0 && !slices.Contains(d.AllowedImages, rec.Image) && !slices.Contains(d.AllowedImages, rec.ImageDigest) {
		return Denied("allowed_images", "image %s (%s) is not allowed (allowed: %s)", rec.Image, rec.ImageDigest, strings.Join(d.AllowedImages, ", "))
	}
	if template != "" && len(d.AllowedTemplates) > 0 && !allowedTemplate(d.AllowedTemplates, template) {
		return Denied("allowed_templates", "template %s is not allowed (allowed: %s)", template, strings.Join(d.AllowedTemplates, ", "))
	}
	if len(d.AllowedRuntimes) > 0 && !slices.Contains(d.AllowedRuntimes, rec.Runtime) {
		return Denied("allowed_runtimes", "runtime %s is not allowed (allowed: %s)", rec.Runtime, strings.Join(d.AllowedRuntimes, ", "))
	}
	if why := ExceedsLimit(rec.Resources, p.maxRes); why != "" {
		rule := "max_resources"
		if d.MaxSize != "" {
			if size, _ := LookupSize(d.MaxSize); ExceedsLimit(rec.Resources, size) != "" {
				rule = "max_size " + d.MaxSize
			}
		}
		return Denied(rule, "%s", why)
	}
	if p.lifetime > 0 {
		if rec.Timeout == 0 {
			rec.Timeout = p.lifetime
		} else if rec.Timeout > p.lifetime {
			return Denied("max_lifetime", "timeout %s is longer than %s", rec.Timeout, p.lifetime)
		}
	}
	return nil
}

// HasQuota says whether the policy bounds the sandboxes of caller key.
func (p *Policy) HasQuota(key string) bool {
	limit, _ := p.quota(key)
	return limit > 0
}

func (p *Policy) quota(key string) (limit int, rule string) {
	if key == api.CallerLocal {
		return p.doc.MaxSandboxesLocal, "max_sandboxes_local"
	}
	return p.doc.MaxSandboxesPerKey, "max_sandboxes_per_key"
}

// CheckQuota refuses sandbox id to caller key when the policy's quota for
// the key (max_sandboxes_local for the local caller) is reached by its
// other sandboxes in all, those on record. The caller lists all and
// records the sandbox under one lock, so that no two creates or claims
// take the same free place; a record in state error still counts until
// it is deleted.
func (p *Policy) CheckQuota(key, id string, all []*store.Sandbox) error {
	limit, rule := p.quota(key)
	if limit == 0 {
		return nil
	}
	n := 0
	for _, s := range all {
		if s.KeyID == key && s.ID != id {
			n++
		}
	}
	if n < limit {
		return nil
	}
	who := "API key " + key
	if key == api.CallerLocal {
		who = "the local caller"
	}
	return Denied(rule, "%s has %d of %d sandboxes; delete one first", who, n, limit)
}

// allowedTemplate says whether a policy's list allows template (a
// canonical name): named with its tag, or by its plain name, which allows
// every tag of it.
func allowedTemplate(allowed []string, template string) bool {
	name, _ := rules.SplitTemplateTag(template)
	for _, a := range allowed {
		if a, _ = rules.TemplateRef(a); a == template || a == name {
			return true
		}
	}
	return false
}
