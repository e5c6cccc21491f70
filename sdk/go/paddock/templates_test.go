package paddock

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// buildTarNames returns the entry names of the build request a spec and
// context directory make.
func buildTarNames(t *testing.T, spec api.TemplateSpec, dir string) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := writeBuildTar(&buf, spec, dir); err != nil {
		t.Fatalf("writeBuildTar: %v", err)
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names
}

// A build sends only what its copy steps name: a template file kept beside
// anything large sends none of it.
func TestBuildTarSendsOnlyCopiedPaths(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(p string) {
		t.Helper()
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"template.toml", "big.iso", "app/main.py", "app/lib/util.py", "conf/a.ini", "other/x"} {
		write(p)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cp := func(src string) api.TemplateStep { return api.TemplateStep{Kind: api.StepCopy, Src: src, Dst: "/x"} }
	run := api.TemplateStep{Kind: api.StepRun, Run: "true"}

	tests := []struct {
		name  string
		steps []api.TemplateStep
		want  []string
	}{
		{"no copy step", []api.TemplateStep{run}, nil},
		{"a file and a directory", []api.TemplateStep{cp("conf/a.ini"), run, cp("app")},
			[]string{"context/app/", "context/app/lib/", "context/app/lib/util.py", "context/app/main.py", "context/conf/a.ini"}},
		{"a path inside another is sent once", []api.TemplateStep{cp("app/lib"), cp("./app/")},
			[]string{"context/app/", "context/app/lib/", "context/app/lib/util.py", "context/app/main.py"}},
		{"a link is sent as a link, never followed", []api.TemplateStep{cp("link"), cp("link/secret")},
			[]string{"context/link"}},
		{"missing and refused sources send nothing", []api.TemplateStep{cp("nope"), cp("../" + filepath.Base(outside)), cp("/etc")}, nil},
		{"the whole context", []api.TemplateStep{cp("app"), cp(".")},
			[]string{"context/app/", "context/app/lib/", "context/app/lib/util.py", "context/app/main.py", "context/big.iso",
				"context/conf/", "context/conf/a.ini", "context/link", "context/other/", "context/other/x", "context/template.toml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildTarNames(t, api.TemplateSpec{Name: "t", Steps: tt.steps}, dir)
			want := append([]string{"template.json"}, tt.want...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("sent %q\nwant %q", got, want)
			}
		})
	}
}
