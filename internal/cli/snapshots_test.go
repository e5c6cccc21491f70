package cli

import (
	"testing"

	"github.com/paddock-dev/paddock/api"
)

func TestSnapshotCreateFlags(t *testing.T) {
	tests := []struct {
		name    string
		f       createFlags
		want    api.CreateSandboxRequest
		wantErr bool
	}{
		{"none", createFlags{}, api.CreateSandboxRequest{}, false},
		{"restore", createFlags{fromSnapshot: "after-deps"}, api.CreateSandboxRequest{FromSnapshot: "after-deps"}, false},
		{"on idle snapshot", createFlags{onIdle: "snapshot"}, api.CreateSandboxRequest{OnIdle: "snapshot"}, false},
		{"on idle pause", createFlags{onIdle: "pause"}, api.CreateSandboxRequest{OnIdle: "pause"}, false},
		{"unknown policy", createFlags{onIdle: "hibernate"}, api.CreateSandboxRequest{}, true},
		{"policy with keep-alive", createFlags{onIdle: "stop", keepAlive: true}, api.CreateSandboxRequest{}, true},
		{"bad snapshot ref", createFlags{fromSnapshot: "../x"}, api.CreateSandboxRequest{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f.request()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && (got.FromSnapshot != tc.want.FromSnapshot || got.OnIdle != tc.want.OnIdle) {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

func TestCheckTTLFlag(t *testing.T) {
	for in, ok := range map[string]bool{"": true, "never": true, "72h": true, "0s": false, "-1h": false, "soon": false} {
		if err := checkTTLFlag(in); (err == nil) != ok {
			t.Errorf("checkTTLFlag(%q) = %v", in, err)
		}
	}
}
