// Package wjs is the JavaScript executor of workspaces: a program run by
// goja (an ECMAScript 5.1+ engine in Go) with a small Node-like API over
// the workspace's files (fs, console, process, require of "fs" only).
//
// The engine runs in a child process of the daemon (the daemon's own
// binary, started with ChildArg), never in the daemon: a program may loop
// inside a native function (JSON.stringify of something deep) where no
// interrupt reaches it, or recurse past any stack, and only a process can
// be stopped for certain and bounded in memory. The child has no file of
// the workspace and no host access: it asks the daemon for each file
// operation over a socket pair (proto.go), and the daemon performs it on
// the command's vfs.FS, which holds only the workspace. As root the daemon
// starts the child as nobody (65534), with no supplementary groups and
// no new privileges, an empty environment, and its death signal set; the
// engine itself offers no way to files, processes or the network.
//
// Bounds: time (the daemon kills the child at Options.Timeout; a CPU-time
// limit backs it), output (Options.MaxOutput of stdout and stderr
// together, counted by the daemon), memory (the child's heap is watched
// and the process ends past Options.MaxMemory; an address-space limit and
// a 64 MiB stack back it).
package wjs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// Root is where the workspace appears to a program.
const Root = "/workspace"

// ChildArg is the argument that makes the daemon's binary the executor's
// child (ChildMain) rather than anything else.
const ChildArg = "__paddock-workspace-js"

// Defaults of Options.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 16 << 20
	DefaultMaxMemory = 256 << 20
	// MaxSource bounds a program's text.
	MaxSource = 4 << 20
)

// Reasons a run was stopped (Result.Stopped): those of the shell executor.
const (
	StoppedTimeout = "timeout"
	StoppedOutput  = "output limit"
	StoppedMemory  = "memory limit"
)

// Options are one run's.
type Options struct {
	// Command starts the child: a binary and its arguments, the last of
	// which is ChildArg ("/proc/self/exe" and ChildArg in the daemon).
	Command []string
	// Source is the program's text, or File a workspace file holding it
	// (relative to Dir, or absolute under Root); Args are its arguments.
	Source string
	File   string
	Args   []string
	Stdin  []byte
	Stdout io.Writer
	Stderr io.Writer
	Env    map[string]string
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

// Run runs a program over fsys in a child process and waits for it.
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
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	r := &run{fsys: fsys, opts: opts, left: opts.MaxOutput}
	code, stopped := r.run(ctx)
	res := Result{ExitCode: code, Stopped: stopped, Duration: time.Since(start)}
	switch res.Stopped {
	case StoppedTimeout:
		res.ExitCode = 124
		fmt.Fprintf(opts.Stderr, "paddock: the program was stopped after %s\n", opts.Timeout)
	case StoppedOutput, StoppedMemory:
		res.ExitCode = 125
		fmt.Fprintf(opts.Stderr, "\npaddock: the program was stopped: %s\n", res.Stopped)
	}
	return res
}

type run struct {
	fsys vfs.FS
	opts Options
	// cwd is the absolute directory the program started in.
	cwd  string
	left int64
}

// fail reports a problem found before the program started (exit 2, as a
// shell's usage errors).
func (r *run) fail(format string, a ...any) (int, string) {
	fmt.Fprintf(r.opts.Stderr, "paddock js: "+format+"\n", a...)
	return 2, ""
}

