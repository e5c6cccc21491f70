package bench

import (
	"fmt"
	"strings"
)

// PoolClaimGoalMs: p50 of a pool claim's create call, from the pools issue.
const PoolClaimGoalMs = 5.0

// featureComparisonIDs are the feature items' comparisons, in report order.
var featureComparisonIDs = []string{
	"session-exec", "proc-port", "preview-small", "preview-64mib", "context-run",
	"pool-claim", "pool-first-exec", "snapshot-10-mib", "snapshot-100-mib", "snapshot-1-gib",
	"snapshot-second-1-of-100-mib",
	"restore-first-exec", "fork-10", "pause", "resume", "network-create",
	"network-create-gvisor", "hibernate-100-mib", "hibernate-restore-first-exec", "memory-fork-10",
	"memory-restore-python",
}

// featureTargets adds the feature items' goals; only the pool has one in
// its issue ("pool claim to first exec p50 <= 5 ms"), the other figures are
// recorded to follow over time.
func featureTargets(r *Report) []Target {
	t := Target{Name: "Pool claim to first exec p50", Goal: fmt.Sprintf("claim + first exec p50 <= %.0f ms", PoolClaimGoalMs), Status: NotMeasured}
	c := r.Comparison("pool-first-exec")
	if c == nil {
		return []Target{t}
	}
	if len(c.Series) == 0 || c.Series[0].Summary.N == 0 {
		if len(c.Series) > 0 {
			t.Detail = "no claim succeeded: " + cell(firstNonEmpty(c.Series[0].Disabled, c.Series[0].FirstError))
		}
		return []Target{t}
	}
	p := c.Series[0].Summary
	t.Status = Met
	if p.P50ms > PoolClaimGoalMs {
		t.Status = Missed
	}
	t.Detail = fmt.Sprintf("claim to first exec p50 %.2f ms, p99 %.2f ms", p.P50ms, p.P99ms)
	if len(c.Series) > 1 && c.Series[1].Summary.N > 0 {
		t.Detail += fmt.Sprintf(" vs cold create p50 %.2f ms (%.3fx).", c.Series[1].Summary.P50ms, Ratio(p.P50ms, c.Series[1].Summary.P50ms))
	}
	return []Target{t}
}

// featureSummary writes one line per feature figure: its value, its
// baseline, the ratio and its target.
func (r *Report) featureSummary(b *strings.Builder) {
	var rows []string
	for _, id := range featureComparisonIDs {
		c := r.Comparison(id)
		if c == nil || len(c.Series) < 2 {
			continue
		}
		p, base := c.Series[0], c.Series[1]
		target := "none set (recorded to follow over time)"
		if id == "pool-first-exec" {
			target = fmt.Sprintf("p50 <= %.0f ms: ", PoolClaimGoalMs)
			switch {
			case p.Summary.N == 0:
				target += NotMeasured
			case p.Summary.P50ms <= PoolClaimGoalMs:
				target += Met
			default:
				target += Missed
			}
		}
		fig := func(s Series) string {
			if s.Summary.N == 0 {
				return "not measured"
			}
			return fmt.Sprintf("%.2f / %.2f", s.Summary.P50ms, s.Summary.P99ms)
		}
		ratio := "-"
		if len(c.Ratios) > 0 {
			ratio = fmt.Sprintf("%.2fx / %.2fx", c.Ratios[0].P50, c.Ratios[0].P99)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |",
			id, p.Name, fig(p), base.Name, fig(base), ratio, target))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Feature figures at a glance\n\n")
	b.WriteString("p50 / p99 in ms; ratio is the feature's figure over its baseline's (p50 / p99). Details and notes in the sections below.\n\n")
	b.WriteString("| id | figure | p50 / p99 | baseline | p50 / p99 | ratio | target |\n|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		b.WriteString(row + "\n")
	}
}
