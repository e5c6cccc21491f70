package config

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runscVersionFile is the gVisor module version Paddock pins; the build
// script (scripts/install-deps.sh) reads the same file.
//
//go:embed runsc.version
var runscVersionFile string

// DefaultRunscDir is where scripts/install-deps.sh builds the pinned runsc
// for `make run` (`make test` builds into its own cache and points
// $PADDOCK_RUNSC there).
const DefaultRunscDir = "/var/cache/paddock/bin"

// maxRunscLen bounds the runsc setting; it is a path, not a document.
const maxRunscLen = 4096

// PinnedRunscVersion is the gvisor.dev/gvisor module version of the runsc
// Paddock builds, e.g. v0.0.0-20260905035102-160fafc42237.
func PinnedRunscVersion() string { return strings.TrimSpace(runscVersionFile) }

// PinnedRunscName is the pinned runsc's file name. It carries the version,
// so a new pin builds beside the old one instead of over it, and how it was
// built (its seccomp programs precompiled: scripts/install-deps.sh), so a
// build made before that is not taken for it.
func PinnedRunscName() string { return "runsc-" + PinnedRunscVersion() + "-precompiled" }

// PinnedRunscPath is the pinned runsc's path in dir.
func PinnedRunscPath(dir string) string {
	return filepath.Join(dir, PinnedRunscName())
}

// DefaultRunsc is the default of Config.Runsc: the pinned build.
func DefaultRunsc() string { return PinnedRunscPath(DefaultRunscDir) }

func (c *Config) applyRunscEnv(getenv func(string) string) {
	if v := getenv("PADDOCK_RUNSC"); v != "" {
		c.Runsc = v
	}
	if v := getenv("PADDOCK_RUNSC_PLATFORM"); v != "" {
		c.RunscPlatform = v
	}
	if v := getenv("PADDOCK_USER_NAMESPACES"); v != "" {
		c.UserNamespaces = v
	}
}

func (c *Config) validateRunsc() []error {
	switch c.UserNamespaces {
	case "", "auto", "off":
	default:
		return []error{fmt.Errorf("user_namespaces %.32q: want auto or off", c.UserNamespaces)}
	}
	switch c.RunscPlatform {
	case "", "systrap", "ptrace":
	default:
		return []error{fmt.Errorf("runsc_platform %.32q: want systrap or ptrace (or empty to choose)", c.RunscPlatform)}
	}
	switch {
	case c.Runsc == "" || len(c.Runsc) > maxRunscLen || strings.ContainsRune(c.Runsc, 0):
		return []error{fmt.Errorf("runsc %.64q: want an absolute path or a command name such as runsc", c.Runsc)}
	case filepath.IsAbs(c.Runsc), !strings.ContainsRune(c.Runsc, '/'):
		return nil
	default:
		return []error{fmt.Errorf("runsc %q: a path must be absolute (a bare name is looked up in PATH)", c.Runsc)}
	}
}

// RunscPath resolves the Runsc setting to the executable the daemon runs,
// with a note for `paddock info` on where it comes from. A name is looked
// up in PATH. The default, the pinned build, falls back to runsc in PATH
// while it is not installed, so a host with only Debian's runsc still has
// gVisor; any other setting that does not resolve is returned as is, and
// the runtime's probe reports it missing.
func (c *Config) RunscPath() (path, note string) {
	return resolveRunsc(c.Runsc, exec.LookPath, isExecutable)
}

func resolveRunsc(setting string, lookPath func(string) (string, error), executable func(string) bool) (path, note string) {
	if !filepath.IsAbs(setting) {
		p, err := lookPath(setting)
		if err != nil {
			return setting, ""
		}
		return p, setting + " from PATH"
	}
	if executable(setting) {
		if filepath.Base(setting) == PinnedRunscName() {
			return setting, "pinned build " + PinnedRunscVersion()
		}
		return setting, ""
	}
	if setting != DefaultRunsc() {
		return setting, ""
	}
	p, err := lookPath("runsc")
	if err != nil {
		return setting, ""
	}
	return p, fmt.Sprintf("runsc from PATH: the pinned build is not at %s (scripts/install-deps.sh builds it)", setting)
}

// isExecutable reports whether path is a regular file someone may execute.
func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// RunscFromEnv is the runsc a daemon started with this environment runs:
// the default resolved after $PADDOCK_RUNSC. Tests and the benchmark use it
// to drive the same binary as the daemon they start.
func RunscFromEnv(getenv func(string) string) string {
	c := Config{Runsc: DefaultRunsc()}
	c.applyRunscEnv(getenv)
	p, _ := c.RunscPath()
	return p
}
