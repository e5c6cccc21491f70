package controller

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// stringConsts returns the package-level string constants of the Go files
// in dir (tests excluded), by name.
func stringConsts(t *testing.T, files []*ast.File) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out[name.Name] = v
					}
				}
			}
		}
	}
	return out
}

// parseDirs parses every non-test Go file under root, grouped by directory.
func parseDirs(t *testing.T, root string) map[string][]*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out[filepath.Dir(path)] = append(out[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPaddockLedgerKindsComplete walks the source, so a kind the daemon
// records cannot be left out of api.PaddockLedgerKinds (where callers'
// entries are refused): every api.Ledger* string constant is listed, and
// every api.LedgerEntry the daemon builds takes its Kind from a listed
// constant or from a variable (which record checks when it runs), never a
// string literal or an unlisted constant.
func TestPaddockLedgerKindsComplete(t *testing.T) {
	listed := api.PaddockLedgerKinds()
	var apiFiles []*ast.File
	for _, files := range parseDirs(t, filepath.Join("..", "..", "api")) {
		apiFiles = append(apiFiles, files...)
	}
	apiConsts := stringConsts(t, apiFiles)
	n := 0
	for name, v := range apiConsts {
		if !strings.HasPrefix(name, "Ledger") {
			continue
		}
		n++
		if !slices.Contains(listed, v) {
			t.Errorf("api.%s = %q is not in api.PaddockLedgerKinds", name, v)
		}
	}
	if n < len(listed) {
		t.Errorf("found %d api.Ledger* constants for %d listed kinds: a listed kind has no constant", n, len(listed))
	}

	for _, root := range []string{filepath.Join("..", "..", "internal"), filepath.Join("..", "..", "cmd")} {
		for dir, files := range parseDirs(t, root) {
			local := stringConsts(t, files)
			for _, f := range files {
				ast.Inspect(f, func(node ast.Node) bool {
					lit, ok := node.(*ast.CompositeLit)
					if !ok || !isSelector(lit.Type, "api", "LedgerEntry") {
						return true
					}
					for _, el := range lit.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "Kind" {
							continue
						}
						checkKindExpr(t, dir, kv.Value, apiConsts, local, listed)
					}
					return true
				})
			}
		}
	}
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == pkg && sel.Sel.Name == name
}

func checkKindExpr(t *testing.T, dir string, e ast.Expr, apiConsts, local map[string]string, listed []string) {
	t.Helper()
	switch v := e.(type) {
	case *ast.BasicLit:
		t.Errorf("%s: api.LedgerEntry{Kind: %s}: use a constant listed in api.PaddockLedgerKinds", dir, v.Value)
	case *ast.SelectorExpr:
		if x, _ := v.X.(*ast.Ident); x == nil || x.Name != "api" {
			return // a field of a value (a copy of a stored entry): checked by record when recorded
		}
		if val, ok := apiConsts[v.Sel.Name]; !ok || !slices.Contains(listed, val) {
			t.Errorf("%s: api.LedgerEntry{Kind: api.%s}: not a kind listed in api.PaddockLedgerKinds", dir, v.Sel.Name)
		}
	case *ast.Ident:
		if val, ok := local[v.Name]; ok && !slices.Contains(listed, val) {
			t.Errorf("%s: api.LedgerEntry{Kind: %s} (%q): not a kind listed in api.PaddockLedgerKinds", dir, v.Name, val)
		}
		// Otherwise a variable: record refuses an unlisted value when it runs.
	default:
		t.Errorf("%s: api.LedgerEntry{Kind: <%T>}: use a constant listed in api.PaddockLedgerKinds", dir, e)
	}
}

// TestRecordRefusesUnlistedKind: the daemon cannot record a kind callers
// are not refused; a listed kind is recorded.
func TestRecordRefusesUnlistedKind(t *testing.T) {
	c, _ := newSnapshotController(t)
	ctx := t.Context()
	if err := c.Record(ctx, "sbkinds", api.LedgerEntry{Kind: "made_up"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("unlisted kind: %v, want refused", err)
	}
	if err := c.Record(ctx, "sbkinds", api.LedgerEntry{Kind: api.LedgerNetworkGrant, Note: "allow [x]"}); err != nil {
		t.Fatal(err)
	}
	entries, err := c.opts.Store.Ledger(ctx, "sbkinds", 0, 10)
	if err != nil || len(entries) != 1 || entries[0].Kind != api.LedgerNetworkGrant {
		t.Fatalf("ledger: %+v %v", entries, err)
	}
}
