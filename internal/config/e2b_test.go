package config

import (
	"strings"
	"testing"
)

func TestE2BDefaultNetwork(t *testing.T) {
	tests := []struct {
		env, want, bad string
	}{
		{env: "", want: E2BNetworkNone},
		{env: "none", want: E2BNetworkNone},
		{env: "all", want: E2BNetworkAll},
		{env: "egress", bad: `e2b default network "egress": want none or all`},
	}
	for _, tc := range tests {
		c := Default()
		if err := c.ApplyEnv(func(k string) string {
			if k == "PADDOCK_E2B_DEFAULT_NETWORK" {
				return tc.env
			}
			return ""
		}); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: err = %v, want %q", tc.env, err, tc.bad)
			}
			continue
		}
		if err != nil || c.E2BDefaultNetwork != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.env, c.E2BDefaultNetwork, err, tc.want)
		}
	}
}
