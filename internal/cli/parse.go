package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// maxSizeMiB bounds sizes to something a machine can have (1 PiB), so a
// typo cannot overflow the API's int64 fields.
const maxSizeMiB = 1 << 30

// parseSizeMiB reads a size such as 512M, 2G, 1GiB or 1.5g and returns it in
// MiB, rounding up. Units are binary whatever their spelling (M = MiB), as
// memory and disk limits are; a bare number is MiB.
func parseSizeMiB(flag, s string) (int64, error) {
	bad := func(why string) error {
		return fmt.Errorf("--%s %q: %s; want a size like 512M, 2G or 1GiB (a bare number is MiB)", flag, s, why)
	}
	b, err := config.ParseSize(s, 1<<20)
	if err != nil {
		return 0, bad(err.Error())
	}
	mib := math.Ceil(b / (1 << 20))
	switch {
	case mib < 1:
		return 0, bad("must be at least 1MiB")
	case mib > maxSizeMiB:
		return 0, bad("too large")
	}
	return int64(mib), nil
}

var envNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnv reads repeated K=V flags. A bare K takes its value from this
// process's environment, as docker's -e does.
func parseEnv(flag string, items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("--%s %q: want NAME=value with NAME made of letters, digits and '_', not starting with a digit", flag, it)
		}
		if !ok {
			lv, set := os.LookupEnv(k)
			if !set {
				return nil, fmt.Errorf("--%s %s: no '=value' given and %s is not set here", flag, k, k)
			}
			v = lv
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("--%s %s: the value contains a NUL byte", flag, k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--%s %s given twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}

var labelKeyRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,62}$`)

// parseLabels reads repeated k=v flags.
func parseLabels(flag string, items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || !labelKeyRE.MatchString(k) {
			return nil, fmt.Errorf("--%s %q: want key=value, the key 1-63 letters, digits, '_', '.', '/' or '-'", flag, it)
		}
		if len(v) > 256 || strings.ContainsAny(v, "\x00\n") {
			return nil, fmt.Errorf("--%s %s: the value is longer than 256 bytes or has a NUL or newline", flag, k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--%s %s given twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}

// refRE is what a sandbox id or name can look like; a cp argument is
// remote only when the text before its first ':' has this shape.
var refRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// templateRE is a template's name, with a tag after a colon if any.
var templateRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}(:[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62})?$`)

// cpArg is one side of `paddock cp`: a local path, or a path in a sandbox.
type cpArg struct {
	sandbox string // "" for a local path
	path    string
}

func parseCpArg(s string) cpArg {
	if s == "" || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") {
		return cpArg{path: s}
	}
	if ref, p, ok := strings.Cut(s, ":"); ok && refRE.MatchString(ref) {
		return cpArg{sandbox: ref, path: p}
	}
	return cpArg{path: s}
}

// parseCpArgs checks that exactly one side names a sandbox. A relative
// sandbox path is resolved by the daemon against the user's home.
func parseCpArgs(src, dst string) (cpArg, cpArg, error) {
	s, d := parseCpArg(src), parseCpArg(dst)
	switch {
	case s.sandbox != "" && d.sandbox != "":
		return s, d, fmt.Errorf("cp: both sides name a sandbox; copy between sandboxes through a local file")
	case s.sandbox == "" && d.sandbox == "":
		return s, d, fmt.Errorf("cp: neither side names a sandbox; write one side as SANDBOX:/path (a local file with ':' in its name is ./name)")
	}
	for _, a := range []cpArg{s, d} {
		switch {
		case a.path == "":
			return s, d, fmt.Errorf("cp: empty path; write SANDBOX:/path or a local path")
		case strings.ContainsRune(a.path, 0):
			return s, d, fmt.Errorf("cp: path contains a NUL byte")
		}
	}
	return s, d, nil
}

// Shell conventions for a command that did not exit by itself.
const (
	exitTimedOut = 124
	exitUnknown  = 255
)

// exitCode maps how a sandboxed command ended to this process's exit code,
// the way a shell would: the code itself, 128+n for signal n, 124 when its
// timeout killed it.
func exitCode(res *paddock.ExecResult) int {
	switch {
	case res.TimedOut:
		return exitTimedOut
	case res.Signal != "":
		if n, ok := signalNumber(res.Signal); ok {
			return 128 + n
		}
		return exitUnknown
	case res.ExitCode < 0 || res.ExitCode > 255:
		return exitUnknown
	}
	return res.ExitCode
}

// Linux signal numbers, by name and by Go's description (syscall.Signal's
// String), since the sandbox is Linux whatever this client runs on.
var signals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "IOT": 6, "BUS": 7, "FPE": 8, "KILL": 9,
	"USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15, "STKFLT": 16, "CHLD": 17,
	"CONT": 18, "STOP": 19, "TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25,
	"VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "POLL": 29, "PWR": 30, "SYS": 31,

	"HANGUP": 1, "INTERRUPT": 2, "ILLEGAL INSTRUCTION": 4, "TRACE/BREAKPOINT TRAP": 5, "ABORTED": 6,
	"BUS ERROR": 7, "FLOATING POINT EXCEPTION": 8, "KILLED": 9, "USER DEFINED SIGNAL 1": 10,
	"SEGMENTATION FAULT": 11, "USER DEFINED SIGNAL 2": 12, "BROKEN PIPE": 13, "ALARM CLOCK": 14,
	"TERMINATED": 15,
}

func signalNumber(s string) (int, bool) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(s); err == nil {
		return n, n > 0 && n < 65
	}
	n, ok := signals[strings.TrimPrefix(s, "SIG")]
	if !ok {
		n, ok = signals[s]
	}
	return n, ok
}
