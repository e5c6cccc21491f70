package cli

import (
	"strings"
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
		{"on idle hibernate", createFlags{onIdle: "hibernate"}, api.CreateSandboxRequest{OnIdle: "hibernate"}, false},
		{"unknown policy", createFlags{onIdle: "freeze"}, api.CreateSandboxRequest{}, true},
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

// TestHelpSaysWhatIsKept: every command that makes or keeps state says what
// survives: a restore keeps files only, a pause keeps memory in RAM, or on
// disk with --to-disk (gVisor only).
func TestHelpSaysWhatIsKept(t *testing.T) {
	s := newFake(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"create", "--help"}, []string{"--from-snapshot", "does\nnot keep memory, running processes or mounts", "not memory, processes or mounts"}},
		{[]string{"snapshot", "create", "--help"}, []string{"does\nnot keep memory, running processes or mounts", "now + TTL"}},
		{[]string{"fork", "--help"}, []string{"does\nnot keep memory"}},
		{[]string{"pause", "--help"}, []string{"Memory and processes are kept", "With --to-disk the sandbox hibernates", "gVisor sandboxes only"}},
	}
	for _, tc := range tests {
		r := runCLI(t, s, "", tc.args...)
		if r.code != 0 {
			t.Fatalf("paddock %v: %+v", tc.args, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("paddock %v lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
	}
}
