// Package wsh is the shell executor of workspaces: a POSIX shell
// (mvdan.cc/sh's interpreter) run inside the daemon over a workspace's
// files (a vfs.FS), with the common tools written in Go as builtins over
// the same files.
//
// It has no host access: every path the interpreter opens, stats, lists
// or checks goes through handlers that see only the workspace (mounted
// at /workspace) and /dev/null; commands that are not builtins exit 127;
// the environment is a fixed minimal one plus what the caller gives. The
// interpreter's few ways out to the host are closed before a run:
// process substitution (host FIFOs) is refused at parse time, and
// `type`, `command -v`, `hash`, `pwd -P` and `source NAME` (host PATH
// lookups and symlink resolution) are answered by this package or made
// relative.
//
// Bounds: the run's time (Options.Timeout, then the context is
// cancelled; exit 124), its output (Options.MaxOutput of stdout and
// stderr together; exit 125), and memory (Options.MaxMemory): the
// shell's variables are measured before every command, the bytes the
// builtins produce are counted, and the process's heap is sampled every
// few hundred commands; past the bound the run stops (exit 125). What a
// single builtin holds at once is bounded by the workspace's quota (it
// reads files of the workspace). Not bounded: the Go stack of deeply
// recursive shell functions (the interpreter's own recursion), whose
// growth the timeout ends.
package wsh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// Root is where the workspace appears in the shell.
const Root = "/workspace"

// noTempDir is the interpreter's temporary directory: a path that exists
// on no Linux host.
const noTempDir = "/proc/self/fd/-1"

// Defaults of Options.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 16 << 20
	DefaultMaxMemory = 256 << 20
)

// Reasons a run was stopped (Result.Stopped).
const (
	StoppedTimeout = "timeout"
	StoppedOutput  = "output limit"
	StoppedMemory  = "memory limit"
)

// Options are one run's.
type Options struct {
	// Script is the shell text, as for sh -c.
	Script         string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Env            map[string]string
	// Dir is the workspace directory to start in ("" for its root).
	Dir       string
	Timeout   time.Duration
	MaxOutput int64
	MaxMemory int64
}

// Result is how a run ended.
type Result struct {
	ExitCode int
	// Stopped says why the executor stopped the run, "" when it ended by
	// itself.
	Stopped  string
	Duration time.Duration
}

// run is one run's state shared by its handlers.
type run struct {
	fsys   vfs.FS
	opts   Options
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped string
	// produced counts the bytes builtins wrote (to pipes, files and
	// command substitutions alike).
	produced atomic.Int64
	calls    atomic.Int64
	heapBase uint64
}

// stop ends the run for a reason (the first one given wins).
func (r *run) stop(reason string) {
	r.mu.Lock()
	if r.stopped == "" {
		r.stopped = reason
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *run) reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// Run interprets opts.Script over fsys.
func Run(ctx context.Context, fsys vfs.FS, opts Options) Result {
	start := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxMemory <= 0 {
		opts.MaxMemory = DefaultMaxMemory
	}
	if opts.Stdin == nil {
		opts.Stdin = strings.NewReader("")
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r := &run{fsys: fsys, opts: opts, cancel: cancel, heapBase: heapInUse()}
	out := &boundedWriters{r: r, left: opts.MaxOutput}
	code := r.exec(ctx, out.writer(opts.Stdout), out.writer(opts.Stderr))
	res := Result{ExitCode: code, Stopped: r.reason(), Duration: time.Since(start)}
	if res.Stopped == "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Stopped = StoppedTimeout
	}
	switch res.Stopped {
	case StoppedTimeout:
		res.ExitCode = 124
		fmt.Fprintf(opts.Stderr, "paddock: the command was stopped after %s\n", opts.Timeout)
	case StoppedOutput, StoppedMemory:
		res.ExitCode = 125
		fmt.Fprintf(opts.Stderr, "\npaddock: the command was stopped: %s\n", res.Stopped)
	}
	return res
}

// exec parses and runs the script, returning its exit status.
func (r *run) exec(ctx context.Context, stdout, stderr io.Writer) int {
	file, err := syntax.NewParser().Parse(strings.NewReader(r.opts.Script), "")
	if err != nil {
		fmt.Fprintf(stderr, "paddock shell: %v\n", err)
		return 2
	}
	if err := refuseHostReach(file); err != nil {
		fmt.Fprintf(stderr, "paddock shell: %v\n", err)
		return 2
	}
	dir := Root
	if r.opts.Dir != "" && r.opts.Dir != "." {
		dir = path.Join(Root, r.opts.Dir)
		if fi, err := r.fsys.Stat(r.opts.Dir); err != nil || !fi.IsDir() {
			fmt.Fprintf(stderr, "paddock shell: %s is not a directory of the workspace\n", r.opts.Dir)
			return 2
		}
	}
	runner, err := interp.New(
		interp.StdIO(r.opts.Stdin, stdout, stderr),
		interp.Env(expand.ListEnviron(r.environ(dir)...)),
		interp.OpenHandler(r.open),
		interp.StatHandler(r.stat),
		interp.ReadDirHandler2(r.readDir),
		interp.AccessHandler(r.access),
		interp.CallHandler(r.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return r.builtin }),
	)
	if err != nil {
		fmt.Fprintf(stderr, "paddock shell: %v\n", err)
		return 2
	}
	// Set here rather than with interp.Dir, which checks the path on the
	// host.
	runner.Dir = dir
	err = runner.Run(ctx, file)
	if status, ok := errors.AsType[interp.ExitStatus](err); ok {
		return int(status)
	}
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "paddock shell: %v\n", err)
		}
		return 1
	}
	return 0
}

