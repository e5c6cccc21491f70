package rules

import (
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Bounds on what a command request carries.
const (
	// MaxCmdArgs and MaxCmdBytes bound a command's arguments and their
	// total length.
	MaxCmdArgs  = 4096
	MaxCmdBytes = 1 << 20
	maxEnv      = 256
	maxEnvValue = 32 << 10
	// A session command or a code run waits behind earlier ones at most
	// maxQueueTimeout, by default defaultQueueTimeout.
	defaultQueueTimeout = 10 * time.Minute
	maxQueueTimeout     = time.Hour
)

var (
	// userRE admits a user name or uid, optionally with a group name or
	// gid (the forms an image's User takes); the agent resolves it.
	userRE = lazyre.New(`^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})(:([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10}))?$`)
	envRE  = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
)

// ValidUser says whether s names a user (a name or uid, optionally with a
// group) as exec and files take it.
func ValidUser(s string) bool { return userRE.MatchString(s) }

// ValidEnvName says whether s may name an environment variable.
func ValidEnvName(s string) bool { return envRE.MatchString(s) }

// Env checks a request's environment variables: at most 256, names of
// letters, digits and _ not starting with a digit, none with the agent's
// own prefix, values at most 32 KiB without NUL.
func Env(env map[string]string) error {
	if len(env) > maxEnv {
		return errdefs.Invalid("too many environment variables (%d, at most %d)", len(env), maxEnv)
	}
	for k, v := range env {
		if !envRE.MatchString(k) {
			return errdefs.Invalid("environment variable name %q is not valid", k)
		}
		if strings.HasPrefix(k, wire.EnvPrefix) {
			return errdefs.Invalid("environment variable %s: the prefix %s is reserved for Paddock's agent", k, wire.EnvPrefix)
		}
		if len(v) > maxEnvValue || strings.ContainsRune(v, 0) {
			return errdefs.Invalid("environment variable %s: value too long or contains NUL", k)
		}
	}
	return nil
}

// Exec checks a command request: a command of at most MaxCmdArgs
// arguments and MaxCmdBytes bytes without NUL, its environment (Env), a
// user as ValidUser takes it, a working directory and standard input within
// bounds.
func Exec(req *api.ExecRequest) error {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return errdefs.Invalid("cmd is empty: give the command and its arguments")
	}
	if len(req.Cmd) > MaxCmdArgs {
		return errdefs.Invalid("cmd has %d arguments, at most %d", len(req.Cmd), MaxCmdArgs)
	}
	n := 0
	for _, a := range req.Cmd {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return errdefs.Invalid("cmd arguments must not contain NUL bytes")
		}
	}
	if n > MaxCmdBytes {
		return errdefs.Invalid("cmd is %d bytes, at most %d", n, MaxCmdBytes)
	}
	if err := Env(req.Env); err != nil {
		return err
	}
	// An empty user is the sandbox's default: "user", or its image's User.
	if req.User != "" && !ValidUser(req.User) {
		return errdefs.Invalid("user %q is not a valid user name", req.User)
	}
	if strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return errdefs.Invalid("cwd is not a valid path")
	}
	if len(req.Stdin) > api.MaxExecStdin {
		return errdefs.Invalid("stdin is %d bytes, at most %d", len(req.Stdin), api.MaxExecStdin)
	}
	return nil
}

// QueueTimeout reads how long a request may wait for its turn (a session
// command, a code run): "" is the default, at most an hour.
func QueueTimeout(s string) (time.Duration, error) {
	if s == "" {
		return defaultQueueTimeout, nil
	}
	queue, err := ParseDuration("queue_timeout", s, time.Millisecond)
	if err != nil {
		return 0, err
	}
	if queue > maxQueueTimeout {
		return 0, errdefs.Invalid("queue_timeout %s is longer than %s", queue, maxQueueTimeout)
	}
	return queue, nil
}
