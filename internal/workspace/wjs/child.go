package wjs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/dop251/goja"
	"golang.org/x/sys/unix"
)

// memoryMark is what the child writes on its own stderr (which programs
// cannot write to) when its heap passed the bound.
const memoryMark = "wjs: memory limit"

// engineFailed is the child's exit code when it could not run a program
// at all (a broken start frame).
const engineFailed = 90

// maxStack bounds the child's Go stack (a native function recursing on
// a deep value): past it the Go runtime ends the process.
const maxStack = 64 << 20

// maxCallDepth bounds a program's own recursion (a RangeError it can
// catch, as in Node).
const maxCallDepth = 10000

// flushAt is how much output the child gathers before sending it.
const flushAt = 64 << 10

// ChildMain is the executor's child: it reads the start frame from fd 3,
// bounds itself, runs the program and exits with its exit code. It never
// returns.
func ChildMain() {
	conn := os.NewFile(3, "wjs")
	var st start
	stdin, err := readFrame(conn, &st)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read the start frame: %v\n", err)
		os.Exit(engineFailed)
	}
	bound(st)
	c := &child{conn: conn, st: st, stdin: stdin, cwd: st.Cwd}
	os.Exit(c.run())
}

// bound sets the child's limits before any of the program runs.
func bound(st start) {
	_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	cpu := uint64(st.TimeoutMs/1000 + 2)
	_ = unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: cpu})
	if !raceEnabled {
		as := uint64(st.MaxMemory)*2 + 2<<30
		_ = unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: as, Max: as})
	}
	for _, r := range []int{unix.RLIMIT_CORE, unix.RLIMIT_FSIZE} {
		_ = unix.Setrlimit(r, &unix.Rlimit{})
	}
	_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 16, Max: 16})
	debug.SetMaxStack(maxStack)
	debug.SetMemoryLimit(st.MaxMemory)
	go watchHeap(st.MaxMemory)
}

// watchHeap ends the process once its heap passes max: the program may be
// inside a native function no interrupt reaches.
func watchHeap(max int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && int64(s[0].Value.Uint64()) > max {
			fmt.Fprintln(os.Stderr, memoryMark)
			os.Exit(3)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type child struct {
	conn  *os.File
	st    start
	stdin []byte
	cwd   string
	vm    *goja.Runtime
	out   [3][]byte
	loop  loop
}

func (c *child) run() int {
	c.vm = goja.New()
	c.vm.SetMaxCallStackSize(maxCallDepth)
	c.install()
	c.installLoop()
	name := c.st.File
	if name == "" {
		name = "[eval]"
	}
	prog, err := goja.Compile(name, c.st.Source, false)
	if err == nil {
		_, err = c.vm.RunProgram(prog)
	}
	if err == nil {
		err = c.runLoop()
	}
	code := 0
	if err != nil {
		var ex *goja.Exception
		var deep *goja.StackOverflowError
		var rej *rejection
		if errors.As(err, &rej) {
			c.write(2, rej.Error()+"\n")
		} else if errors.As(err, &deep) {
			c.write(2, "Uncaught RangeError: Maximum call stack size exceeded\n")
		} else if errors.As(err, &ex) {
			c.write(2, "Uncaught "+ex.String()+"\n")
		} else {
			c.write(2, err.Error()+"\n")
		}
		code = 1
	} else if v := c.vm.Get("process").ToObject(c.vm).Get("exitCode"); v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
		code = int(v.ToInteger())
	}
	c.flush()
	return code & 0xff
}

// write gathers output for fd (1 or 2).
func (c *child) write(fd int, s string) {
	c.out[fd] = append(c.out[fd], s...)
	if len(c.out[fd]) >= flushAt {
		c.flushFD(fd)
	}
}

func (c *child) flush() {
	c.flushFD(1)
	c.flushFD(2)
}

func (c *child) flushFD(fd int) {
	if len(c.out[fd]) == 0 {
		return
	}
	data := c.out[fd]
	c.out[fd] = nil
	if _, _, err := c.call(request{Op: opOut, FD: fd}, data); err != nil {
		os.Exit(engineFailed)
	}
}

// call sends one call and waits for its reply; a reply that says stop
// ends the process (the daemon is ending it anyway).
func (c *child) call(cl request, data []byte) (reply, []byte, error) {
	if err := writeFrame(c.conn, cl, data); err != nil {
		return reply{}, nil, err
	}
	var rep reply
	out, err := readFrame(c.conn, &rep)
	if err != nil {
		return reply{}, nil, err
	}
	if rep.Stop {
		os.Exit(engineFailed)
	}
	return rep, out, nil
}

// fsCall performs a file operation for the program, throwing a Node-like
// error (with code and path) when it fails.
func (c *child) fsCall(cl request, data []byte, shown string) (reply, []byte) {
	rep, out, err := c.call(cl, data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "the daemon's end: %v\n", err)
		os.Exit(engineFailed)
	}
	if rep.Code != "" {
		panic(c.nodeError(rep.Code, cl.Op, shown))
	}
	return rep, out
}

var codeText = map[string]string{
	"ENOENT": "no such file or directory", "EEXIST": "file already exists", "ENOTDIR": "not a directory",
	"EISDIR": "illegal operation on a directory", "ENOTEMPTY": "directory not empty",
	"EDQUOT": "the workspace's quota is reached", "EFBIG": "file too large",
	"EACCES": "permission denied: outside the workspace", "EPERM": "operation not permitted",
	"EINVAL": "invalid argument", "EIO": "i/o error",
}

func (c *child) nodeError(code, op, p string) *goja.Object {
	text := codeText[code]
	if text == "" {
		text = "error"
	}
	e, err := c.vm.New(c.vm.Get("Error"), c.vm.ToValue(fmt.Sprintf("%s: %s, %s '%s'", code, text, op, p)))
	if err != nil {
		panic(err)
	}
	_ = e.Set("code", code)
	_ = e.Set("syscall", op)
	_ = e.Set("path", p)
	return e
}

// abs makes a program's path absolute against its directory.
func (c *child) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(c.cwd, p)
}

func (c *child) throw(format string, a ...any) {
	panic(c.vm.NewTypeError(fmt.Sprintf(format, a...)))
}

// pathArg is argument i as a path.
func (c *child) pathArg(call goja.FunctionCall, i int) string {
	v := call.Argument(i)
	if goja.IsUndefined(v) || goja.IsNull(v) {
		c.throw("the \"path\" argument must be a string")
	}
	return v.String()
}

// bytesOf is a value to write: a string, an ArrayBuffer or a view of one.
func (c *child) bytesOf(v goja.Value) []byte {
	if o, ok := v.(*goja.Object); ok {
		if ab, ok := o.Export().(goja.ArrayBuffer); ok {
			return ab.Bytes()
		}
		if buf, ok := o.Get("buffer").Export().(goja.ArrayBuffer); ok {
			off, n := o.Get("byteOffset").ToInteger(), o.Get("byteLength").ToInteger()
			b := buf.Bytes()
			if off >= 0 && n >= 0 && off+n <= int64(len(b)) {
				return b[off : off+n]
			}
		}
	}
	return []byte(v.String())
}

// option reads a boolean or string field of an options argument.
func option(v goja.Value, field string) goja.Value {
	if o, ok := v.(*goja.Object); ok {
		return o.Get(field)
	}
	return nil
}

func truthy(v goja.Value) bool { return v != nil && v.ToBoolean() }