// environ is the run's whole environment: nothing of the daemon's.
func (r *run) environ(dir string) []string {
	env := []string{
		"HOME=" + Root, "PWD=" + dir, "PATH=/usr/bin:/bin", "USER=user", "LOGNAME=user",
		"SHELL=/bin/sh", "LANG=C.UTF-8", "UID=1000", "EUID=1000", "GID=1000",
	}
	keys := make([]string, 0, len(r.opts.Env))
	for k := range r.opts.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != "TMPDIR" {
			env = append(env, k+"="+r.opts.Env[k])
		}
	}
	// The interpreter opens paths in $TMPDIR named like its FIFOs on the
	// host itself, without the open handler: point it where no file can
	// ever be (fd numbers are never negative), so such an open fails.
	return append(env, "TMPDIR="+noTempDir)
}

// refuseHostReach refuses what would make the interpreter touch the host:
// process substitution makes FIFOs in a host directory.
func refuseHostReach(file *syntax.File) error {
	var err error
	syntax.Walk(file, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.ProcSubst); ok && err == nil {
			err = errors.New("process substitution (<(...), >(...)) is not supported by the shell executor: use a pipe or a file")
		}
		return err == nil
	})
	return err
}

// resolve maps a path of the shell to the workspace: ok is false for
// anything outside it (dev is true for /dev/null).
func resolve(dir, p string) (name string, ok, dev bool) {
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	p = path.Clean(p)
	switch {
	case p == "/dev/null":
		return "", false, true
	case p == Root:
		return ".", true, false
	case strings.HasPrefix(p, Root+"/"):
		return p[len(Root)+1:], true, false
	}
	return "", false, false
}

func notExist(op, p string) error { return &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist} }

func (r *run) open(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	name, ok, dev := resolve(interp.HandlerCtx(ctx).Dir, p)
	switch {
	case dev:
		return devNull{}, nil
	case !ok:
		return nil, notExist("open", p)
	}
	f, err := r.fsys.OpenFile(name, flag, perm)
	if err != nil {
		return nil, shellError(err, p)
	}
	return r.countWrites(f), nil
}

func (r *run) stat(ctx context.Context, p string, _ bool) (fs.FileInfo, error) {
	name, ok, dev := resolve(interp.HandlerCtx(ctx).Dir, p)
	switch {
	case dev:
		return devNullInfo{}, nil
	case !ok:
		return nil, notExist("stat", p)
	}
	fi, err := r.fsys.Stat(name)
	if err != nil {
		return nil, shellError(err, p)
	}
	return ownedInfo{fi}, nil
}

func (r *run) readDir(ctx context.Context, p string) ([]fs.DirEntry, error) {
	name, ok, _ := resolve(interp.HandlerCtx(ctx).Dir, p)
	if !ok {
		return nil, notExist("readdir", p)
	}
	ents, err := r.fsys.ReadDir(name)
	if err != nil {
		return nil, shellError(err, p)
	}
	return ents, nil
}

