package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ds(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Percentile must sort
	}
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ds(7), 99, 7 * time.Millisecond},
		{"median odd", ds(3, 1, 2), 50, 2 * time.Millisecond},
		{"median even takes lower", ds(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 30 is max", ds(append(make([]int, 29), 9)...), 99, 9 * time.Millisecond},
		{"p99 of 100", ds(hundred...), 99, 99 * time.Millisecond},
		{"p100", ds(1, 5, 3), 100, 5 * time.Millisecond},
		{"p0", ds(1, 5, 3), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.samples, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.samples, tt.p, got, tt.want)
			}
		})
	}
}

func TestPercentileDoesNotReorderInput(t *testing.T) {
	in := ds(3, 1, 2)
	Percentile(in, 50)
	if in[0] != 3*time.Millisecond || in[1] != time.Millisecond {
		t.Fatalf("input reordered: %v", in)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(ds(10, 20, 30, 40), 2)
	want := Summary{N: 4, Errors: 2, P50ms: 20, P99ms: 40, MeanMs: 25, MinMs: 10, MaxMs: 40}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if z := Summarize(nil, 3); z.N != 0 || z.Errors != 3 || z.P50ms != 0 {
		t.Fatalf("empty Summarize = %+v", z)
	}
}

func TestRatio(t *testing.T) {
	tests := []struct{ a, b, want float64 }{
		{3, 2, 1.5}, {1, 3, 0.333}, {5, 0, 0}, {0, 5, 0},
	}
	for _, tt := range tests {
		if got := Ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestInterleave(t *testing.T) {
	var order []string
	mk := func(name string, fail func(call int) bool) Variant {
		calls := 0
		return Variant{Name: name, Run: func(context.Context) (time.Duration, error) {
			calls++
			order = append(order, name)
			if fail != nil && fail(calls) {
				return 0, errors.New(name + " broke")
			}
			return time.Duration(calls) * time.Millisecond, nil
		}}
	}
	series := Interleave(context.Background(), InterleaveOptions{Iterations: 4, Warmup: 1}, []Variant{
		mk("a", nil),
		mk("b", func(call int) bool { return call == 3 }), // one failure after it worked
		mk("c", func(int) bool { return true }),           // never works
	})
	wantOrder := "a b c b c a c a b a b b a"
	// Round 0: a b c; round 1: b c a; round 2: c a b (c now disabled after
	// its third failure); rounds 3 and 4 (a b, b a) skip c.
	if got := strings.Join(order, " "); got != wantOrder {
		t.Errorf("call order %q, want %q", got, wantOrder)
	}
	if n := series[0].Summary.N; n != 4 || len(series[0].SamplesMs) != 4 {
		t.Errorf("a recorded %d samples (%v), want 4 (warm-up excluded)", n, series[0].SamplesMs)
	}
	// a's calls return 1..5 ms; the first is warm-up.
	if got := series[0].SamplesMs; len(got) == 4 && (got[0] != 2 || got[3] != 5) {
		t.Errorf("a's samples %v, want 2 3 4 5 in run order", got)
	}
	if s := series[1]; s.Summary.N != 3 || s.Summary.Errors != 1 || s.Disabled != "" || s.FirstError != "b broke" {
		t.Errorf("b = %+v, want 3 samples, 1 error, not disabled", s)
	}
	if s := series[2]; s.Summary.N != 0 || s.Summary.Errors != giveUpAfter || s.Disabled == "" {
		t.Errorf("c = %+v, want disabled after %d errors", s, giveUpAfter)
	}
}

func TestInterleaveStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	Interleave(ctx, InterleaveOptions{Iterations: 100}, []Variant{{Name: "x", Run: func(context.Context) (time.Duration, error) {
		calls++
		if calls == 5 {
			cancel()
		}
		return time.Millisecond, nil
	}}})
	if calls != 5 {
		t.Fatalf("ran %d times after cancel at 5", calls)
	}
}

func TestParseDigest(t *testing.T) {
	good := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		in string
		ok bool
	}{
		{good, true},
		{"sha256:" + strings.Repeat("AB", 32), false},
		{"sha256:" + strings.Repeat("a", 63), false},
		{"sha512:" + strings.Repeat("a", 64), false},
		{"sha256:" + strings.Repeat("a", 62) + "/.", false},
		{"sha256:../../../../etc/passwd" + strings.Repeat("a", 36), false},
		{"", false},
	}
	for _, tt := range tests {
		hex, err := parseDigest(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("parseDigest(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err == nil && hex != tt.in[len("sha256:"):] {
			t.Errorf("parseDigest(%q) = %q", tt.in, hex)
		}
	}
}

func TestLayerDir(t *testing.T) {
	dir := t.TempDir()
	hex := strings.Repeat("0f", 32)
	want := filepath.Join(dir, "layers", "sha256", hex, "rootfs")
	if err := os.MkdirAll(want, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := LayerDir(dir, "sha256:"+hex)
	if err != nil || got != want {
		t.Fatalf("LayerDir = %q, %v; want %q", got, err, want)
	}
	if _, err := LayerDir(dir, "sha256:"+strings.Repeat("1f", 32)); err == nil {
		t.Fatal("LayerDir of a missing layer succeeded")
	}
}

func FuzzParseDigest(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("ab", 32))
	f.Add("sha256:../x")
	f.Fuzz(func(t *testing.T, s string) {
		hex, err := parseDigest(s)
		if err != nil {
			return
		}
		if len(hex) != 64 || strings.ContainsAny(hex, "/.") || filepath.Base(hex) != hex {
			t.Fatalf("accepted unsafe digest %q -> %q", s, hex)
		}
	})
}

func TestParseKiBField(t *testing.T) {
	tests := []struct {
		name, data, field string
		want              int64
		ok                bool
	}{
		{"status", "Name:\tx\nVmRSS:\t   1234 kB\nVmData: 5 kB\n", "VmRSS:", 1234, true},
		{"rollup", "00400000-7fff [rollup]\nRss: 10 kB\nPss:  7 kB\n", "Pss:", 7, true},
		{"missing", "Name: x\n", "VmRSS:", 0, false},
		{"bad unit", "VmRSS: 5 MB\n", "VmRSS:", 0, false},
		{"negative", "VmRSS: -5 kB\n", "VmRSS:", 0, false},
		{"garbage", "VmRSS: lots kB\n", "VmRSS:", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKiBField([]byte(tt.data), tt.field)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("got %d, %v; want %d, ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseKiBField(f *testing.F) {
	f.Add([]byte("VmRSS:\t 12 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseKiBField(data, "VmRSS:")
		if err == nil && (n < 0 || n > 1<<40) {
			t.Fatalf("out-of-range value %d accepted", n)
		}
	})
}

func TestParseStatPPid(t *testing.T) {
	tests := []struct {
		stat string
		want int
		ok   bool
	}{
		{"42 (sh) S 7 42 42 0", 7, true},
		{"42 (a) b) c) R 9 1", 9, true},
		{"42 (x", 0, false},
		{"42 (x) S", 0, false},
		{"42 (x) S -3", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseStatPPid([]byte(tt.stat))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseStatPPid(%q) = %d, %v; want %d, %v", tt.stat, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseStatPPid(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, ok := parseStatPPid(data); ok && p < 0 {
			t.Fatalf("negative ppid %d", p)
		}
	})
}

func TestMemoryCgroupDir(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"v1", "12:pids:/x\n4:memory:/paddock/abc\n1:name=systemd:/\n", "/sys/fs/cgroup/memory/paddock/abc"},
		{"v1 joined", "3:cpu,memory:/p/q\n", "/sys/fs/cgroup/memory/p/q"},
		{"v2", "0::/paddock/abc\n", "/sys/fs/cgroup/paddock/abc"},
		{"dotdot refused", "4:memory:/../../etc\n", ""},
		{"none", "1:cpu:/x\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memoryCgroupDir([]byte(tt.data))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzMemoryCgroupDir(f *testing.F) {
	f.Add([]byte("4:memory:/paddock/abc\n"))
	f.Add([]byte("0::/a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, err := memoryCgroupDir(data)
		if err != nil {
			return
		}
		if !strings.HasPrefix(filepath.Clean(dir), "/sys/fs/cgroup") {
			t.Fatalf("escaped the cgroup tree: %q", dir)
		}
	})
}

func TestParseStatePid(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{`{"id":"x","pid":123,"status":"running"}`, 123, true},
		{`{"pid":0,"status":"stopped"}`, 0, false},
		{`{"pid":-1}`, 0, false},
		{`not json`, 0, false},
	}
	for _, tt := range tests {
		got, err := parseStatePid([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseStatePid(%s) = %d, %v", tt.in, got, err)
		}
	}
}

func FuzzParseStatePid(f *testing.F) {
	f.Add([]byte(`{"pid":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := parseStatePid(data); err == nil && (p <= 0 || p > 1<<22) {
			t.Fatalf("accepted pid %d", p)
		}
	})
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"paddock vs runc and podman", "paddock-vs-runc-and-podman"},
		{"  ../../etc/passwd ", "etc-passwd"},
		{"", "run"},
		{strings.Repeat("ab ", 40), strings.TrimRight(strings.Repeat("ab-", 16), "-")},
	}
	for _, tt := range tests {
		if got := Slug(tt.in); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func sampleReport() *Report {
	r := &Report{
		Description: "unit test",
		Machine:     Machine{CPU: "test cpu", Cores: 2, Commit: "abc"},
		Iterations:  3,
		Comparisons: []Comparison{
			NewComparison("do-busybox", "do", "", []Series{
				{Name: "paddock do", Summary: Summarize(ds(30, 30, 30), 0)},
				{Name: "runc run", Summary: Summarize(ds(10, 10, 10), 0)},
				{Name: "podman run", Disabled: "podman | broke"},
			}),
			NewComparison("exec", "exec", "", []Series{
				{Name: "paddock exec (SDK)", Summary: Summarize(ds(1, 1, 1), 0)},
				{Name: "runc exec", Summary: Summarize(ds(20, 20, 20), 0)},
			}),
		},
		Bursts: []Burst{{ID: "burst-paddock", Concurrency: 50, Summary: Summarize(ds(5), 49), FirstError: "boom"}},
		Idle: []Idle{
			{Runtime: "runc", Samples: 3, RSSKiB: 4 * 1024},
			{Runtime: "gvisor", Error: "runsc missing"},
		},
	}
	r.Targets = Targets(r)
	return r
}

func TestTargets(t *testing.T) {
	got := map[string]string{}
	for _, tg := range sampleReport().Targets {
		got[tg.Name] = tg.Status
	}
	want := map[string]string{
		"`paddock do` p50 (busybox)":   Missed, // 3x
		"`paddock do` p50 (base)":      NotMeasured,
		"Exec round trip p50":          Met, // 0.05x
		"Concurrent creates":           Missed,
		"Idle sandbox memory (runc)":   Met,
		"Idle sandbox memory (gvisor)": NotMeasured,
	}
	for name, st := range want {
		if got[name] != st {
			t.Errorf("target %q = %q, want %q (all: %v)", name, got[name], st, got)
		}
	}
}

func TestReportWrite(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	day := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	path, err := r.Write(dir, day)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2025-03-04-unit-test.md"); path != want {
		t.Fatalf("path %q, want %q", path, want)
	}
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| CPU | test cpu |", "Ratio paddock do / runc run: p50 3.00x", "**Exec round trip p50**: MET",
		"**Concurrent creates**: MISSED", `podman \| broke`, "NOT MEASURED",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	js, err := os.ReadFile(strings.TrimSuffix(path, ".md") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Machine.CPU != "test cpu" || len(back.Comparisons) != 2 || back.Comparisons[0].Ratios[0].P50 != 3 {
		t.Fatalf("JSON round trip lost data: %+v", back)
	}
}

func TestReadProcMemSelf(t *testing.T) {
	pm, err := ReadProcMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if pm.RSSKiB <= 0 || pm.Comm == "" {
		t.Fatalf("ReadProcMem(self) = %+v", pm)
	}
	pids, err := Descendants(os.Getpid())
	if err != nil || !contains(pids, os.Getpid()) {
		t.Fatalf("Descendants(self) = %v, %v", pids, err)
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestMountsUnder(t *testing.T) {
	info := "36 35 98:0 / /mnt/a rw - ext3 /dev/root rw\n" +
		"37 35 98:0 / /tmp/w/s/rootfs rw - overlay overlay rw\n" +
		"38 35 98:0 / /tmp/w2 rw - tmpfs tmpfs rw\n" +
		"39 35 98:0 / /tmp/w/with\\040space rw - tmpfs tmpfs rw\n" +
		"short line\n"
	got := mountsUnder(info, "/tmp/w")
	want := []string{"/tmp/w/s/rootfs", "/tmp/w/with space"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("mountsUnder = %q, want %q", got, want)
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "x")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAllUnmounted(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
}

func FuzzUnescapeMountinfo(f *testing.F) {
	f.Add(`/a\040b\`)
	f.Add(`\12`)
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeMountinfo(s); len(got) > len(s) {
			t.Fatalf("unescape grew %q to %q", s, got)
		}
	})
}

func TestChangedTopDirs(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", ""},
		{"?? bench/\n", "bench/"},
		{" M go.mod\n M internal/a/b.go\n?? internal/c/\nR  x/old -> y/new\n", "go.mod|internal/|y/"},
	}
	for _, tt := range tests {
		if got := strings.Join(changedTopDirs(tt.in), "|"); got != tt.want {
			t.Errorf("changedTopDirs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
