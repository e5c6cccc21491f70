package admission

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestSizeInfosSayWhatFits(t *testing.T) {
	for _, si := range SizeInfos(api.Resources{CPU: 2, MemoryMB: 16 << 10, DiskMB: 100 << 10, Pids: 32768}) {
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
			_, err := Parse([]byte(tt.doc))
			if (err == nil) != tt.ok {
				t.Fatalf("Parse(%s) = %v, want ok=%v", tt.doc, err, tt.ok)
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
			cp, err := Compile(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			rec := base()
			if tt.mod != nil {
				tt.mod(rec)
			}
			err = cp.Check(rec, "")
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
	cp, _ := Compile(api.Policy{MaxLifetime: "30m"})
	rec := base()
	if err := cp.Check(rec, ""); err != nil || rec.Timeout != 30*time.Minute {
		t.Fatalf("a create without a timeout should get max_lifetime: %v, %s", err, rec.Timeout)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"allowed_images":["busybox"],"max_size":"basic","max_lifetime":"1h","max_sandboxes_per_key":5}`))
	f.Add([]byte(`{"max_resources":{"cpu":1e308,"memory_mb":-9}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not invalid_argument", err)
			}
			return
		}
		// What parses must compile, and be a fixed point of parse(print()).
		cp, err := Compile(p)
		if err != nil {
			t.Fatalf("parsed but does not compile: %v", err)
		}
		if cp.maxRes.CPU < 0 || cp.maxRes.MemoryMB < 0 || cp.lifetime < 0 {
			t.Fatalf("negative bound from %q", data)
		}
	})
}

func TestPolicyTemplates(t *testing.T) {
	cp, err := Compile(api.Policy{AllowedTemplates: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &store.Sandbox{Image: "busybox", Runtime: "runc"}
	if err := cp.Check(rec, "web"); err != nil {
		t.Fatalf("an allowed template refused: %v", err)
	}
	if err := cp.Check(rec, ""); err != nil {
		t.Fatalf("a create without a template refused: %v", err)
	}
	if err := cp.Check(rec, "db"); !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "rule allowed_templates") {
		t.Fatalf("another template: %v", err)
	}
	// A plain name allows its every tag; a tagged entry only that tag.
	cp, err = Compile(api.Policy{AllowedTemplates: []string{"web", "db:v2", "api:default"}})
	if err != nil {
		t.Fatal(err)
	}
	for tpl, ok := range map[string]bool{"web:v9": true, "db:v2": true, "db": false, "db:v3": false, "api": true, "api:v1": true, "webx": false} {
		if err := cp.Check(rec, tpl); (err == nil) != ok {
			t.Errorf("template %s: %v, want allowed %v", tpl, err, ok)
		}
	}
	if _, err := Compile(api.Policy{AllowedTemplates: []string{"web:"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("web: compiled: %v", err)
	}
}

func TestCheckQuota(t *testing.T) {
	cp, err := Compile(api.Policy{MaxSandboxesPerKey: 2, MaxSandboxesLocal: 1})
	if err != nil {
		t.Fatal(err)
	}
	all := []*store.Sandbox{
		{ID: "a1", KeyID: "keya"}, {ID: "a2", KeyID: "keya"},
		{ID: "b1", KeyID: "keyb"},
		{ID: "l1", KeyID: api.CallerLocal},
	}
	tests := []struct {
		key, id string
		rule    string // "" = admitted
	}{
		{"keyb", "new", ""},
		{"keyc", "new", ""},
		{"keya", "new", "max_sandboxes_per_key"},
		{"keya", "a2", ""}, // a claim of a sandbox already counted counts it once
		{api.CallerLocal, "new", "max_sandboxes_local"},
	}
	for _, tt := range tests {
		err := cp.CheckQuota(tt.key, tt.id, all)
		if tt.rule == "" {
			if err != nil {
				t.Errorf("%s/%s refused: %v", tt.key, tt.id, err)
			}
			continue
		}
		if !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "rule "+tt.rule) {
			t.Errorf("%s/%s: %v, want rule %s", tt.key, tt.id, err, tt.rule)
		}
	}
	if !cp.HasQuota("keyz") || !cp.HasQuota(api.CallerLocal) {
		t.Error("HasQuota false under a policy with quotas")
	}
	var open Policy
	if open.HasQuota("keya") || open.CheckQuota("keya", "new", all) != nil {
		t.Error("the zero policy bounds sandboxes")
	}
}
