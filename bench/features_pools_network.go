package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// benchTemplate is the template the pool item builds: busybox, no steps,
// so a claim and a cold create differ only in where the sandbox came from.
const benchTemplate = "paddock-bench-pool"

// poolSize is the pool's min_ready, also the number drained for the
// refill figure.
const poolSize = 4

// waitPool polls the pool until at least ready sandboxes are ready.
func (s *Suite) waitPool(ctx context.Context, name string, ready int, timeout time.Duration) (*api.Pool, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := s.c.Pool(ctx, name)
		if err != nil {
			return nil, err
		}
		if p.Error != "" {
			return p, fmt.Errorf("pool %s: %s", name, p.Error)
		}
		if p.Ready >= ready {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("pool %s: %d ready after %s, want %d", name, p.Ready, timeout, ready)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// measurePool compares a pool claim with a cold create of the same
// template, each to its first exec, and measures the refill rate.
func (s *Suite) measurePool(ctx context.Context) ([]Comparison, []Figure) {
	const id, title = "pool-first-exec", "Pool claim to first exec vs cold create of the same template (busybox, runc)"
	const cid, ctitle = "pool-claim", "Pool claim vs cold create: the create call alone (busybox, runc)"
	names := []string{"pool claim + exec", "cold create + exec"}
	cnames := []string{"pool claim (create call)", "cold create (create call)"}
	fail := func(err error) ([]Comparison, []Figure) {
		return []Comparison{failedComparison(id, title, err, names...), failedComparison(cid, ctitle, err, cnames...)},
			[]Figure{{ID: "pool-refill", Name: "Pool refill rate", Unit: "sandboxes/s", Error: err.Error()}}
	}
	if _, err := s.c.BuildTemplate(ctx, api.TemplateSpec{Name: benchTemplate, Image: "busybox", Runtime: api.RuntimeRunc}, "", nil); err != nil {
		return fail(fmt.Errorf("build template: %w", err))
	}
	defer func() {
		dctx := context.WithoutCancel(ctx)
		if err := s.c.DeletePool(dctx, benchTemplate); err != nil && !errors.Is(err, paddock.ErrNotFound) {
			s.log.Error("delete pool", "err", err)
		}
		if err := s.c.DeleteTemplate(dctx, benchTemplate); err != nil && !errors.Is(err, paddock.ErrNotFound) {
			s.log.Error("delete template", "err", err)
		}
	}()
	if _, err := s.c.SetPool(ctx, benchTemplate, api.SetPoolRequest{Template: benchTemplate, MinReady: poolSize}); err != nil {
		return fail(fmt.Errorf("set pool: %w", err))
	}
	if _, err := s.waitPool(ctx, benchTemplate, poolSize, 3*time.Minute); err != nil {
		return fail(err)
	}
	before, _ := s.c.Pool(ctx, benchTemplate)
	var claimCalls, coldCalls []time.Duration
	var mu sync.Mutex
	// toFirstExec times create then exec, keeps the create call's time
	// aside, and removes the sandbox untimed.
	toFirstExec := func(ctx context.Context, req api.CreateSandboxRequest, calls *[]time.Duration) (time.Duration, error) {
		var sbID string
		var call time.Duration
		d, err := Timed(func() error {
			t := time.Now()
			sb, err := s.c.Create(ctx, req)
			call = time.Since(t)
			if err != nil {
				return err
			}
			sbID = sb.ID
			return s.execTrue(ctx, sb.ID)
		})
		if sbID != "" {
			if derr := s.destroy(ctx, sbID); derr != nil && err == nil {
				err = fmt.Errorf("destroy: %w", derr)
			}
		}
		if err == nil {
			mu.Lock()
			*calls = append(*calls, call)
			mu.Unlock()
		}
		return d, err
	}
	labels := map[string]string{runLabel: s.label}
	series := s.interleaveN(ctx, ItemPool, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			// Claims are measured against a pool that has a sandbox ready;
			// waiting for the refill is not part of a claim.
			if _, err := s.waitPool(ctx, benchTemplate, 1, 2*time.Minute); err != nil {
				return 0, err
			}
			return toFirstExec(ctx, api.CreateSandboxRequest{Pool: benchTemplate, Labels: labels}, &claimCalls)
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			// Naming a runtime makes the daemon create cold, on the same template.
			return toFirstExec(ctx, api.CreateSandboxRequest{Template: benchTemplate, Runtime: api.RuntimeRunc, KeepAlive: true, Labels: labels}, &coldCalls)
		}},
	})
	after, _ := s.c.Pool(ctx, benchTemplate)
	note := "Both create from the same template (busybox, no steps) and run `true`; removal is not timed. The claim names the pool; the cold create names the template and a runtime, which the daemon never serves from a pool. "
	if before != nil && after != nil {
		note += fmt.Sprintf("Pool counters over the measurement (warm-up included): %d served, %d cold.", after.Served-before.Served, after.Cold-before.Cold)
	}
	cs := []Comparison{NewComparison(id, title, note, series)}
	// Warm-up rounds are not recorded by Interleave but their calls were
	// kept here; drop them so both sides cover the recorded rounds only.
	cs = append(cs, NewComparison(cid, ctitle, "The create call of each recorded round above (warm-up rounds dropped), without the exec.", []Series{
		callSeries(cnames[0], claimCalls, series[0].Summary.N), callSeries(cnames[1], coldCalls, series[1].Summary.N),
	}))
	return cs, []Figure{s.poolRefill(ctx, labels)}
}

