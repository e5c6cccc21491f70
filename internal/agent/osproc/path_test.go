package osproc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := write("b/tool", 0o755)
	write("a/tool", 0o644) // not executable: skipped
	if err := os.MkdirAll(filepath.Join(dir, "c/tool"), 0o755); err != nil {
		t.Fatal(err) // a directory: skipped
	}
	rel := write("work/bin/run", 0o755)
	path := filepath.Join(dir, "c") + ":relative:" + filepath.Join(dir, "a") + "::" + filepath.Join(dir, "b")

	tests := []struct {
		name, cmd, pathEnv, cwd, want string
	}{
		{name: "first executable in PATH", cmd: "tool", pathEnv: path, want: exe},
		{name: "absolute", cmd: exe, want: exe},
		{name: "relative with a slash is against cwd", cmd: "bin/run", cwd: filepath.Join(dir, "work"), want: rel},
		{name: "relative PATH entries are ignored", cmd: "tool", pathEnv: "b", cwd: dir},
		{name: "not executable", cmd: filepath.Join(dir, "a/tool")},
		{name: "missing", cmd: "nothing-here", pathEnv: path},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookPath(tt.cmd, tt.pathEnv, tt.cwd)
			if tt.want == "" {
				if !errors.Is(err, errdefs.ErrNotFound) {
					t.Fatalf("LookPath = %q, %v; want not found", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LookPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestEnvValue(t *testing.T) {
	env := []string{"PATHX=no", "PATH=/bin:/usr/bin", "EMPTY="}
	if got := EnvValue(env, "PATH"); got != "/bin:/usr/bin" {
		t.Errorf("PATH = %q", got)
	}
	if got := EnvValue(env, "EMPTY"); got != "" {
		t.Errorf("EMPTY = %q", got)
	}
	if got := EnvValue(env, "MISSING"); got != "" {
		t.Errorf("MISSING = %q", got)
	}
}
