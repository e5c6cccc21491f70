package config

import (
	"testing"

	"github.com/paddock-dev/paddock/api"
)

func TestDefaultRuntimeFromEnv(t *testing.T) {
	c := Default()
	if err := c.ApplyEnv(func(k string) string {
		if k == "PADDOCK_DEFAULT_RUNTIME" {
			return "gvisor"
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	if c.DefaultRuntime != api.RuntimeGVisor {
		t.Fatalf("DefaultRuntime = %q", c.DefaultRuntime)
	}
	c.DefaultRuntime = "kata"
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted default runtime kata")
	}
}
