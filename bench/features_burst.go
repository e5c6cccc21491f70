package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ItemPoolBurst measures creates arriving all at once against no pool, a
// pool of fixed size and a pool that grew from an earlier burst, each
// beside the same creates made one at a time.
const ItemPoolBurst = "pool-burst"

const (
	// burstTemplate is the template the item builds (busybox, no steps).
	burstTemplate = "paddock-bench-burst"
	// burstSize is the number of creates started at once.
	burstSize = 100
	// burstPoolMin is the pool's min_ready.
	burstPoolMin = 20
	// burstSequential is the number of one-at-a-time creates each
	// sequential baseline takes.
	burstSequential = 10
)

// PoolBurstRatioGoal is the most a burst's p50 may be of the sequential
// p50 with a pool.
const PoolBurstRatioGoal = 1.3

// measurePoolBurst runs the item: sequential and burst creates with no
// pool, then with a pool of burstPoolMin that does not grow, then with the
// same pool allowed to grow to burstSize (it has seen the previous burst).
func (s *Suite) measurePoolBurst(ctx context.Context) ([]Burst, []Figure) {
	fail := func(err error) ([]Burst, []Figure) {
		return []Burst{{ID: "pool-burst", Title: "creates against a pool", Concurrency: burstSize, FirstError: err.Error()}}, nil
	}
	if _, err := s.c.BuildTemplate(ctx, api.TemplateSpec{Name: burstTemplate, Image: "busybox", Runtime: api.RuntimeRunc}, "", nil); err != nil {
		return fail(fmt.Errorf("build template: %w", err))
	}
	defer func() {
		dctx := context.WithoutCancel(ctx)
		if err := s.c.DeletePool(dctx, burstTemplate); err != nil && !errors.Is(err, paddock.ErrNotFound) {
			s.log.Error("delete pool", "err", err)
		}
		if err := s.c.DeleteTemplate(dctx, burstTemplate); err != nil && !errors.Is(err, paddock.ErrNotFound) {
			s.log.Error("delete template", "err", err)
		}
	}()
	req := api.CreateSandboxRequest{Template: burstTemplate, Labels: map[string]string{runLabel: s.label}}
	var bursts []Burst
	var figs []Figure

	// No pool.
	seqCold, err := s.sequentialCreates(ctx, req, nil)
	if err != nil {
		return fail(fmt.Errorf("sequential cold creates: %w", err))
	}
	other := &otherCaller{s: s, req: req}
	b := s.createBurst(ctx, "pool-burst-none", fmt.Sprintf("%d concurrent creates of a template, no pool (busybox, runc)", burstSize), burstSize, req, other.run)
	bursts = append(bursts, b)
	figs = append(figs, burstRatio("pool-burst-none-ratio", "burst p50 / one-at-a-time p50, no pool", b, seqCold), other.figure(b, seqCold))

	// A pool that does not grow.
	if _, err := s.c.SetPool(ctx, burstTemplate, api.SetPoolRequest{Template: burstTemplate, MinReady: burstPoolMin}); err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-fixed-ratio", Name: "pool", Error: err.Error()})
	}
	if _, err := s.waitPool(ctx, burstTemplate, burstPoolMin, 3*time.Minute); err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-fixed-ratio", Name: "pool", Error: err.Error()})
	}
	seqClaim, err := s.sequentialCreates(ctx, req, func(ctx context.Context) error {
		_, err := s.waitPool(ctx, burstTemplate, 1, 2*time.Minute)
		return err
	})
	if err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-fixed-ratio", Name: "pool", Error: err.Error()})
	}
	if _, err := s.waitPool(ctx, burstTemplate, burstPoolMin, 3*time.Minute); err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-fixed-ratio", Name: "pool", Error: err.Error()})
	}
	b = s.poolBurst(ctx, "pool-burst-fixed", fmt.Sprintf("%d concurrent creates against a pool of %d that does not grow", burstSize, burstPoolMin), req)
	bursts = append(bursts, b)
	figs = append(figs, burstRatio("pool-burst-fixed-ratio", fmt.Sprintf("burst p50 / one-at-a-time claim p50, pool of %d", burstPoolMin), b, seqClaim))

	// The same pool, allowed to grow: it remembers the burst above.
	if _, err := s.c.SetPool(ctx, burstTemplate, api.SetPoolRequest{Template: burstTemplate, MinReady: burstPoolMin, MaxReady: burstSize}); err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-grown-ratio", Name: "pool", Error: err.Error()})
	}
	grow := time.Now()
	p, err := s.waitPool(ctx, burstTemplate, burstSize, 5*time.Minute)
	if err != nil {
		return bursts, append(figs, Figure{ID: "pool-burst-grown-ratio", Name: "pool", Error: err.Error()})
	}
	grew := time.Since(grow)
	figs = append(figs, Figure{ID: "pool-burst-grow", Name: fmt.Sprintf("pool growing from %d to %d ready after the burst", burstPoolMin, burstSize),
		Value: float64(burstSize-burstPoolMin) / grew.Seconds(), Unit: "sandboxes/s",
		Note: fmt.Sprintf("%d more ready in %.1f s (target %d), two refills at a time.", burstSize-burstPoolMin, grew.Seconds(), p.Target)})
	b = s.poolBurst(ctx, "pool-burst-grown", fmt.Sprintf("%d concurrent creates against the pool grown to %d (min %d, max %d)", burstSize, p.Ready, burstPoolMin, burstSize), req)
	bursts = append(bursts, b)
	figs = append(figs, burstRatio("pool-burst-grown-ratio", "burst p50 / one-at-a-time claim p50, grown pool", b, seqClaim))
	return bursts, figs
}

