package agent

import (
	"go/build"
	"reflect"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/agent/users"
)

func TestBuildEnv(t *testing.T) {
	u := &users.User{Name: "user", Home: "/home/user"}
	tests := []struct {
		name string
		base []string
		req  map[string]string
		want []string
	}{
		{name: "default PATH", base: nil, want: []string{
			"HOME=/home/user", "LOGNAME=user", "PATH=" + DefaultPath, "USER=user"}},
		{name: "sandbox PATH kept, identity wins over sandbox", base: []string{"PATH=/x", "HOME=/wrong", "A=1", "junk"}, want: []string{
			"A=1", "HOME=/home/user", "LOGNAME=user", "PATH=/x", "USER=user"}},
		{name: "request wins over everything", base: []string{"A=1"}, req: map[string]string{"A": "2", "HOME": "/h", "PATH": "/p"}, want: []string{
			"A=2", "HOME=/h", "LOGNAME=user", "PATH=/p", "USER=user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildEnv(tt.base, u, tt.req); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestImportBoundary keeps the agent, which runs inside every sandbox,
// from depending on the daemon's packages, and the client from depending
// on the agent's implementation.
func TestImportBoundary(t *testing.T) {
	const mod = "github.com/paddock-dev/paddock/"
	allowed := map[string][]string{
		mod + "internal/agent": {mod + "internal/errdefs", mod + "api", mod + "proto/gen/", mod + "internal/agent/wire", mod + "internal/agent/tree", mod + "internal/cgroupstat",
			mod + "internal/agent/files", mod + "internal/agent/users", mod + "internal/agent/safefs", mod + "internal/agent/reply", mod + "internal/agent/osproc",
			mod + "internal/agent/codectx", mod + "internal/agent/portfwd", mod + "internal/agent/sessions", mod + "internal/shellquote", mod + "internal/lazyre"},
		mod + "internal/agent/sessions": {mod + "internal/errdefs", mod + "api", mod + "proto/gen/", mod + "internal/agent/users", mod + "internal/agent/safefs",
			mod + "internal/agent/reply", mod + "internal/agent/osproc", mod + "internal/shellquote", mod + "internal/lazyre"},
		mod + "internal/agent/portfwd": {mod + "internal/errdefs", mod + "api", mod + "internal/agent/wire", mod + "internal/agent/reply", mod + "internal/agent/safefs"},
		mod + "internal/agent/codectx": {mod + "internal/errdefs", mod + "api", mod + "proto/gen/", mod + "internal/agent/wire", mod + "internal/agent/users", mod + "internal/agent/safefs",
			mod + "internal/agent/reply", mod + "internal/agent/osproc", mod + "internal/lazyre"},
		mod + "internal/agent/osproc": {mod + "internal/errdefs", mod + "api", mod + "proto/gen/"},
		mod + "internal/agent/files":  {mod + "internal/errdefs", mod + "api", mod + "proto/gen/", mod + "internal/agent/wire", mod + "internal/agent/tree", mod + "internal/agent/users", mod + "internal/agent/safefs", mod + "internal/agent/reply"},
		mod + "internal/agent/users":  {mod + "internal/errdefs", mod + "api", mod + "internal/agent/safefs"},
		mod + "internal/agent/safefs": {mod + "internal/errdefs", mod + "api"},
		mod + "internal/agent/reply":  {mod + "internal/errdefs", mod + "api"},
		mod + "internal/agent/client": {mod + "internal/errdefs", mod + "api", mod + "proto/gen/", mod + "internal/agent/wire", mod + "internal/agent/tree"},
		mod + "internal/agent/wire":   {mod + "internal/errdefs", mod + "api"},
		mod + "internal/agent/tree":   {},
		mod + "internal/shellquote":   {},
		mod + "internal/lazyre":       {},
	}
	for root, ok := range allowed {
		seen := map[string]bool{}
		var walk func(pkg string)
		walk = func(pkg string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			p, err := build.Default.Import(pkg, ".", 0)
			if err != nil {
				t.Fatalf("import %s: %v", pkg, err)
			}
			for _, imp := range p.Imports {
				if !strings.HasPrefix(imp, mod) {
					continue
				}
				permitted := false
				for _, prefix := range ok {
					if imp == prefix || strings.HasPrefix(imp, prefix) {
						permitted = true
					}
				}
				if !permitted {
					t.Errorf("%s imports %s (via %s)", root, imp, pkg)
					continue
				}
				walk(imp)
			}
		}
		walk(root)
		// Guards the guard: the walk must have reached the generated code.
		if !strings.HasSuffix(root, "/agent") && !strings.HasSuffix(root, "/files") && !strings.HasSuffix(root, "/client") {
			continue
		}
		if !seen[mod+"proto/gen/process"] && !seen[mod+"proto/gen/filesystem"] {
			t.Errorf("import walk of %s found nothing; the check is not working", root)
		}
	}
}
