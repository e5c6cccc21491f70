package controller

import (
	"context"
	"errors"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/periodic"
	"github.com/paddock-dev/paddock/internal/store"
)

// DefaultSnapshotTTL is how long a snapshot lives unless told otherwise;
// each restore renews it.
const DefaultSnapshotTTL = 30 * 24 * time.Hour

// Bounds on a TTL a caller may ask for (other than never).
const (
	minSnapshotTTL = time.Second
	maxSnapshotTTL = 10 * 365 * 24 * time.Hour
)

// DefaultSnapshotExpiryInterval is how often expired snapshots are deleted
// when the configuration says nothing.
const DefaultSnapshotExpiryInterval = time.Minute

// now is the controller's clock, in UTC.
func (c *Controller) now() time.Time { return c.opts.Clock().UTC() }

// parseTTL reads a snapshot TTL: "" = the default, "never" = zero (no
// expiry), or a Go duration from a second to ten years.
func parseTTL(s string) (time.Duration, error) {
	switch s {
	case "":
		return DefaultSnapshotTTL, nil
	case api.SnapshotTTLNever:
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < minSnapshotTTL || d > maxSnapshotTTL {
		return 0, errdefs.Invalid("ttl %q: want a duration from %s to %s (e.g. 72h) or %q", rules.Truncate(s, 40), minSnapshotTTL, maxSnapshotTTL, api.SnapshotTTLNever)
	}
	return d, nil
}

func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl == 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// expired says whether s is past its expiry by the controller's clock.
func (c *Controller) expired(s *store.Snapshot) bool {
	return !s.ExpiresAt.IsZero() && !c.now().Before(s.ExpiresAt)
}

// ttlString is a TTL as the API shows it.
func ttlString(ttl time.Duration) string {
	if ttl == 0 {
		return api.SnapshotTTLNever
	}
	return ttl.String()
}

// SetSnapshotTTL gives a snapshot a new TTL and makes it expire that long
// from now ("never": not at all). Later restores renew it by the new TTL.
func (c *Controller) SetSnapshotTTL(ctx context.Context, ref, ttl string) (*api.Snapshot, error) {
	if ttl == "" {
		return nil, errdefs.Invalid("ttl is required: a duration such as 72h, or %q", api.SnapshotTTLNever)
	}
	d, err := parseTTL(ttl)
	if err != nil {
		return nil, err
	}
	s, err := c.resolveSnapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.TTL, s.ExpiresAt = d, expiry(c.now(), d)
	if err := c.opts.Store.SetSnapshotTTL(ctx, s.ID, s.TTL, s.ExpiresAt); err != nil {
		return nil, err
	}
	return c.snapshotAPI(s), nil
}

// renewSnapshot makes a snapshot that was just restored expire its TTL from
// now. It runs once the restored sandbox runs, so a refused or failed
// create renews nothing. A snapshot deleted meanwhile is no error.
func (c *Controller) renewSnapshot(ctx context.Context, id string) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledger.Timeout)
	defer cancel()
	s, err := c.opts.Store.GetSnapshot(ctx, id)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Warn("renew snapshot ttl", "snapshot", id, "err", err)
		}
		return
	}
	if s.TTL == 0 {
		return
	}
	at := c.now().Add(s.TTL)
	if err := c.opts.Store.RenewSnapshot(ctx, id, at); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		c.log.Warn("renew snapshot ttl", "snapshot", id, "err", err)
		return
	}
	c.log.Debug("snapshot ttl renewed", "snapshot", id, "ttl", s.TTL, "expires_at", at)
}

// RunSnapshotExpiry removes expired snapshots and unused layers until ctx
// ends, every snapshot_expiry_interval. The first pass runs at once, which
// also clears layers a crash left stored but unrecorded.
func (c *Controller) RunSnapshotExpiry(ctx context.Context) {
	every := c.cfg.SnapshotExpiryInterval
	if every <= 0 {
		every = DefaultSnapshotExpiryInterval
	}
	periodic.Run(ctx, every, c.expireSnapshots)
}

func (c *Controller) expireSnapshots(ctx context.Context) {
	list, err := c.opts.Store.ListSnapshots(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("snapshot expiry", "err", err)
		}
		return
	}
	for _, s := range list {
		if !c.expired(s) {
			continue
		}
		if err := c.opts.Store.DeleteSnapshot(ctx, s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Error("delete expired snapshot", "snapshot", s.ID, "err", err)
			continue
		}
		c.log.Info("snapshot expired", "snapshot", s.ID, "name", s.Name, "expired_at", s.ExpiresAt)
	}
	c.collectLayers(ctx)
}