// poolBurst is createBurst with the pool's served and cold counts over
// the burst in its title.
func (s *Suite) poolBurst(ctx context.Context, id, title string, req api.CreateSandboxRequest) Burst {
	before, _ := s.c.Pool(ctx, burstTemplate)
	b := s.createBurst(ctx, id, title, burstSize, req, nil)
	if after, _ := s.c.Pool(ctx, burstTemplate); before != nil && after != nil {
		b.Title += fmt.Sprintf(": %d served warm, %d cold", after.Served-before.Served, after.Cold-before.Cold)
	}
	return b
}

// sequentialCreates times burstSequential creates one at a time (each
// removed, untimed, before the next; before, if set, runs untimed first)
// and summarizes them.
func (s *Suite) sequentialCreates(ctx context.Context, req api.CreateSandboxRequest, before func(context.Context) error) (Summary, error) {
	var durs []time.Duration
	for i := 0; i < burstSequential; i++ {
		if before != nil {
			if err := before(ctx); err != nil {
				return Summary{}, err
			}
		}
		var id string
		d, err := Timed(func() error {
			sb, err := s.c.Create(ctx, req)
			if err == nil {
				id = sb.ID
			}
			return err
		})
		if id != "" {
			if derr := s.destroy(ctx, id); derr != nil && err == nil {
				err = derr
			}
		}
		if err != nil {
			return Summary{}, err
		}
		durs = append(durs, d)
	}
	return Summarize(durs, 0), nil
}

// createBurst starts n creates of req at once, times each create call,
// then removes them all, untimed. during, if set, runs beside the burst
// once it has been started, and the burst's end waits for it.
func (s *Suite) createBurst(ctx context.Context, id, title string, n int, req api.CreateSandboxRequest, during func(context.Context)) Burst {
	b := Burst{ID: id, Title: title, Concurrency: n}
	ids := make([]string, n)
	durs := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			durs[i], errs[i] = Timed(func() error {
				sb, err := s.c.Create(cctx, req)
				if err == nil {
					ids[i] = sb.ID
				}
				return err
			})
		}()
	}
	var side sync.WaitGroup
	if during != nil {
		side.Add(1)
		go func() {
			defer side.Done()
			during(ctx)
		}()
	}
	wg.Wait()
	b.WallMs = ms(time.Since(start))
	side.Wait()
	b.Summary, b.FirstError = burstSummary(durs, errs)
	b.Cleanup = s.destroyAll(ctx, ids)
	return b
}