// access grants what the permission bits grant the owner: every file of
// the workspace belongs to the shell's user.
func (r *run) access(ctx context.Context, p string, mode interp.AccessMode) error {
	fi, err := r.stat(ctx, p, true)
	if err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if mode&interp.AccessRead != 0 && perm&0o400 == 0 ||
		mode&interp.AccessWrite != 0 && perm&0o200 == 0 ||
		mode&interp.AccessExec != 0 && perm&0o100 == 0 {
		return &fs.PathError{Op: "access", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

// call runs before every command: it measures the shell's memory and
// sends the builtins that would look at the host to this package's own.
func (r *run) call(ctx context.Context, args []string) ([]string, error) {
	if err := r.checkMemory(ctx, args); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return args, nil
	}
	switch args[0] {
	case "type", "hash":
		return append([]string{hostless + args[0]}, args[1:]...), nil
	case "command":
		if len(args) > 1 && (args[1] == "-v" || args[1] == "-V") {
			return append([]string{hostless + "type"}, args[1:]...), nil
		}
		if len(args) > 1 && args[1] == "-p" {
			args = args[1:]
		}
		return args[1:], nil
	case "pwd":
		return []string{"pwd"}, nil // -P would resolve symlinks on the host
	case "source", ".":
		// A name without a slash would be looked up in PATH on the host.
		if len(args) > 1 && !strings.Contains(args[1], "/") {
			args = append([]string{args[0], "./" + args[1]}, args[2:]...)
		}
	}
	return args, nil
}

// hostless prefixes the builtins that stand in for the interpreter's own.
const hostless = "\x00"

// checkMemory stops the run when the shell's variables, the builtins'
// output or the heap pass MaxMemory.
func (r *run) checkMemory(ctx context.Context, args []string) error {
	var size int64
	for _, a := range args {
		size += int64(len(a))
	}
	interp.HandlerCtx(ctx).Env.Each(func(_ string, v expand.Variable) bool {
		size += int64(len(v.Str))
		for _, s := range v.List {
			size += int64(len(s))
		}
		for _, s := range v.Map {
			size += int64(len(s))
		}
		return size <= r.opts.MaxMemory
	})
	over := size > r.opts.MaxMemory || r.produced.Load() > 4*r.opts.MaxMemory
	if !over && r.calls.Add(1)%256 == 0 {
		over = heapInUse() > r.heapBase+uint64(r.opts.MaxMemory)
	}
	if over {
		r.stop(StoppedMemory)
		return interp.ExitStatus(125)
	}
	return nil
}

// heapInUse is the process's live heap, in bytes.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// shellError words a file system error as a shell would.
func shellError(err error, p string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return err
}

// boundedWriters share one output budget between stdout and stderr.
type boundedWriters struct {
	r    *run
	mu   sync.Mutex
	left int64
}

func (b *boundedWriters) writer(w io.Writer) io.Writer { return &boundedWriter{b: b, w: w} }

type boundedWriter struct {
	b *boundedWriters
	w io.Writer
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	w.b.mu.Lock()
	n := int64(len(p))
	if n > w.b.left {
		n = w.b.left
	}
	w.b.left -= n
	w.b.mu.Unlock()
	if n > 0 {
		if _, err := w.w.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	if int(n) < len(p) {
		w.b.r.stop(StoppedOutput)
		return int(n), syscall.EPIPE
	}
	return len(p), nil
}

type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(p []byte) (int, error) { return len(p), nil }
func (devNull) Close() error                { return nil }

type devNullInfo struct{}

func (devNullInfo) Name() string       { return "null" }
func (devNullInfo) Size() int64        { return 0 }
func (devNullInfo) Mode() fs.FileMode  { return fs.ModeDevice | fs.ModeCharDevice | 0o666 }
func (devNullInfo) ModTime() time.Time { return time.Time{} }
func (devNullInfo) IsDir() bool        { return false }
func (devNullInfo) Sys() any           { return &syscall.Stat_t{Uid: 0, Gid: 0} }

// ownedInfo says every file belongs to the shell's user (uid 1000), for
// the interpreter's owner tests, which read Sys.
type ownedInfo struct{ fs.FileInfo }

func (ownedInfo) Sys() any { return &syscall.Stat_t{Uid: 1000, Gid: 1000} }

// countWrites counts what is written to a workspace file toward the
// builtins' production (a loop appending to a file is bounded by the
// quota too).
func (r *run) countWrites(f vfs.File) io.ReadWriteCloser { return &countedFile{File: f, r: r} }

type countedFile struct {
	vfs.File
	r *run
}

func (f *countedFile) Write(p []byte) (int, error) {
	f.r.produced.Add(int64(len(p)))
	return f.File.Write(p)
}
