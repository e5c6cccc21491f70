// Package bench measures Paddock against the raw runtimes it is built on
// (runc run, runc exec, podman run) in the same run, interleaving every
// variant so that a noisy machine slows all of them alike and the ratios
// between them stay meaningful. The paddock-bench command drives it and
// writes the results under bench/results/.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"
)

// Summary condenses one series of samples. Percentiles use the nearest-rank
// method, so with 30 samples p99 is the slowest one: it is a real sample,
// never an interpolation between two.
type Summary struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// samples, which need not be sorted. It returns 0 for no samples.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 || p <= 0 || math.IsNaN(p) {
		return 0
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if p >= 100 {
		return s[len(s)-1]
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// Summarize computes a Summary of samples; errors is carried through.
func Summarize(samples []time.Duration, errors int) Summary {
	sum := Summary{N: len(samples), Errors: errors}
	if len(samples) == 0 {
		return sum
	}
	var total time.Duration
	lo, hi := samples[0], samples[0]
	for _, d := range samples {
		total += d
		lo = min(lo, d)
		hi = max(hi, d)
	}
	sum.P50ms = ms(Percentile(samples, 50))
	sum.P99ms = ms(Percentile(samples, 99))
	sum.MeanMs = ms(total / time.Duration(len(samples)))
	sum.MinMs = ms(lo)
	sum.MaxMs = ms(hi)
	return sum
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// Ratio divides a by b, or returns 0 when b is 0 (nothing to compare to).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}

// Variant is one way of doing the measured thing. Run does it once and
// returns how long the measured part took, so that set-up and tear-down
// around it (deleting a container, say) stay out of the figure.
type Variant struct {
	Name string
	Run  func(ctx context.Context) (time.Duration, error)
}

// Series is what one variant produced over a whole interleaved run.
type Series struct {
	Name    string          `json:"name"`
	Summary Summary         `json:"summary"`
	Samples []time.Duration `json:"-"`
	// SamplesMs are the recorded samples in run order, for later analysis.
	SamplesMs []float64 `json:"samples_ms,omitempty"`
	// FirstError is the first failure's message, kept so a failing
	// baseline is recorded honestly rather than silently dropped.
	FirstError string `json:"first_error,omitempty"`
	// Disabled says why the variant stopped being run, if it did.
	Disabled string `json:"disabled,omitempty"`
}

// giveUpAfter consecutive failures from the start disable a variant: a tool
// that cannot run here would otherwise cost its timeout n times.
const giveUpAfter = 3

// InterleaveOptions tunes Interleave.
type InterleaveOptions struct {
	// Iterations is the number of recorded rounds (each variant once).
	Iterations int
	// Warmup rounds run first and are not recorded.
	Warmup int
	// Timeout bounds one call of a variant; default one minute.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Interleave runs every variant once per round, rotating which goes first
// each round (A B C, B C A, ...), so that slow drift of the machine and any
// warm-cache advantage of going second are spread over all variants.
func Interleave(ctx context.Context, opts InterleaveOptions, variants []Variant) []Series {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	out := make([]Series, len(variants))
	fails := make([]int, len(variants))
	succeeded := make([]bool, len(variants))
	for i, v := range variants {
		out[i].Name = v.Name
	}
	rounds := opts.Warmup + opts.Iterations
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		record := r >= opts.Warmup
		for k := range variants {
			i := (r + k) % len(variants)
			if out[i].Disabled != "" {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			d, err := variants[i].Run(cctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return finish(out, fails)
				}
				fails[i]++
				if out[i].FirstError == "" {
					out[i].FirstError = err.Error()
				}
				log.Warn("variant failed", "variant", variants[i].Name, "round", r, "err", err)
				if !succeeded[i] && fails[i] >= giveUpAfter {
					out[i].Disabled = fmt.Sprintf("failed %d times in a row from the start: %v", fails[i], err)
				}
				continue
			}
			succeeded[i] = true
			if record {
				out[i].Samples = append(out[i].Samples, d)
			}
		}
	}
	return finish(out, fails)
}

func finish(out []Series, fails []int) []Series {
	for i := range out {
		out[i].Summary = Summarize(out[i].Samples, fails[i])
		for _, d := range out[i].Samples {
			out[i].SamplesMs = append(out[i].SamplesMs, ms(d))
		}
	}
	return out
}

// Timed runs f and returns how long it took.
func Timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}