// destroyAll removes the sandboxes of ids ("" skipped) at once and says
// how that went.
func (s *Suite) destroyAll(ctx context.Context, ids []string) string {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	start := time.Now()
	for _, id := range ids {
		if id == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.destroy(ctx, id); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := fmt.Sprintf("all deleted concurrently in %.0f ms, %d delete errors", ms(time.Since(start)), len(errs))
	if len(errs) > 0 {
		out += ": " + errs[0].Error()
	}
	return out
}

// burstRatio is a burst's p50 beside the sequential p50 of the same
// creates.
func burstRatio(id, name string, b Burst, seq Summary) Figure {
	f := Figure{ID: id, Name: name, Value: b.Summary.P50ms, Unit: "ms",
		Baseline: fmt.Sprintf("one at a time, p50 of %d", seq.N), BaseVal: seq.P50ms,
		Note: fmt.Sprintf("burst p99 %.0f ms, %d errors; one at a time p99 %.0f ms.", b.Summary.P99ms, b.Summary.Errors, seq.P99ms)}
	if seq.P50ms > 0 {
		f.Ratio = b.Summary.P50ms / seq.P50ms
	}
	if b.FirstError != "" {
		f.Error = b.FirstError
	}
	return f
}

// poolBurstTargets judges the bursts against a pool by the goal:
// p50 at most PoolBurstRatioGoal times the one-at-a-time claim p50, and
// no errors.
func poolBurstTargets(r *Report) []Target {
	var out []Target
	for _, x := range []struct{ id, name string }{
		{"pool-burst-fixed-ratio", fmt.Sprintf("%d-create burst against a pool of %d", burstSize, burstPoolMin)},
		{"pool-burst-grown-ratio", fmt.Sprintf("%d-create burst against a pool that grew after the first", burstSize)},
	} {
		t := Target{Name: x.name, Goal: fmt.Sprintf("p50 <= %.1fx one-at-a-time claims, 0 errors", PoolBurstRatioGoal), Status: NotMeasured}
		for _, f := range r.Figures {
			if f.ID != x.id {
				continue
			}
			if f.Ratio == 0 {
				t.Detail = "could not measure: " + cell(f.Error)
				break
			}
			t.Status = Met
			if f.Ratio > PoolBurstRatioGoal || f.Error != "" {
				t.Status = Missed
			}
			t.Detail = fmt.Sprintf("p50 %.0f ms against %.1f ms one at a time (%.1fx); %s", f.Value, f.BaseVal, f.Ratio, f.Note)
		}
		out = append(out, t)
	}
	return out
}

// otherCallerCreates is how many creates the second caller makes, one
// after another, during the burst.
const otherCallerCreates = 3

// otherCaller times a second caller's creates while the socket's caller
// has a burst in flight: an API key of its own, over the daemon's TCP
// listener.
type otherCaller struct {
	s    *Suite
	req  api.CreateSandboxRequest
	durs []time.Duration
	err  error
}

// run makes the key, waits for the burst to be under way, then times
// otherCallerCreates creates one after another (each removed, untimed).
func (o *otherCaller) run(ctx context.Context) {
	if o.s.o.URL == "" {
		o.err = errors.New("the daemon has no TCP listener known to the bench (-url), so there is no second caller")
		return
	}
	key, err := o.s.c.CreateKey(ctx, "bench-other-caller")
	if err != nil {
		o.err = fmt.Errorf("make a key: %w", err)
		return
	}
	defer func() {
		if err := o.s.c.DeleteKey(context.WithoutCancel(ctx), key.ID); err != nil {
			o.s.log.Error("delete the second caller's key", "err", err)
		}
	}()
	c := &paddock.Client{URL: o.s.o.URL, APIKey: key.Secret}
	time.Sleep(300 * time.Millisecond) // the burst's creates are all in by then
	for range otherCallerCreates {
		var id string
		d, err := Timed(func() error {
			sb, err := c.Create(ctx, o.req)
			if err == nil {
				id = sb.ID
			}
			return err
		})
		if id != "" {
			_ = o.s.destroy(ctx, id)
		}
		if err != nil {
			o.err = err
			return
		}
		o.durs = append(o.durs, d)
	}
}

// figure is the second caller's p50 beside a lone create's.
func (o *otherCaller) figure(b Burst, seq Summary) Figure {
	f := Figure{ID: "pool-burst-other-caller", Name: fmt.Sprintf("another caller's create while one caller's %d are in flight (no pool)", burstSize),
		Unit: "ms", Baseline: fmt.Sprintf("a lone create, p50 of %d", seq.N), BaseVal: seq.P50ms}
	if o.err != nil {
		f.Error = o.err.Error()
		return f
	}
	sum := Summarize(o.durs, 0)
	f.Value = sum.P50ms
	if seq.P50ms > 0 {
		f.Ratio = sum.P50ms / seq.P50ms
	}
	f.Note = fmt.Sprintf("%d creates by a second API key, one after another, from 0.3 s into the burst (whose own p50 was %.0f ms); slowest %.0f ms.", len(o.durs), b.Summary.P50ms, sum.P99ms)
	return f
}
