package bench

import (
	"fmt"
)

// Goals from the issue that asked for these figures.
const (
	// DoRatioGoal: p50 of `paddock do` at most this multiple of `runc run`.
	DoRatioGoal = 1.5
	// ExecRatioGoal: p50 of an API exec at most this fraction of `runc exec`.
	ExecRatioGoal = 0.1
	// IdleGoalKiB: host memory of one idle sandbox.
	IdleGoalKiB = 10 * 1024
)

// Targets checks a report's figures against the goals. A figure that was
// not measured is reported as such, never as met.
func Targets(r *Report) []Target {
	var out []Target
	for _, id := range []string{"do-busybox", "do-base"} {
		out = append(out, ratioTarget(r, id, "runc run",
			fmt.Sprintf("`paddock do` p50 (%s)", id[len("do-"):]),
			fmt.Sprintf("p50 <= %.1fx runc run", DoRatioGoal), DoRatioGoal))
	}
	out = append(out, ratioTarget(r, "exec", "runc exec", "Exec round trip p50",
		fmt.Sprintf("p50 <= %.1fx (1/10) of runc exec", ExecRatioGoal), ExecRatioGoal))

	burst := Target{Name: "Concurrent creates", Goal: "0 errors", Status: NotMeasured}
	for _, b := range r.Bursts {
		if b.ID != "burst-paddock" {
			continue
		}
		burst.Status = Met
		if b.Summary.Errors > 0 || b.Summary.N == 0 {
			burst.Status = Missed
		}
		burst.Detail = fmt.Sprintf("%d of %d creates failed; p50 %.0f ms, p99 %.0f ms.",
			b.Summary.Errors, b.Concurrency, b.Summary.P50ms, b.Summary.P99ms)
		if b.FirstError != "" {
			burst.Detail += " First error: " + cell(b.FirstError)
		}
	}
	out = append(out, burst)

	for _, rt := range []string{"runc", "gvisor"} {
		t := Target{Name: "Idle sandbox memory (" + rt + ")", Goal: "<= 10 MiB RSS", Status: NotMeasured}
		for _, x := range r.Idle {
			if x.Runtime != rt {
				continue
			}
			if x.Error != "" {
				t.Detail = "Could not measure: " + cell(x.Error)
				continue
			}
			t.Status = Met
			if x.RSSKiB > IdleGoalKiB {
				t.Status = Missed
			}
			t.Detail = fmt.Sprintf("%.1f MiB RSS (%.1f MiB PSS), median of %d sandboxes.",
				float64(x.RSSKiB)/1024, float64(x.PSSKiB)/1024, x.Samples)
		}
		out = append(out, t)
	}
	out = append(out, featureTargets(r)...)
	out = append(out, poolBurstTargets(r)...)
	out = append(out, workspaceTargets(r)...)
	return append(out, memoryTargets(r)...)
}

func ratioTarget(r *Report, id, baseline, name, goal string, limit float64) Target {
	t := Target{Name: name, Goal: goal, Status: NotMeasured}
	c := r.Comparison(id)
	if c == nil {
		return t
	}
	if len(c.Series) > 0 && c.Series[0].Summary.N == 0 {
		t.Detail = fmt.Sprintf("%s produced no samples: %s", c.Series[0].Name,
			cell(firstNonEmpty(c.Series[0].Disabled, c.Series[0].FirstError)))
		return t
	}
	for _, rr := range c.Ratios {
		if rr.To != baseline {
			continue
		}
		t.Status = Met
		if rr.P50 > limit {
			t.Status = Missed
		}
		var p, b Summary
		for _, s := range c.Series {
			switch s.Name {
			case rr.Of:
				p = s.Summary
			case rr.To:
				b = s.Summary
			}
		}
		t.Detail = fmt.Sprintf("%s p50 %.1f ms vs %s p50 %.1f ms: %.2fx.", rr.Of, p.P50ms, rr.To, b.P50ms, rr.P50)
		return t
	}
	t.Detail = "no " + baseline + " figure to compare with"
	return t
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
