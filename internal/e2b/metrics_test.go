package e2b

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

func TestSamplerWindow(t *testing.T) {
	s := newSampler()
	sb := &api.Sandbox{Resources: api.Resources{CPU: 2, MemoryMB: 512}}
	t0 := time.Unix(1_800_000_000, 0)
	if out, ok := s.window("a", 0, t0.Unix()+1000); ok || len(out) != 0 {
		t.Fatalf("unknown sandbox: %v %v", out, ok)
	}
	// One CPU-second over 5 s on 2 CPUs is 10%.
	for i := range metricsKeep + 3 {
		s.record("a", runtime.Usage{CPUNanos: uint64(i) * uint64(time.Second), MemoryBytes: 1}, sb, t0.Add(time.Duration(i)*metricsInterval))
	}
	all, ok := s.window("a", 0, t0.Unix()+1_000_000)
	if !ok || len(all) != metricsKeep {
		t.Fatalf("kept %d samples, want %d", len(all), metricsKeep)
	}
	if all[0].CPUUsedPct != 10 || all[0].CPUCount != 2 || all[0].MemTotal != 512<<20 {
		t.Fatalf("sample: %+v", all[0])
	}
	last := all[len(all)-1].TimestampUnix
	got, _ := s.window("a", last-10, last)
	if len(got) != 3 || got[2].TimestampUnix != last {
		t.Fatalf("last 10 s: %d samples", len(got))
	}
	if got, ok := s.window("a", 0, t0.Unix()); !ok || len(got) != 0 {
		t.Fatalf("a window before the kept samples: %d samples, ok %v", len(got), ok)
	}
	s.keepOnly(map[string]bool{})
	if _, ok := s.window("a", 0, last); ok {
		t.Fatal("a sandbox that is gone still has samples")
	}
}

func TestMetricsRange(t *testing.T) {
	now := time.Unix(2000, 0)
	tests := []struct {
		query      string
		start, end int64
		bad        bool
	}{
		{"", 0, 2000, false},
		{"start=100", 100, 2000, false},
		{"start=100&end=200", 100, 200, false},
		{"end=50", 0, 50, false},
		{"start=300&end=200", 0, 0, true},
		{"start=-1", 0, 0, true},
		{"start=x", 0, 0, true},
		{"step=5", 0, 0, true},
	}
	for _, tc := range tests {
		q, _ := url.ParseQuery(tc.query)
		start, end, err := metricsRange(q, now)
		if tc.bad {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%q: err %v, want invalid", tc.query, err)
			}
			continue
		}
		if err != nil || start != tc.start || end != tc.end {
			t.Errorf("%q: %d %d %v", tc.query, start, end, err)
		}
	}
}

// A first getMetrics samples the sandbox on the spot; that sample is
// taken after the request arrived, here in the next second, and must
// still be in a window whose end was left open.
func TestAnswerSamplesOnTheSpot(t *testing.T) {
	s := newSampler()
	sb := &api.Sandbox{Resources: api.Resources{CPU: 1, MemoryMB: 256}}
	clock := time.Unix(1_800_000_000, 900_000_000)
	now := func() time.Time { return clock }
	sampled := 0
	sample := func() error {
		sampled++
		s.record("a", runtime.Usage{MemoryBytes: 1}, sb, clock)
		clock = clock.Add(cpuWindow)
		s.record("a", runtime.Usage{MemoryBytes: 2}, sb, clock)
		return nil
	}
	out, err := s.answer("a", url.Values{}, now, true, sample)
	if err != nil || len(out) != 1 || out[0].MemUsed != 2 || sampled != 1 {
		t.Fatalf("first answer: %+v %v (sampled %d)", out, err, sampled)
	}
	// A window that ends before the sample keeps its end.
	s = newSampler()
	q, _ := url.ParseQuery("end=1800000000")
	clock = time.Unix(1_800_000_000, 900_000_000)
	if out, err := s.answer("a", q, now, true, sample); err != nil || len(out) != 0 {
		t.Fatalf("closed window: %+v %v", out, err)
	}
	// A sandbox that is not running is not sampled.
	if out, err := newSampler().answer("b", url.Values{}, now, false, func() error { t.Fatal("sampled"); return nil }); err != nil || len(out) != 0 {
		t.Fatalf("stopped sandbox: %+v %v", out, err)
	}
	if _, err := newSampler().answer("b", url.Values{"start": {"x"}}, now, true, sample); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad start: %v", err)
	}
}
