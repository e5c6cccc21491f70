package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/admission"
	"github.com/paddock-dev/paddock/internal/store"
)

// admissionState holds the admission policy and serialises quota checks with
// the insertion of the record they admit, so concurrent creates by one
// key can never together pass its quota.
type admissionState struct {
	quotaMu sync.Mutex

	mu     sync.RWMutex
	policy admission.Policy
	path   string // where SetPolicy persists; "" keeps it in memory only

	probeMu  sync.RWMutex
	runtimes []api.RuntimeInfo
	layout   string
	version  string
}

// LoadPolicy reads the policy file at path and makes it the policy that
// PUT /v1/policy later rewrites. A missing file is an error only when
// mustExist; otherwise the policy starts empty and is created on the first
// PUT.
func (c *Controller) LoadPolicy(path string, mustExist bool) error {
	cp, err := admission.Compile(api.Policy{AllowNetwork: true})
	if err != nil {
		return err
	}
	if path != "" {
		data, rerr := os.ReadFile(path)
		switch {
		case rerr == nil:
			p, perr := admission.Parse(data)
			if perr != nil {
				return fmt.Errorf("policy file %s: %w", path, perr)
			}
			if cp, err = admission.Compile(p); err != nil {
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
	return c.adm.policy.Doc()
}

// SetPolicy validates p, persists it (atomically, when the daemon has a
// policy file) and puts it in force for every later create. Sandboxes
// admitted under the old policy are left alone.
func (c *Controller) SetPolicy(ctx context.Context, p api.Policy) (api.Policy, error) {
	cp, err := admission.Compile(p)
	if err != nil {
		return api.Policy{}, err
	}
	c.adm.mu.Lock()
	defer c.adm.mu.Unlock()
	if c.adm.path != "" {
		if err := admission.WriteFile(c.adm.path, p); err != nil {
			return api.Policy{}, err
		}
	}
	c.adm.policy = cp
	c.log.Info("admission policy replaced", "caller", Caller(ctx), "active", cp.Active())
	return p, nil
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
	if err := cp.Check(rec, rec.Labels[labelTemplate]); err != nil {
		return err
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
	if err := cp.CheckQuota(rec.KeyID, rec.ID, all); err != nil {
		return err
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