func (r *run) run(ctx context.Context) (int, string) {
	if len(r.opts.Command) == 0 {
		return r.fail("this daemon has no JavaScript executor")
	}
	r.cwd = Root
	if r.opts.Dir != "" && r.opts.Dir != "." {
		r.cwd = path.Join(Root, r.opts.Dir)
		if fi, err := r.fsys.Stat(r.opts.Dir); err != nil || !fi.IsDir() {
			return r.fail("%s is not a directory of the workspace", r.opts.Dir)
		}
	}
	src := r.opts.Source
	file := ""
	if r.opts.File != "" {
		name, err := r.resolve(r.opts.File)
		if err != nil {
			return r.fail("%s: %v", r.opts.File, err)
		}
		fi, err := r.fsys.Stat(name)
		if err == nil && fi.Size() > MaxSource {
			err = fmt.Errorf("a program is at most %d bytes", MaxSource)
		}
		var b []byte
		if err == nil {
			b, err = r.fsys.ReadFile(name)
		}
		if err != nil {
			return r.fail("%s: %v", r.opts.File, err)
		}
		src, file = string(b), path.Join(Root, name)
	} else if len(src) > MaxSource {
		return r.fail("a program is at most %d bytes", MaxSource)
	}

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return r.fail("socket pair: %v", err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "wjs"), os.NewFile(uintptr(pair[1]), "wjs-child")
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return r.fail("socket: %v", err)
	}
	defer conn.Close()
	cmd := exec.Command(r.opts.Command[0], r.opts.Command[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	diag := &capped{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = io.Discard, diag
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return r.fail("start the JavaScript engine: %v", err)
	}
	theirs.Close()

	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var stopped string
	stop := func(reason string) {
		if stopped == "" {
			stopped = reason
		}
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Process.Kill()
	}
	done := make(chan struct{})
	timedOut := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			_ = cmd.Process.Kill()
			close(timedOut)
		case <-done:
		}
	}()
	err = writeFrame(conn, start{
		Source: src, File: file, Args: r.opts.Args, Env: r.opts.Env, Cwd: r.cwd,
		MaxMemory: r.opts.MaxMemory, TimeoutMs: r.opts.Timeout.Milliseconds(),
	}, r.opts.Stdin)
	if err == nil {
		if reason := r.serve(conn); reason != "" {
			stop(reason)
		}
	}
	werr := cmd.Wait()
	close(done)
	select {
	case <-timedOut:
		if stopped == "" {
			stopped = StoppedTimeout
		}
	default:
	}
	if stopped != "" {
		return 0, stopped
	}
	var exit *exec.ExitError
	if !errors.As(werr, &exit) {
		if werr != nil {
			return r.fail("the JavaScript engine: %v", werr)
		}
		return 0, ""
	}
	said := diag.String()
	if strings.Contains(said, memoryMark) || strings.Contains(said, "stack exceeds") || strings.Contains(said, "out of memory") {
		return 0, StoppedMemory
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL {
			return 0, StoppedTimeout
		}
		return r.fail("the JavaScript engine ended by %v: %s", ws.Signal(), strings.TrimSpace(said))
	}
	if exit.ExitCode() == engineFailed {
		return r.fail("the JavaScript engine failed: %s", strings.TrimSpace(said))
	}
	return exit.ExitCode(), ""
}

// serve answers the child's calls until it closes its end; it returns a
// reason to stop the child, or "".
func (r *run) serve(conn net.Conn) string {
	for {
		var c request
		data, err := readFrame(conn, &c)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ""
			}
			// A child that breaks the protocol is stopped; its exit
			// status says the rest.
			return ""
		}
		rep, out := r.do(c, data)
		if rep.Stop {
			_ = writeFrame(conn, rep, nil)
			return StoppedOutput
		}
		if err := writeFrame(conn, rep, out); err != nil {
			return ""
		}
	}
}