// callSeries summarizes the last n of calls.
func callSeries(name string, calls []time.Duration, n int) Series {
	if n < len(calls) {
		calls = calls[len(calls)-n:]
	}
	x := Series{Name: name, Samples: calls, Summary: Summarize(calls, 0)}
	for _, d := range calls {
		x.SamplesMs = append(x.SamplesMs, ms(d))
	}
	return x
}

// poolRefill drains a full pool at once and times its return to full.
func (s *Suite) poolRefill(ctx context.Context, labels map[string]string) Figure {
	f := Figure{ID: "pool-refill", Name: fmt.Sprintf("Pool refill rate after draining %d", poolSize), Unit: "sandboxes/s",
		Baseline: "cold creates, one after the other"}
	if _, err := s.waitPool(ctx, benchTemplate, poolSize, 3*time.Minute); err != nil {
		f.Error = err.Error()
		return f
	}
	ids := make([]string, poolSize)
	errs := make([]error, poolSize)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := s.c.Create(ctx, api.CreateSandboxRequest{Pool: benchTemplate, Labels: labels})
			if err == nil {
				ids[i] = sb.ID
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	start := time.Now()
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = s.destroy(ctx, id)
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		f.Error = "drain: " + err.Error()
		return f
	}
	if _, err := s.waitPool(ctx, benchTemplate, poolSize, 3*time.Minute); err != nil {
		f.Error = err.Error()
		return f
	}
	el := time.Since(start)
	f.Value = float64(int(float64(poolSize)/el.Seconds()*100)) / 100
	// The baseline: the same number of cold creates of the template, in a row.
	cstart := time.Now()
	var cold []string
	for i := 0; i < poolSize; i++ {
		sb, err := s.c.Create(ctx, api.CreateSandboxRequest{Template: benchTemplate, Runtime: api.RuntimeRunc, KeepAlive: true, Labels: labels})
		if err != nil {
			f.Note = "cold baseline failed: " + err.Error()
			break
		}
		cold = append(cold, sb.ID)
	}
	if len(cold) == poolSize {
		f.BaseVal = float64(int(float64(poolSize)/time.Since(cstart).Seconds()*100)) / 100
		f.Ratio = Ratio(f.Value, f.BaseVal)
	}
	for _, id := range cold {
		_ = s.destroy(ctx, id)
	}
	f.Note += fmt.Sprintf("%d claimed at once, pool full again %.0f ms later (the pool starts at most two at a time).", poolSize, ms(el))
	return f
}

// measureNetwork compares create to first exec with egress networking
// against the default (loopback only).
func (s *Suite) measureNetwork(ctx context.Context) Comparison {
	const id, title = "network-create", "Create to first exec with egress networking vs without (busybox, runc)"
	names := []string{"create --network egress + exec", "create (no network) + exec"}
	series := s.interleaveN(ctx, ItemNetwork, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExec(ctx, api.CreateSandboxRequest{Image: "busybox", Network: &api.NetworkPolicy{Mode: "egress", AllowHosts: []string{"example.com"}}})
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return s.createFirstExec(ctx, api.CreateSandboxRequest{Image: "busybox"})
		}},
	})
	note := "Egress adds a network namespace, a veth pair, firewall rules and the sandbox's listeners on the egress proxy and DNS resolver; removal is not timed."
	return NewComparison(id, title, note, series)
}

// createFirstExec creates a labelled runc sandbox from req, runs `true`,
// and removes it untimed.
func (s *Suite) createFirstExec(ctx context.Context, req api.CreateSandboxRequest) (time.Duration, error) {
	return s.createFirstExecOn(ctx, api.RuntimeRunc, req)
}

// hostCopy writes size random bytes to a file in dir once, then times
// copying it to a new file with fsync: the floor for persisting that many
// changed bytes on this disk.
func hostCopy(ctx context.Context, dir string, size int64) (func(ctx context.Context) (time.Duration, error), error) {
	src := filepath.Join(dir, fmt.Sprintf("src-%d", size))
	f, err := os.Create(src)
	if err != nil {
		return nil, err
	}
	_, err = io.CopyN(f, rand.Reader, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(dir, fmt.Sprintf("dst-%d", size))
	return func(ctx context.Context) (time.Duration, error) {
		defer os.Remove(dst)
		return Timed(func() error {
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.Create(dst)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			if err := out.Sync(); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		})
	}, ctx.Err()
}
