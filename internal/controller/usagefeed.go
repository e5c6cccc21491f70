package controller

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/store"
)

// usageReaders bounds the sandboxes whose usage is read at once.
const usageReaders = 4

// usageFeed samples the running sandboxes' usage for the event streams
// that ask for it: one sampler for all of them, running only while one
// does, so a page more or less costs the daemon nothing more.
type usageFeed struct {
	mu      sync.Mutex
	running bool
	prev    map[string]usageSample // by sandbox, the last sample
}

type usageSample struct {
	cpuNanos uint64
	at       time.Time
}

// wantsUsage starts the sampler if it is not running; call it after
// adding a subscriber that wants usage (the sampler stops when it counts
// none, under the same lock, so one of the two sees the other).
func (c *Controller) wantsUsage() {
	c.usage.mu.Lock()
	defer c.usage.mu.Unlock()
	if c.usage.running {
		return
	}
	c.usage.running = true
	go c.sampleUsage()
}

// usageSubscribers counts the subscriptions that want usage.
func (c *Controller) usageSubscribers() int {
	c.events.mu.Lock()
	defer c.events.mu.Unlock()
	n := 0
	for s := range c.events.subs {
		if s.usage {
			n++
		}
	}
	return n
}

// sampleUsage samples every api.UsageInterval until no subscriber wants
// usage or the controller closes.
func (c *Controller) sampleUsage() {
	t := time.NewTicker(api.UsageInterval)
	defer t.Stop()
	for {
		c.usage.mu.Lock()
		if c.usageSubscribers() == 0 {
			c.usage.running = false
			c.usage.prev = nil
			c.usage.mu.Unlock()
			return
		}
		c.usage.mu.Unlock()
		c.publishUsage(context.Background())
		select {
		case <-c.closing:
			c.usage.mu.Lock()
			c.usage.running = false
			c.usage.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// publishUsage reads each running or paused sandbox's usage and sends
// every usage subscriber the part it may see.
func (c *Controller) publishUsage(ctx context.Context) {
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		c.log.Warn("usage sample: list sandboxes", "err", err)
		return
	}
	var live []*store.Sandbox
	for _, r := range recs {
		if r.State == api.StateRunning || r.State == api.StatePaused {
			live = append(live, r)
		}
	}
	out := make([]api.SandboxUsage, len(live))
	owners := make([]string, len(live))
	ok := make([]bool, len(live))
	var wg sync.WaitGroup
	sem := make(chan struct{}, usageReaders)
	for i, r := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			u, err := c.readUsage(rctx, r.ID, r.Runtime)
			cancel()
			if err != nil {
				c.log.Debug("usage sample", "sandbox", r.ID, "err", err)
				return
			}
			out[i] = api.SandboxUsage{ID: r.ID, MemoryBytes: u.MemoryBytes, MemoryLimitBytes: u.MemoryLimitBytes,
				DiskUsedBytes: u.DiskUsedBytes, DiskTotalBytes: u.DiskTotalBytes}
			out[i].CPUPercent = c.cpuPercent(r.ID, u.CPUNanos, time.Now())
			owners[i], ok[i] = r.KeyID, true
		}()
	}
	wg.Wait()
	c.usage.mu.Lock()
	seen := map[string]bool{}
	for i := range live {
		if ok[i] {
			seen[out[i].ID] = true
		}
	}
	for id := range c.usage.prev {
		if !seen[id] {
			delete(c.usage.prev, id)
		}
	}
	c.usage.mu.Unlock()

	at := time.Now().UTC()
	c.events.mu.Lock()
	defer c.events.mu.Unlock()
	for s := range c.events.subs {
		if !s.usage {
			continue
		}
		mine := []api.SandboxUsage{}
		for i := range out {
			if ok[i] && visible(s.ctx, owners[i]) {
				mine = append(mine, out[i])
			}
		}
		c.events.deliver(s, api.Event{Type: api.StreamUsage, Usage: mine, At: at})
	}
}

// cpuPercent is the CPU used since the sandbox's previous sample, in
// percent of one CPU, or nil on its first sample.
func (c *Controller) cpuPercent(id string, cpuNanos uint64, now time.Time) *float64 {
	c.usage.mu.Lock()
	defer c.usage.mu.Unlock()
	if c.usage.prev == nil {
		c.usage.prev = map[string]usageSample{}
	}
	prev, had := c.usage.prev[id]
	c.usage.prev[id] = usageSample{cpuNanos: cpuNanos, at: now}
	wall := now.Sub(prev.at)
	if !had || wall <= 0 || cpuNanos < prev.cpuNanos {
		return nil
	}
	p := float64(cpuNanos-prev.cpuNanos) / float64(wall.Nanoseconds()) * 100
	return &p
}