// do performs one call.
func (r *run) do(c request, data []byte) (reply, []byte) {
	if c.Op == opOut {
		w := r.opts.Stdout
		if c.FD == 2 {
			w = r.opts.Stderr
		}
		n := int64(len(data))
		if n > r.left {
			n = r.left
		}
		r.left -= n
		_, _ = w.Write(data[:n])
		if int(n) < len(data) {
			return reply{Stop: true}, nil
		}
		return reply{}, nil
	}
	name, err := r.resolve(c.Path)
	if err != nil {
		return errReply(err), nil
	}
	var rep reply
	var out []byte
	switch c.Op {
	case opRead:
		out, err = r.fsys.ReadFile(name)
	case opWrite:
		err = r.write(name, data, c.Append)
	case opStat:
		var fi fs.FileInfo
		if fi, err = r.fsys.Stat(name); err == nil {
			rep.Stat = &statInfo{Size: fi.Size(), Dir: fi.IsDir(), Mode: uint32(fi.Mode().Perm()), MtimeMs: fi.ModTime().UnixMilli()}
		}
	case opReadDir:
		var ents []fs.DirEntry
		if ents, err = r.fsys.ReadDir(name); err == nil {
			rep.Entries = make([]dirEntry, len(ents))
			for i, e := range ents {
				rep.Entries[i] = dirEntry{Name: e.Name(), Dir: e.IsDir()}
			}
		}
	case opMkdir:
		if c.Recursive {
			err = vfs.MkdirAll(r.fsys, name)
		} else {
			err = r.fsys.Mkdir(name, 0o755)
		}
	case opRemove:
		err = r.remove(name, c.Recursive, c.Force, c.Dir)
	case opRename, opCopy:
		var to string
		if to, err = r.resolve(c.To); err == nil {
			if c.Op == opRename {
				err = r.fsys.Rename(name, to)
			} else {
				var b []byte
				if b, err = r.fsys.ReadFile(name); err == nil {
					err = r.write(to, b, false)
				}
			}
		}
	case opChmod:
		err = r.fsys.Chmod(name, fs.FileMode(c.Mode)&fs.ModePerm)
	default:
		err = fmt.Errorf("unknown operation %q: %w", c.Op, fs.ErrInvalid)
	}
	if err != nil {
		return errReply(err), nil
	}
	return rep, out
}

func (r *run) write(name string, data []byte, appendTo bool) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := r.fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *run) remove(name string, recursive, force, dir bool) error {
	if name == "." {
		return &fs.PathError{Op: "rm", Path: Root, Err: fs.ErrPermission}
	}
	fi, err := r.fsys.Stat(name)
	switch {
	case err != nil && force && errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir() && recursive:
		return vfs.RemoveAll(r.fsys, name)
	case fi.IsDir() && !dir:
		return &fs.PathError{Op: "rm", Path: name, Err: vfs.ErrIsDir}
	case !fi.IsDir() && dir:
		return &fs.PathError{Op: "rmdir", Path: name, Err: vfs.ErrNotDir}
	}
	return r.fsys.Remove(name)
}

// errOutside: a program named a path outside the workspace.
var errOutside = errors.New("outside the workspace")

// resolve turns a program's path (relative to its directory, or absolute)
// into the workspace's; every path outside Root is refused.
func (r *run) resolve(p string) (string, error) {
	if p == "" || len(p) > 4096 || strings.IndexByte(p, 0) >= 0 {
		return "", &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	abs := p
	if !strings.HasPrefix(p, "/") {
		abs = path.Join(r.cwd, p)
	}
	abs = path.Clean(abs)
	if abs == Root {
		return ".", nil
	}
	if !strings.HasPrefix(abs, Root+"/") {
		return "", &fs.PathError{Op: "open", Path: p, Err: errOutside}
	}
	return strings.TrimPrefix(abs, Root+"/"), nil
}

// errReply names err by Node's error code.
func errReply(err error) reply {
	code := "EIO"
	for _, m := range []struct {
		err  error
		code string
	}{
		// ENOTEMPTY before EEXIST: syscall.ENOTEMPTY is fs.ErrExist too.
		{vfs.ErrNotEmpty, "ENOTEMPTY"}, {fs.ErrNotExist, "ENOENT"}, {fs.ErrExist, "EEXIST"}, {vfs.ErrNotDir, "ENOTDIR"},
		{vfs.ErrIsDir, "EISDIR"}, {vfs.ErrQuota, "EDQUOT"}, {vfs.ErrFileTooLarge, "EFBIG"},
		{errOutside, "EACCES"}, {fs.ErrPermission, "EPERM"}, {fs.ErrInvalid, "EINVAL"},
	} {
		if errors.Is(err, m.err) {
			code = m.code
			break
		}
	}
	return reply{Code: code, Err: err.Error()}
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		if len(p) > room {
			c.Buffer.Write(p[:room])
		} else {
			c.Buffer.Write(p)
		}
	}
	return len(p), nil
}
