package events

import (
	"testing"
	"time"
)

func TestCPUPercent(t *testing.T) {
	var f usageFeed
	t0 := time.Unix(1000, 0)
	if p := f.cpuPercent("a", 5e9, t0); p != nil {
		t.Errorf("first sample: %v; want none", *p)
	}
	// 1.5 CPU-seconds over 10 s is 15% of one CPU.
	if p := f.cpuPercent("a", 5e9+15e8, t0.Add(10*time.Second)); p == nil || *p < 14.99 || *p > 15.01 {
		t.Errorf("second sample: %v; want 15", p)
	}
	// A counter that went back (the sandbox restarted) starts over.
	if p := f.cpuPercent("a", 1e9, t0.Add(20*time.Second)); p != nil {
		t.Errorf("after a restart: %v; want none", *p)
	}
	if p := f.cpuPercent("b", 1e9, t0.Add(20*time.Second)); p != nil {
		t.Errorf("another sandbox's first sample: %v; want none", *p)
	}
}
