package agent

import (
	"encoding/base64"
	"testing"

	"github.com/paddock-dev/paddock/internal/agent/users"
)

func TestParseBasicUser(t *testing.T) {
	enc := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		header, want string
		wantErr      bool
	}{
		{header: enc("root:"), want: "root"},
		{header: enc("user:ignored"), want: "user"},
		{header: enc(":"), want: ""},
		{header: "basic " + base64.StdEncoding.EncodeToString([]byte("user:")), want: "user"},
		{header: "Bearer abc", wantErr: true},
		{header: "Basic !!!", wantErr: true},
		{header: enc("bad name:"), wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseBasicUser(tt.header)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseBasicUser(%q) = %q, %v; want %q", tt.header, got, err, tt.want)
		}
	}
}

func FuzzParseBasicUser(f *testing.F) {
	f.Add("Basic dXNlcjo=")
	f.Add("Basic ")
	f.Add("Basic Og==")
	f.Fuzz(func(t *testing.T, h string) {
		name, err := parseBasicUser(h)
		if err == nil && name != "" && !users.ValidName(name) {
			t.Fatalf("accepted invalid user name %q", name)
		}
	})
}
