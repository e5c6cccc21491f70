package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

func TestParseTemplateFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *api.TemplateSpec
		wantErr string
	}{
		{
			name: "every step kind",
			in: `name = "t"
image = "busybox"
runtime = "runsc"
cwd = "/app"
start = ["httpd", "-f"]
[env]
A = "1"
[ready]
port = 80
[[step]]
run = "echo hi"
[[step]]
copy = "src"
to = "/app"
[[step]]
env = { B = "2" }
[[step]]
workdir = "/app"
[[step]]
user = "user"
`,
			want: &api.TemplateSpec{
				Name: "t", Image: "busybox", Runtime: api.RuntimeGVisor, Cwd: "/app", Start: []string{"httpd", "-f"},
				Env: map[string]string{"A": "1"}, Ready: &api.Readiness{Port: 80},
				Steps: []api.TemplateStep{
					{Kind: api.StepRun, Run: "echo hi"},
					{Kind: api.StepCopy, Src: "src", Dst: "/app"},
					{Kind: api.StepEnv, Env: map[string]string{"B": "2"}},
					{Kind: api.StepWorkdir, Dir: "/app"},
					{Kind: api.StepUser, User: "user"},
				},
			},
		},
		{name: "unknown key", in: "name = \"t\"\nimgae = \"busybox\"\n", wantErr: "unknown keys: imgae"},
		{name: "two kinds in a step", in: "name = \"t\"\n[[step]]\nrun = \"x\"\nworkdir = \"/\"\n", wantErr: "exactly one"},
		{name: "empty step", in: "name = \"t\"\n[[step]]\n", wantErr: "exactly one"},
		{name: "to without copy", in: "name = \"t\"\n[[step]]\nrun = \"x\"\nto = \"/\"\n", wantErr: "belongs to a copy"},
		{name: "not toml", in: "name = ", wantErr: "expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTemplateFile([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, *tt.want)
			}
		})
	}
}

// TestTemplateRequestNames: --template takes a name with a tag; pools
// and identifiers take plain names.
func TestTemplateRequestNames(t *testing.T) {
	for _, c := range []struct {
		f  createFlags
		ok bool
	}{
		{createFlags{template: "py"}, true},
		{createFlags{template: "py:v2"}, true},
		{createFlags{template: "py:"}, false},
		{createFlags{template: ":v2"}, false},
		{createFlags{template: "py:a:b"}, false},
		{createFlags{pool: "web", identifier: "u1"}, true},
		{createFlags{pool: "web:v2"}, false},
		{createFlags{pool: "web", identifier: "u:1"}, false},
	} {
		var req api.CreateSandboxRequest
		if err := c.f.templateRequest(&req); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.f, err, c.ok)
		} else if c.ok && req.Template != c.f.template {
			t.Errorf("%+v: template %q", c.f, req.Template)
		}
	}
}
