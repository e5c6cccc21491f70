package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// usageReaders bounds the sandboxes whose usage is read at once.
const usageReaders = 4

// UsageSource is where the usage sampler reads from.
type UsageSource struct {
	// Live lists the sandboxes to sample (those running or paused).
	Live func(ctx context.Context) ([]Sandbox, error)
	// Read reads one sandbox's usage from its runtime.
	Read func(ctx context.Context, id, runtime string) (runtime.Usage, error)
	Log  *slog.Logger
	// Done is closed when the daemon stops; the sampler ends with it.
	Done <-chan struct{}
}

// Sandbox is a sandbox to sample.
type Sandbox struct {
	ID, Runtime, Owner string
}

// usageFeed samples the live sandboxes' usage for the subscriptions that
// ask for it: one sampler for all of them, running only while one does,
// so a page more or less costs the daemon nothing more.
type usageFeed struct {
	mu      sync.Mutex
	src     UsageSource
	running bool
	prev    map[string]usageSample // by sandbox, the last sample
}

type usageSample struct {
	cpuNanos uint64
	at       time.Time
}

// SetUsageSource says where usage samples come from; call it before the
// first subscription that wants usage (without it, none get samples).
func (h *Hub) SetUsageSource(src UsageSource) {
	h.feed.mu.Lock()
	defer h.feed.mu.Unlock()
	h.feed.src = src
}

// wantsUsage starts the sampler if it is not running; called after adding
// a subscription that wants usage (the sampler stops when it counts none,
// under the same lock, so one of the two sees the other).
func (h *Hub) wantsUsage() {
	h.feed.mu.Lock()
	defer h.feed.mu.Unlock()
	if h.feed.running || h.feed.src.Live == nil {
		return
	}
	h.feed.running = true
	go h.sampleUsage()
}

// usageSubscribers counts the subscriptions that want usage.
func (h *Hub) usageSubscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for s := range h.subs {
		if s.usage {
			n++
		}
	}
	return n
}

// sampleUsage samples every api.UsageInterval until no subscription wants
// usage or the source is done.
func (h *Hub) sampleUsage() {
	t := time.NewTicker(api.UsageInterval)
	defer t.Stop()
	for {
		h.feed.mu.Lock()
		if h.usageSubscribers() == 0 {
			h.feed.running = false
			h.feed.prev = nil
			h.feed.mu.Unlock()
			return
		}
		src := h.feed.src
		h.feed.mu.Unlock()
		h.publishUsage(context.Background(), src)
		select {
		case <-src.Done:
			h.feed.mu.Lock()
			h.feed.running = false
			h.feed.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// publishUsage reads each live sandbox's usage and sends every usage
// subscription the part it may see.
func (h *Hub) publishUsage(ctx context.Context, src UsageSource) {
	live, err := src.Live(ctx)
	if err != nil {
		src.Log.Warn("usage sample: list sandboxes", "err", err)
		return
	}
	out := make([]api.SandboxUsage, len(live))
	ok := make([]bool, len(live))
	var wg sync.WaitGroup
	sem := make(chan struct{}, usageReaders)
	for i, sb := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			u, err := src.Read(rctx, sb.ID, sb.Runtime)
			cancel()
			if err != nil {
				src.Log.Debug("usage sample", "sandbox", sb.ID, "err", err)
				return
			}
			out[i] = api.SandboxUsage{ID: sb.ID, MemoryBytes: u.MemoryBytes, MemoryLimitBytes: u.MemoryLimitBytes,
				DiskUsedBytes: u.DiskUsedBytes, DiskTotalBytes: u.DiskTotalBytes}
			out[i].CPUPercent = h.feed.cpuPercent(sb.ID, u.CPUNanos, time.Now())
			ok[i] = true
		}()
	}
	wg.Wait()
	h.feed.forgetExcept(out, ok)

	at := time.Now().UTC()
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.usage {
			continue
		}
		mine := []api.SandboxUsage{}
		for i := range out {
			if ok[i] && s.may(live[i].Owner) {
				mine = append(mine, out[i])
			}
		}
		h.deliver(s, api.Event{Type: api.StreamUsage, Usage: mine, At: at})
	}
}

// forgetExcept drops the previous samples of sandboxes not sampled now.
func (f *usageFeed) forgetExcept(out []api.SandboxUsage, ok []bool) {
	seen := map[string]bool{}
	for i := range out {
		if ok[i] {
			seen[out[i].ID] = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.prev {
		if !seen[id] {
			delete(f.prev, id)
		}
	}
}

// cpuPercent is the CPU used since the sandbox's previous sample, in
// percent of one CPU, or nil on its first sample.
func (f *usageFeed) cpuPercent(id string, cpuNanos uint64, now time.Time) *float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.prev == nil {
		f.prev = map[string]usageSample{}
	}
	prev, had := f.prev[id]
	f.prev[id] = usageSample{cpuNanos: cpuNanos, at: now}
	wall := now.Sub(prev.at)
	if !had || wall <= 0 || cpuNanos < prev.cpuNanos {
		return nil
	}
	p := float64(cpuNanos-prev.cpuNanos) / float64(wall.Nanoseconds()) * 100
	return &p
}
