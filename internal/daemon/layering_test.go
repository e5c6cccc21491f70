package daemon

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering: the daemon is the composition root and the server its
// HTTP face; no domain package may import either, or wiring would run
// back up. Only the CLI (serve) imports the daemon, and only the daemon
// the server; the controller's subsystem packages, which import the
// controller, are imported only by the daemon and the server, so the
// controller never imports them.
func TestLayering(t *testing.T) {
	const mod = "github.com/paddock-dev/paddock/"
	allowed := map[string][]string{
		mod + "internal/daemon":                  {"internal/cli"},
		mod + "internal/server":                  {"internal/daemon"},
		mod + "internal/controller/workspaces":   {"internal/daemon", "internal/server"},
		mod + "internal/controller/backups":      {"internal/daemon", "internal/server"},
		mod + "internal/controller/previews":     {"internal/daemon", "internal/server"},
		mod + "internal/controller/images":       {"internal/daemon", "internal/server"},
		mod + "internal/controller/codecontexts": {"internal/daemon", "internal/server", "internal/e2b"},
		mod + "internal/controller/watches":      {"internal/daemon", "internal/server"},
		mod + "internal/controller/ledgers":      {"internal/daemon", "internal/server"},
		mod + "internal/controller/templates":    {"internal/daemon", "internal/server", "internal/e2b"},
		mod + "internal/controller/secrets":      {"internal/daemon", "internal/server", "internal/e2b"},
		mod + "internal/controller/forks":        {"internal/daemon", "internal/server", "internal/e2b"},
		// controllertest builds it beside the controller for tests.
		mod + "internal/controller/warmpools": {"internal/daemon", "internal/server", "internal/controller/controllertest"},
	}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			okFrom, guarded := allowed[p]
			if !guarded || rel == strings.TrimPrefix(p, mod) {
				continue
			}
			ok := false
			for _, from := range okFrom {
				ok = ok || rel == from
			}
			if !ok {
				t.Errorf("%s imports %s: only %v may", path, p, okFrom)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: is the tree where the test expects it?", checked)
	}
}
