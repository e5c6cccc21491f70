package e2b

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// E2B collects a sandbox's metrics at a fixed interval and answers
// getMetrics({start, end}) from that history. Paddock keeps the last
// metricsKeep samples of every E2B sandbox, taken every metricsInterval.
const (
	metricsInterval = 5 * time.Second
	metricsKeep     = 360 // 30 minutes
	// cpuWindow is how long a reading taken on demand measures CPU over.
	cpuWindow = 200 * time.Millisecond
)

// sampler keeps each sandbox's recent metrics.
type sampler struct {
	mu   sync.Mutex
	sbxs map[string]*history
}

// history is one sandbox's ring of samples, oldest first, and the raw
// reading the next sample's CPU use is measured from.
type history struct {
	samples  []metric
	lastCPU  uint64
	lastTime time.Time
}

func newSampler() *sampler { return &sampler{sbxs: make(map[string]*history)} }

// record turns a reading into a sample: CPU use is the share of the
// sandbox's CPUs used since the previous reading.
func (s *sampler) record(id string, u runtime.Usage, sb *api.Sandbox, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.sbxs[id]
	if h == nil {
		// The first reading only starts the CPU measurement.
		s.sbxs[id] = &history{lastCPU: u.CPUNanos, lastTime: now}
		return
	}
	m := toMetric(u, sb, h.lastCPU, now.Sub(h.lastTime), now)
	h.lastCPU, h.lastTime = u.CPUNanos, now
	if len(h.samples) == metricsKeep {
		h.samples = slices.Delete(h.samples, 0, 1)
	}
	h.samples = append(h.samples, m)
}

// window returns the samples whose second lies in [start, end], and
// whether the sandbox has any sample at all.
func (s *sampler) window(id string, start, end int64) ([]metric, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.sbxs[id]
	if h == nil || len(h.samples) == 0 {
		return []metric{}, false
	}
	out := []metric{}
	for _, m := range h.samples {
		if m.TimestampUnix >= start && m.TimestampUnix <= end {
			out = append(out, m)
		}
	}
	return out, true
}

// keepOnly forgets the sandboxes not in live.
func (s *sampler) keepOnly(live map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.sbxs {
		if !live[id] {
			delete(s.sbxs, id)
		}
	}
}

func toMetric(u runtime.Usage, sb *api.Sandbox, prevCPU uint64, elapsed time.Duration, now time.Time) metric {
	cpus := cpuCount(sb.Resources.CPU)
	var pct float64
	if u.CPUNanos > prevCPU && elapsed > 0 {
		pct = float64(u.CPUNanos-prevCPU) / float64(elapsed.Nanoseconds()) / float64(cpus) * 100
	}
	now = now.UTC()
	return metric{
		Timestamp:     now,
		TimestampUnix: now.Unix(),
		CPUCount:      cpus,
		CPUUsedPct:    math.Round(math.Min(pct, 100)*100) / 100,
		MemUsed:       u.MemoryBytes,
		MemTotal:      uint64(sb.Resources.MemoryMB) << 20,
		MemCache:      u.MemoryCacheBytes,
		DiskUsed:      u.DiskUsedBytes,
		DiskTotal:     u.DiskTotalBytes,
	}
}

// RunMetrics samples every running E2B sandbox every metricsInterval
// until ctx ends.
func (h *Handler) RunMetrics(ctx context.Context) {
	t := time.NewTicker(metricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.sampleAll(ctx)
		}
	}
}

func (h *Handler) sampleAll(ctx context.Context) {
	ctrl := h.opts.Controller
	all, err := ctrl.List(ctx, nil)
	if err != nil {
		h.log.Warn("e2b metrics", "err", err)
		return
	}
	live := make(map[string]bool, len(all))
	for _, sb := range all {
		if sb.Labels[labelTemplate] == "" {
			continue
		}
		live[sb.ID] = true
		if sb.State != api.StateRunning {
			continue
		}
		u, cur, err := ctrl.Usage(ctx, sb.ID)
		if err != nil {
			continue // it stopped meanwhile
		}
		h.samples.record(sb.ID, u, cur, time.Now())
	}
	h.samples.keepOnly(live)
}

// metricsRange reads E2B's start and end (Unix seconds). Either may be
// left out: the window is then open on that side.
func metricsRange(q url.Values, now time.Time) (start, end int64, err error) {
	if err := onlyParams(q, "start", "end"); err != nil {
		return 0, 0, err
	}
	start, end = 0, now.Unix()
	for name, dst := range map[string]*int64{"start": &start, "end": &end} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			return 0, 0, errdefs.Invalid("%s %q: want Unix seconds", name, truncate(v))
		}
		*dst = n
	}
	if start > end {
		return 0, 0, errdefs.Invalid("Invalid time range for metrics: start %d is after end %d", start, end)
	}
	return start, end, nil
}

// metrics answers getMetrics from the sandbox's history. A sandbox that
// has none yet (created since the last round) is read once on the spot,
// so a first call right after create is not empty.
func (h *Handler) metrics(w http.ResponseWriter, r *http.Request) {
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := h.samples.answer(sb.ID, r.URL.Query(), time.Now, sb.State == api.StateRunning, func() error {
		return h.sampleNow(r.Context(), sb.ID)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// answer returns sandbox id's samples in the query's window. A sandbox
// without any that is running is sampled first (sample). The window is
// read after that sample: an end left open means now, and the sample is
// later than the request's arrival (by cpuWindow), often in the next
// second.
func (s *sampler) answer(id string, q url.Values, now func() time.Time, running bool, sample func() error) ([]metric, error) {
	start, end, err := metricsRange(q, now())
	if err != nil {
		return nil, err
	}
	out, ok := s.window(id, start, end)
	if ok || !running {
		return out, nil
	}
	if err := sample(); err != nil {
		return nil, err
	}
	if start, end, err = metricsRange(q, now()); err != nil {
		return nil, err
	}
	out, _ = s.window(id, start, end)
	return out, nil
}

// sampleNow takes two readings cpuWindow apart, which make one sample.
func (h *Handler) sampleNow(ctx context.Context, id string) error {
	ctrl := h.opts.Controller
	u, sb, err := ctrl.Usage(ctx, id)
	if err != nil {
		return err
	}
	h.samples.mu.Lock()
	_, seen := h.samples.sbxs[id]
	h.samples.mu.Unlock()
	if !seen {
		h.samples.record(id, u, sb, time.Now())
	}
	select {
	case <-time.After(cpuWindow):
	case <-ctx.Done():
		return ctx.Err()
	}
	if u, sb, err = ctrl.Usage(ctx, id); err != nil {
		return err
	}
	h.samples.record(id, u, sb, time.Now())
	return nil
}
