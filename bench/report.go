package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Comparison is one measured operation: Paddock's way first, then its
// baselines, all from the same interleaved run.
type Comparison struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Note   string   `json:"note,omitempty"`
	Series []Series `json:"series"`
	// Ratios compare the first series to each other one (>1: Paddock slower).
	Ratios []RatioRow `json:"ratios"`
}

// RatioRow is Paddock's figure divided by one baseline's.
type RatioRow struct {
	Of  string  `json:"of"`
	To  string  `json:"to"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// NewComparison builds a Comparison and its ratios from interleaved series
// whose first element is Paddock's.
func NewComparison(id, title, note string, series []Series) Comparison {
	c := Comparison{ID: id, Title: title, Note: note, Series: series}
	if len(series) == 0 {
		return c
	}
	p := series[0].Summary
	for _, s := range series[1:] {
		if p.N == 0 || s.Summary.N == 0 {
			continue
		}
		c.Ratios = append(c.Ratios, RatioRow{
			Of: series[0].Name, To: s.Name,
			P50: Ratio(p.P50ms, s.Summary.P50ms),
			P99: Ratio(p.P99ms, s.Summary.P99ms),
		})
	}
	return c
}

// Burst is a number of operations started at once.
type Burst struct {
	ID          string  `json:"id"`
	Title       string  `json:"title"`
	Concurrency int     `json:"concurrency"`
	Summary     Summary `json:"summary"`
	WallMs      float64 `json:"wall_ms"`
	FirstError  string  `json:"first_error,omitempty"`
	// Cleanup is how the created things were removed, and how that went.
	Cleanup string `json:"cleanup,omitempty"`
}

// Idle is the host memory one idle sandbox costs.
type Idle struct {
	Runtime string `json:"runtime"`
	Image   string `json:"image"`
	// Samples is how many sandboxes were measured; figures are medians.
	Samples int       `json:"samples"`
	RSSKiB  int64     `json:"rss_kib"`
	PSSKiB  int64     `json:"pss_kib"`
	Procs   []ProcMem `json:"procs,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Target is one goal from the issue, checked against the figures.
type Target struct {
	Name   string `json:"name"`
	Goal   string `json:"goal"`
	Status string `json:"status"` // "met", "missed", "not measured"
	Detail string `json:"detail"`
}

// Target statuses.
const (
	Met         = "met"
	Missed      = "missed"
	NotMeasured = "not measured"
)

// Report is one run's results.
type Report struct {
	Description string       `json:"description"`
	Machine     Machine      `json:"machine"`
	Iterations  int          `json:"iterations"`
	Warmup      int          `json:"warmup"`
	DurationS   float64      `json:"duration_s"`
	Comparisons []Comparison `json:"comparisons"`
	Bursts      []Burst      `json:"bursts"`
	Idle        []Idle       `json:"idle"`
	// DaemonRSSKiB is the daemon's own resident memory, a per-host cost.
	DaemonRSSKiB int64 `json:"daemon_rss_kib,omitempty"`
	// Figures are measurements that are not latency series (sizes, rates).
	Figures []Figure `json:"figures,omitempty"`
	Targets []Target `json:"targets"`
	Notes   []string `json:"notes,omitempty"`
}

// Comparison returns the comparison with id, or nil.
func (r *Report) Comparison(id string) *Comparison {
	for i := range r.Comparisons {
		if r.Comparisons[i].ID == id {
			return &r.Comparisons[i]
		}
	}
	return nil
}

var slugRe = regexp.MustCompile(`[^a-z0-9]+`)

// Slug turns a description into a file-name-safe short form.
func Slug(s string) string {
	s = strings.Trim(slugRe.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 48 {
		s = strings.TrimRight(s[:48], "-")
	}
	if s == "" {
		s = "run"
	}
	return s
}

// Write stores the report as <dir>/<date>-<slug>.md and .json and returns
// the Markdown file's path.
func (r *Report) Write(dir string, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(dir, now.Format("2006-01-02")+"-"+Slug(r.Description))
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	f, err := os.Create(base + ".md")
	if err != nil {
		return "", err
	}
	if err := r.Markdown(f); err != nil {
		f.Close()
		return "", err
	}
	return base + ".md", f.Close()
}

// Markdown renders the report for people.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# Paddock benchmark: %s\n\n", r.Description)
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	for _, kv := range [][2]string{
		{"CPU", m.CPU}, {"Cores", fmt.Sprint(m.Cores)}, {"Memory", fmt.Sprintf("%d MiB", m.MemoryMiB)},
		{"Kernel", m.Kernel}, {"cgroup", m.Cgroup}, {"runc", m.Runc}, {"runsc", m.Runsc},
		{"podman", m.Podman}, {"Go", m.Go}, {"Commit measured", m.Commit},
		{"Paddock version", m.Paddock}, {"Recorded at", m.RecordedAt},
	} {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], cell(kv[1]))
	}
	fmt.Fprintf(&b, "\nIterations: %d recorded per variant after %d warm-up rounds, interleaved "+
		"(the variants take turns, rotating which goes first). Whole run: %.0f s.\n",
		r.Iterations, r.Warmup, r.DurationS)

	b.WriteString("\n## Targets\n\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "- **%s**: %s (goal: %s). %s\n", t.Name, strings.ToUpper(t.Status), t.Goal, t.Detail)
	}
	r.featureSummary(&b)

	for _, c := range r.Comparisons {
		fmt.Fprintf(&b, "\n## %s\n\n", c.Title)
		if c.Note != "" {
			fmt.Fprintf(&b, "%s\n\n", c.Note)
		}
		b.WriteString("| variant | n | errors | p50 ms | p99 ms | mean ms | min ms | max ms |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range c.Series {
			x := s.Summary
			fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
				s.Name, x.N, x.Errors, x.P50ms, x.P99ms, x.MeanMs, x.MinMs, x.MaxMs)
		}
		for _, rr := range c.Ratios {
			fmt.Fprintf(&b, "\nRatio %s / %s: p50 %.2fx, p99 %.2fx\n", rr.Of, rr.To, rr.P50, rr.P99)
		}
		for _, s := range c.Series {
			if s.Disabled != "" {
				fmt.Fprintf(&b, "\n%s was not measured: %s\n", s.Name, cell(s.Disabled))
			} else if s.FirstError != "" {
				fmt.Fprintf(&b, "\n%s first error: %s\n", s.Name, cell(s.FirstError))
			}
		}
	}

	if len(r.Bursts) > 0 {
		b.WriteString("\n## Concurrent creates\n\n")
		b.WriteString("| burst | concurrency | ok | errors | p50 ms | p99 ms | wall ms |\n|---|---|---|---|---|---|---|\n")
		for _, x := range r.Bursts {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %.2f | %.2f | %.0f |\n",
				x.Title, x.Concurrency, x.Summary.N, x.Summary.Errors, x.Summary.P50ms, x.Summary.P99ms, x.WallMs)
		}
		for _, x := range r.Bursts {
			if x.FirstError != "" {
				fmt.Fprintf(&b, "\n%s first error: %s\n", x.Title, cell(x.FirstError))
			}
			if x.Cleanup != "" {
				fmt.Fprintf(&b, "\n%s cleanup: %s\n", x.Title, cell(x.Cleanup))
			}
		}
	}

	if len(r.Idle) > 0 {
		b.WriteString("\n## Idle sandbox overhead (host memory per sandbox)\n\n")
		b.WriteString("| runtime | image | sandboxes | RSS MiB | PSS MiB | processes |\n|---|---|---|---|---|---|\n")
		for _, x := range r.Idle {
			if x.Error != "" {
				fmt.Fprintf(&b, "| %s | %s | - | - | - | not measured: %s |\n", x.Runtime, x.Image, cell(x.Error))
				continue
			}
			var names []string
			for _, p := range x.Procs {
				names = append(names, fmt.Sprintf("%s %.1f", p.Comm, float64(p.RSSKiB)/1024))
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %s |\n", x.Runtime, x.Image, x.Samples,
				float64(x.RSSKiB)/1024, float64(x.PSSKiB)/1024, cell(strings.Join(names, ", ")))
		}
		if r.DaemonRSSKiB > 0 {
			fmt.Fprintf(&b, "\nThe daemon itself (shared by all sandboxes, not counted above): %.1f MiB RSS.\n", float64(r.DaemonRSSKiB)/1024)
		}
	}

	if len(r.Figures) > 0 {
		b.WriteString("\n## Other figures (sizes, rates, throughput)\n\n")
		b.WriteString("| figure | value | baseline | baseline value | ratio | note |\n|---|---|---|---|---|---|\n")
		for _, f := range r.Figures {
			if f.Error != "" {
				fmt.Fprintf(&b, "| %s | not measured | %s | - | - | %s |\n", f.Name, f.Baseline, cell(f.Error))
				continue
			}
			base, ratio := "-", "-"
			if f.BaseVal > 0 {
				base = fmt.Sprintf("%.2f %s", f.BaseVal, f.Unit)
			}
			if f.Ratio > 0 {
				ratio = fmt.Sprintf("%.2fx", f.Ratio)
			}
			fmt.Fprintf(&b, "| %s | %.2f %s | %s | %s | %s | %s |\n", f.Name, f.Value, f.Unit, f.Baseline, base, ratio, cell(f.Note))
		}
	}

	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell makes s safe inside a Markdown table cell or line.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	return truncate(s, 400)
}
