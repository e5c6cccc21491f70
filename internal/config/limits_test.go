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
