package config

import (
	"testing"
)

func TestLimitsEnvAndValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		parseErr bool
		valid    bool
		body     int64
		ratio    float64
	}{
		{"defaults", nil, false, true, 128 << 20, 1},
		{"set", map[string]string{"PADDOCK_REQUEST_BODY_MEMORY": "64MiB", "PADDOCK_DISK_OVERCOMMIT": "1.5"}, false, true, 64 << 20, 1.5},
		{"body budget too small", map[string]string{"PADDOCK_REQUEST_BODY_MEMORY": "1MiB"}, false, false, 1 << 20, 1},
		{"body budget not a size", map[string]string{"PADDOCK_REQUEST_BODY_MEMORY": "lots"}, true, false, 0, 0},
		{"overcommit zero", map[string]string{"PADDOCK_DISK_OVERCOMMIT": "0"}, false, false, 128 << 20, 0},
		{"overcommit negative", map[string]string{"PADDOCK_DISK_OVERCOMMIT": "-1"}, false, false, 128 << 20, -1},
		{"overcommit NaN", map[string]string{"PADDOCK_DISK_OVERCOMMIT": "NaN"}, false, false, 128 << 20, 0},
		{"overcommit huge", map[string]string{"PADDOCK_DISK_OVERCOMMIT": "1000"}, false, false, 128 << 20, 1000},
		{"overcommit not a number", map[string]string{"PADDOCK_DISK_OVERCOMMIT": "lots"}, true, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := c.ApplyEnv(func(k string) string { return tc.env[k] })
			if tc.parseErr {
				if err == nil {
					t.Fatal("want a parse error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RequestBodyMemory != tc.body || (tc.name != "overcommit NaN" && c.DiskOvercommit != tc.ratio) {
				t.Errorf("got %d, %v", c.RequestBodyMemory, c.DiskOvercommit)
			}
			if errs := c.validateLimits(); (len(errs) == 0) != tc.valid {
				t.Errorf("validateLimits = %v, want valid=%v", errs, tc.valid)
			}
		})
	}
}

func TestCreatesPerCaller(t *testing.T) {
	d := Default()
	if d.CreatesPerCaller != 0 || d.EffectiveCreatesPerCaller() < 2 {
		t.Errorf("default creates_per_caller %d (in effect %d), want 0 and at least 2 in effect", d.CreatesPerCaller, d.EffectiveCreatesPerCaller())
	}
	d.Backend = BackendKubernetes
	if n := d.EffectiveCreatesPerCaller(); n != kubernetesCreatesPerCaller {
		t.Errorf("default on Kubernetes %d, want %d", n, kubernetesCreatesPerCaller)
	}
	d.CreatesPerCaller = 3
	if n := d.EffectiveCreatesPerCaller(); n != 3 {
		t.Errorf("set to 3: in effect %d", n)
	}
	for _, tc := range []struct {
		v        string
		parseErr bool
		valid    bool
	}{
		{"1", false, true}, {"64", false, true}, {"1024", false, true},
		{"0", false, true}, {"-3", false, false}, {"1025", false, false},
		{"many", true, false}, {"2.5", true, false},
	} {
		c := Default()
		err := c.ApplyEnv(func(k string) string {
			if k == "PADDOCK_CREATES_PER_CALLER" {
				return tc.v
			}
			return ""
		})
		if (err != nil) != tc.parseErr {
			t.Errorf("%q: ApplyEnv = %v, want a parse error: %v", tc.v, err, tc.parseErr)
			continue
		}
		if err != nil {
			continue
		}
		if errs := c.validateLimits(); (len(errs) == 0) != tc.valid {
			t.Errorf("%q: validateLimits = %v, want valid=%v", tc.v, errs, tc.valid)
		}
	}
}
