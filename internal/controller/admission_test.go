package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestSizeResources(t *testing.T) {
	cfg := config.Default()
	cfg.Max = api.Resources{CPU: 2, MemoryMB: 16 << 10, DiskMB: 100 << 10, Pids: 32768}
	c := &Controller{cfg: cfg}
	tests := []struct {
		name    string
		size    string
		req     api.Resources
		want    api.Resources
		wantErr error
		msg     string
	}{
		{name: "lite", size: "lite", want: api.Resources{CPU: 0.0625, MemoryMB: 256, DiskMB: 2048, Pids: 256}},
		{name: "basic", size: "basic", want: api.Resources{CPU: 0.25, MemoryMB: 1024, DiskMB: 4096, Pids: 512}},
		{name: "standard-1", size: "standard-1", want: api.Resources{CPU: 0.5, MemoryMB: 4096, DiskMB: 8192, Pids: 1024}},
		{name: "standard-2", size: "standard-2", want: api.Resources{CPU: 1, MemoryMB: 6144, DiskMB: 12288, Pids: 2048}},
		{name: "standard-3", size: "standard-3", want: api.Resources{CPU: 2, MemoryMB: 8192, DiskMB: 16384, Pids: 4096}},
		{name: "explicit fields override the preset", size: "basic", req: api.Resources{MemoryMB: 512, Pids: 64},
			want: api.Resources{CPU: 0.25, MemoryMB: 512, DiskMB: 4096, Pids: 64}},
		{name: "standard-4 on a 2-core host", size: "standard-4", wantErr: errdefs.ErrResourceExhausted,
			msg: "size standard-4: 4 vCPUs requested, this host allows 2"},
		{name: "override below the host limit makes it fit", size: "standard-4", req: api.Resources{CPU: 2},
			want: api.Resources{CPU: 2, MemoryMB: 12288, DiskMB: 20480, Pids: 8192}},
		{name: "custom above the host", req: api.Resources{CPU: 3}, wantErr: errdefs.ErrResourceExhausted,
			msg: "3 vCPUs requested, this host allows 2"},
		{name: "custom memory above the host", req: api.Resources{MemoryMB: 20 << 10}, wantErr: errdefs.ErrResourceExhausted,
			msg: "20480 MiB of memory requested, this host allows 16384 MiB"},
		{name: "unknown preset", size: "huge", wantErr: errdefs.ErrInvalidArgument, msg: `size "huge" is not a preset`},
		{name: "no size takes the defaults", want: cfg.Defaults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.sizeResources(tt.size, tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.msg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestSizeInfosSayWhatFits(t *testing.T) {
	c := &Controller{cfg: config.Config{Max: api.Resources{CPU: 2, MemoryMB: 16 << 10, DiskMB: 100 << 10, Pids: 32768}}}
	for _, si := range c.sizeInfos() {
		wantFit := si.Name != api.SizeStandard4
		if si.Fits != wantFit || (!si.Fits && !strings.Contains(si.Reason, "4 vCPUs requested, this host allows 2")) {
			t.Errorf("%s: fits=%v reason=%q", si.Name, si.Fits, si.Reason)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"empty", `{}`, true},
		{"full", `{"allowed_images":["busybox","` + digest + `"],"allowed_runtimes":["runc","gvisor"],"max_size":"basic",
			"max_resources":{"cpu":0.5},"max_lifetime":"2h","max_sandboxes_per_key":5,"max_sandboxes_local":3,"allow_network":true}`, true},
		{"unknown field", `{"max_sandboxes":5}`, false},
		{"bad runtime", `{"allowed_runtimes":["docker"]}`, false},
		{"bad size", `{"max_size":"xl"}`, false},
		{"bad lifetime", `{"max_lifetime":"forever"}`, false},
		{"negative quota", `{"max_sandboxes_per_key":-1}`, false},
		{"negative resources", `{"max_resources":{"memory_mb":-1}}`, false},
		{"bad image", `{"allowed_images":["../etc"]}`, false},
		{"short digest", `{"allowed_images":["sha256:abc"]}`, true}, // a valid name shape; it can never match a digest
		{"trailing data", `{} {}`, false},
		{"not json", `max_size = "basic"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tt.doc))
			if (err == nil) != tt.ok {
				t.Fatalf("ParsePolicy(%s) = %v, want ok=%v", tt.doc, err, tt.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not invalid_argument", err)
			}
		})
	}
}

func TestPolicyCheck(t *testing.T) {
	digest := "sha256:" + strings.Repeat("cd", 32)
	base := func() *store.Sandbox {
		return &store.Sandbox{Image: "busybox", ImageDigest: digest, Runtime: "runc",
			Resources: api.Resources{CPU: 0.25, MemoryMB: 1024, DiskMB: 4096, Pids: 512}}
	}
	tests := []struct {
		name   string
		policy api.Policy
		mod    func(*store.Sandbox)
		rule   string // "" = admitted
	}{
		{name: "open policy", policy: api.Policy{}},
		{name: "image by name", policy: api.Policy{AllowedImages: []string{"busybox"}}},
		{name: "image by digest", policy: api.Policy{AllowedImages: []string{digest}}},
		{name: "image refused", policy: api.Policy{AllowedImages: []string{"base"}}, rule: "allowed_images"},
		{name: "runtime refused", policy: api.Policy{AllowedRuntimes: []string{"gvisor"}}, rule: "allowed_runtimes"},
		{name: "within max size", policy: api.Policy{MaxSize: "basic"}},
		{name: "above max size", policy: api.Policy{MaxSize: "basic"}, mod: func(s *store.Sandbox) { s.Resources.CPU = 0.5 }, rule: "max_size basic"},
		{name: "above max resources", policy: api.Policy{MaxResources: &api.Resources{Pids: 100}}, rule: "max_resources"},
		{name: "lifetime too long", policy: api.Policy{MaxLifetime: "1h"}, mod: func(s *store.Sandbox) { s.Timeout = 2 * time.Hour }, rule: "max_lifetime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, err := compilePolicy(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			rec := base()
			if tt.mod != nil {
				tt.mod(rec)
			}
			err = cp.check(rec)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "rule "+tt.rule) {
				t.Fatalf("err = %v, want permission denied naming rule %q", err, tt.rule)
			}
		})
	}
	cp, _ := compilePolicy(api.Policy{MaxLifetime: "30m"})
	rec := base()
	if err := cp.check(rec); err != nil || rec.Timeout != 30*time.Minute {
		t.Fatalf("a create without a timeout should get max_lifetime: %v, %s", err, rec.Timeout)
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"allowed_images":["busybox"],"max_size":"basic","max_lifetime":"1h","max_sandboxes_per_key":5}`))
	f.Add([]byte(`{"max_resources":{"cpu":1e308,"memory_mb":-9}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not invalid_argument", err)
			}
			return
		}
		// What parses must compile, and be a fixed point of parse(print()).
		cp, err := compilePolicy(p)
		if err != nil {
			t.Fatalf("parsed but does not compile: %v", err)
		}
		if cp.maxRes.CPU < 0 || cp.maxRes.MemoryMB < 0 || cp.lifetime < 0 {
			t.Fatalf("negative bound from %q", data)
		}
	})
}
