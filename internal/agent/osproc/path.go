package osproc

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// EnvValue is key's value in env (NAME=value entries), or "".
func EnvValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// LookPath finds cmd like a shell would: a name with a slash is taken as
// it is (relative to cwd), any other is looked for in the absolute
// directories of pathEnv; it must be a regular, executable file.
func LookPath(cmd, pathEnv, cwd string) (string, error) {
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(cmd, "/") {
		p := cmd
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if isExec(p) {
			return p, nil
		}
		return "", errdefs.NotFound("command %q not found", cmd)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, cmd); isExec(p) {
			return p, nil
		}
	}
	return "", errdefs.NotFound("command %q not found", cmd)
}
