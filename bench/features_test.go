package bench

import (
	"strings"
	"testing"
	"time"
)

func TestFeatureTargets(t *testing.T) {
	claim := func(p50 ...float64) *Report {
		var d []time.Duration
		for _, x := range p50 {
			d = append(d, time.Duration(x*float64(time.Millisecond)))
		}
		return &Report{Comparisons: []Comparison{NewComparison("pool-first-exec", "claim", "", []Series{
			{Name: "pool claim (create call)", Summary: Summarize(d, 0)},
			{Name: "cold create (create call)", Summary: Summarize(ds(80, 80), 0)},
		})}}
	}
	tests := []struct {
		name string
		r    *Report
		want string
	}{
		{"fast claim", claim(1, 2, 3), Met},
		{"slow claim", claim(6, 7, 8), Missed},
		{"no samples", claim(), NotMeasured},
		{"not run", &Report{}, NotMeasured},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := featureTargets(tt.r)
			if len(got) != 1 || got[0].Status != tt.want {
				t.Fatalf("got %+v, want status %q", got, tt.want)
			}
		})
	}
}

func TestCallSeriesKeepsRecordedRounds(t *testing.T) {
	calls := ds(100, 1, 2, 3) // the first is a warm-up round's
	s := callSeries("x", calls, 3)
	if s.Summary.N != 3 || s.Summary.MaxMs != 3 {
		t.Fatalf("got %+v, want the last three samples", s.Summary)
	}
	if s := callSeries("x", ds(1), 5); s.Summary.N != 1 {
		t.Fatalf("fewer calls than rounds: got n=%d, want 1", s.Summary.N)
	}
}

func TestMibps(t *testing.T) {
	tests := []struct {
		bytes int64
		ms    float64
		want  float64
	}{
		{64 << 20, 1000, 64},
		{64 << 20, 500, 128},
		{64 << 20, 0, 0},
	}
	for _, tt := range tests {
		if got := mibps(tt.bytes, tt.ms); got != tt.want {
			t.Errorf("mibps(%d, %v) = %v, want %v", tt.bytes, tt.ms, got, tt.want)
		}
	}
}

func TestFeatureMarkdown(t *testing.T) {
	r := &Report{
		Description: "features",
		Comparisons: []Comparison{NewComparison("session-exec", "Session", "", []Series{
			{Name: "exec in session (SDK)", Summary: Summarize(ds(4, 4), 0)},
			{Name: "plain exec (SDK)", Summary: Summarize(ds(2, 2), 0)},
		})},
		Figures: []Figure{
			{Name: "Pool refill rate", Value: 10, Unit: "sandboxes/s", Baseline: "cold", BaseVal: 5, Ratio: 2},
			{Name: "Preview throughput", Unit: "MiB/s", Error: "expose | failed"},
		},
	}
	var b strings.Builder
	if err := r.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Feature figures at a glance",
		"| session-exec | exec in session (SDK) | 4.00 / 4.00 | plain exec (SDK) | 2.00 / 2.00 | 2.00x / 2.00x | none set",
		"| Pool refill rate | 10.00 sandboxes/s | cold | 5.00 sandboxes/s | 2.00x |",
		`| Preview throughput | not measured |  | - | - | expose \| failed |`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
