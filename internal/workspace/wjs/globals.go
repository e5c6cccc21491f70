package wjs

import (
	"os"
	"path"
	"sort"
	"strings"

	"github.com/dop251/goja"
)

// install gives the program its globals: console, process, fs (also by
// require("fs")) and path (require("path")).
func (c *child) install() {
	vm := c.vm
	fsObj := c.fsModule()
	pathObj := c.pathModule()
	console := vm.NewObject()
	for _, m := range []struct {
		name string
		fd   int
	}{{"log", 1}, {"info", 1}, {"debug", 1}, {"error", 2}, {"warn", 2}} {
		fd := m.fd
		_ = console.Set(m.name, func(call goja.FunctionCall) goja.Value {
			c.write(fd, c.format(call.Arguments)+"\n")
			return goja.Undefined()
		})
	}
	_ = vm.Set("console", console)
	_ = vm.Set("fs", fsObj)
	_ = vm.Set("require", func(name string) *goja.Object {
		switch strings.TrimPrefix(name, "node:") {
		case "fs":
			return fsObj
		case "path":
			return pathObj
		}
		panic(c.vm.NewGoError(errNoModule(name)))
	})

	process := vm.NewObject()
	argv := []string{"paddock-js", c.st.File}
	if c.st.File == "" {
		argv = argv[:1]
	}
	_ = process.Set("argv", append(argv, c.st.Args...))
	env := vm.NewObject()
	keys := make([]string, 0, len(c.st.Env))
	for k := range c.st.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_ = env.Set(k, c.st.Env[k])
	}
	_ = process.Set("env", env)
	_ = process.Set("platform", "linux")
	_ = process.Set("cwd", func() string { return c.cwd })
	_ = process.Set("chdir", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		rep, _ := c.fsCall(call0(opStat, p), nil, p)
		if rep.Stat == nil || !rep.Stat.Dir {
			panic(c.nodeError("ENOTDIR", "chdir", p))
		}
		c.cwd = p
		return goja.Undefined()
	})
	_ = process.Set("exit", func(call goja.FunctionCall) goja.Value {
		code := 0
		if v := call.Argument(0); !goja.IsUndefined(v) {
			code = int(v.ToInteger())
		} else if v := process.Get("exitCode"); v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
			code = int(v.ToInteger())
		}
		c.flush()
		os.Exit(code & 0xff)
		return nil
	})
	for fd, name := range map[int]string{1: "stdout", 2: "stderr"} {
		stream := vm.NewObject()
		_ = stream.Set("write", func(call goja.FunctionCall) goja.Value {
			c.write(fd, string(c.bytesOf(call.Argument(0))))
			return vm.ToValue(true)
		})
		_ = process.Set(name, stream)
	}
	_ = vm.Set("process", process)
}

func errNoModule(name string) error {
	return &moduleError{name: name}
}

type moduleError struct{ name string }

func (e *moduleError) Error() string {
	return "Cannot find module '" + e.name + "': the js executor has fs and path only (run programs that need more on the container executor)"
}

func call0(op, p string) request { return request{Op: op, Path: p} }

// format joins console arguments as Node shows them, near enough:
// strings as they are, errors by their stack, other objects as JSON.
func (c *child) format(args []goja.Value) string {
	parts := make([]string, len(args))
	stringify, _ := goja.AssertFunction(c.vm.Get("JSON").ToObject(c.vm).Get("stringify"))
	for i, a := range args {
		switch {
		case goja.IsUndefined(a):
			parts[i] = "undefined"
		case goja.IsNull(a):
			parts[i] = "null"
		default:
			o, isObj := a.(*goja.Object)
			if !isObj {
				parts[i] = a.String()
				continue
			}
			if _, fn := goja.AssertFunction(a); fn {
				parts[i] = "[Function]"
				continue
			}
			if st := o.Get("stack"); st != nil && !goja.IsUndefined(st) {
				parts[i] = st.String()
				continue
			}
			if s, err := stringify(goja.Undefined(), a); err == nil && !goja.IsUndefined(s) {
				parts[i] = s.String()
			} else {
				parts[i] = a.String()
			}
		}
	}
	return strings.Join(parts, " ")
}

// fsModule is the fs object: Node's synchronous functions (readFileSync
// and the rest); the same without Sync, which call a callback given last
// as (err, result) once the current code has run (from the event loop,
// as Node does); and fs.promises, whose functions return promises. All
// of them do the work at once: a file operation is one call to the
// daemon.
func (c *child) fsModule() *goja.Object {
	vm := c.vm
	fsObj := vm.NewObject()
	promises := vm.NewObject()
	_ = fsObj.Set("promises", promises)
	// try runs fn, returning what it threw as a JavaScript value.
	try := func(fn func(call goja.FunctionCall) goja.Value, call goja.FunctionCall) (res, thrown goja.Value) {
		defer func() {
			if r := recover(); r != nil {
				v, ok := r.(goja.Value)
				if !ok {
					panic(r)
				}
				thrown = v
			}
		}()
		return fn(call), nil
	}
	def := func(name string, fn func(call goja.FunctionCall) goja.Value) {
		_ = fsObj.Set(name+"Sync", fn)
		_ = fsObj.Set(name, func(call goja.FunctionCall) goja.Value {
			n := len(call.Arguments)
			if n == 0 {
				return fn(call)
			}
			cb, ok := goja.AssertFunction(call.Arguments[n-1])
			if !ok {
				return fn(call)
			}
			res, thrown := try(fn, goja.FunctionCall{This: call.This, Arguments: call.Arguments[:n-1]})
			if thrown != nil {
				c.immediate(cb, []goja.Value{thrown})
			} else {
				c.immediate(cb, []goja.Value{goja.Null(), res})
			}
			return goja.Undefined()
		})
		_ = promises.Set(name, func(call goja.FunctionCall) goja.Value {
			p, resolve, reject := vm.NewPromise()
			if res, thrown := try(fn, call); thrown != nil {
				_ = reject(thrown)
			} else {
				_ = resolve(res)
			}
			return vm.ToValue(p)
		})
	}
	def("readFile", func(call goja.FunctionCall) goja.Value {
		arg := call.Argument(0)
		enc := call.Argument(1)
		if o := option(enc, "encoding"); o != nil {
			enc = o
		}
		var data []byte
		if n, ok := arg.Export().(int64); (ok && n == 0) || arg.String() == "/dev/stdin" {
			data = c.stdin
		} else {
			p := c.abs(c.pathArg(call, 0))
			_, data = c.fsCall(call0(opRead, p), nil, p)
		}
		if goja.IsNull(enc) || (!goja.IsUndefined(enc) && (enc.String() == "binary" || enc.String() == "bytes")) {
			return c.uint8Array(data)
		}
		return vm.ToValue(string(data))
	})
	writeLike := func(appendTo bool) func(call goja.FunctionCall) goja.Value {
		return func(call goja.FunctionCall) goja.Value {
			p := c.abs(c.pathArg(call, 0))
			c.fsCall(request{Op: opWrite, Path: p, Append: appendTo || option(call.Argument(2), "flag") != nil && option(call.Argument(2), "flag").String() == "a"}, c.bytesOf(call.Argument(1)), p)
			return goja.Undefined()
		}
	}
	def("writeFile", writeLike(false))
	def("appendFile", writeLike(true))
	def("exists", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		rep, _, err := c.call(call0(opStat, p), nil)
		return vm.ToValue(err == nil && rep.Code == "")
	})
	def("stat", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		rep, _ := c.fsCall(call0(opStat, p), nil, p)
		return c.statObject(rep.Stat)
	})
	_ = fsObj.Set("lstatSync", fsObj.Get("statSync"))
	_ = fsObj.Set("lstat", fsObj.Get("stat"))
	_ = promises.Set("lstat", promises.Get("stat"))
	def("readdir", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		rep, _ := c.fsCall(call0(opReadDir, p), nil, p)
		if truthy(option(call.Argument(1), "withFileTypes")) {
			out := make([]any, len(rep.Entries))
			for i, e := range rep.Entries {
				dir := e.Dir
				o := vm.NewObject()
				_ = o.Set("name", e.Name)
				_ = o.Set("isDirectory", func() bool { return dir })
				_ = o.Set("isFile", func() bool { return !dir })
				out[i] = o
			}
			return vm.ToValue(out)
		}
		names := make([]string, len(rep.Entries))
		for i, e := range rep.Entries {
			names[i] = e.Name
		}
		return vm.ToValue(names)
	})
	def("mkdir", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		c.fsCall(request{Op: opMkdir, Path: p, Recursive: truthy(option(call.Argument(1), "recursive"))}, nil, p)
		return goja.Undefined()
	})
	def("rm", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		opt := call.Argument(1)
		c.fsCall(request{Op: opRemove, Path: p, Recursive: truthy(option(opt, "recursive")), Force: truthy(option(opt, "force"))}, nil, p)
		return goja.Undefined()
	})
	def("rmdir", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		c.fsCall(request{Op: opRemove, Path: p, Dir: true, Recursive: truthy(option(call.Argument(1), "recursive"))}, nil, p)
		return goja.Undefined()
	})
	def("unlink", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		c.fsCall(call0(opRemove, p), nil, p)
		return goja.Undefined()
	})
	def("rename", func(call goja.FunctionCall) goja.Value {
		p, to := c.abs(c.pathArg(call, 0)), c.abs(c.pathArg(call, 1))
		c.fsCall(request{Op: opRename, Path: p, To: to}, nil, p)
		return goja.Undefined()
	})
	def("copyFile", func(call goja.FunctionCall) goja.Value {
		p, to := c.abs(c.pathArg(call, 0)), c.abs(c.pathArg(call, 1))
		c.fsCall(request{Op: opCopy, Path: p, To: to}, nil, p)
		return goja.Undefined()
	})
	def("chmod", func(call goja.FunctionCall) goja.Value {
		p := c.abs(c.pathArg(call, 0))
		c.fsCall(request{Op: opChmod, Path: p, Mode: uint32(call.Argument(1).ToInteger())}, nil, p)
		return goja.Undefined()
	})
	return fsObj
}

func (c *child) statObject(st *statInfo) goja.Value {
	o := c.vm.NewObject()
	_ = o.Set("size", st.Size)
	_ = o.Set("mode", st.Mode)
	_ = o.Set("mtimeMs", st.MtimeMs)
	if d, err := c.vm.New(c.vm.Get("Date"), c.vm.ToValue(st.MtimeMs)); err == nil {
		_ = o.Set("mtime", d)
	}
	dir := st.Dir
	_ = o.Set("isDirectory", func() bool { return dir })
	_ = o.Set("isFile", func() bool { return !dir })
	_ = o.Set("isSymbolicLink", func() bool { return false })
	return o
}

func (c *child) uint8Array(b []byte) goja.Value {
	v, err := c.vm.New(c.vm.Get("Uint8Array"), c.vm.ToValue(c.vm.NewArrayBuffer(b)))
	if err != nil {
		panic(err)
	}
	return v
}

// pathModule is require("path"): POSIX paths, resolved against the
// program's directory.
func (c *child) pathModule() *goja.Object {
	vm := c.vm
	p := vm.NewObject()
	_ = p.Set("sep", "/")
	_ = p.Set("delimiter", ":")
	_ = p.Set("join", func(parts ...string) string {
		j := path.Join(parts...)
		if j == "" {
			return "."
		}
		return j
	})
	_ = p.Set("normalize", func(s string) string { return path.Clean(s) })
	_ = p.Set("dirname", func(s string) string { return path.Dir(s) })
	_ = p.Set("basename", func(s string, ext ...string) string {
		b := path.Base(s)
		if len(ext) > 0 && ext[0] != b {
			b = strings.TrimSuffix(b, ext[0])
		}
		return b
	})
	_ = p.Set("extname", func(s string) string {
		b := path.Base(s)
		if strings.HasPrefix(b, ".") && strings.Count(b, ".") == 1 {
			return ""
		}
		return path.Ext(b)
	})
	_ = p.Set("isAbsolute", func(s string) bool { return strings.HasPrefix(s, "/") })
	_ = p.Set("resolve", func(parts ...string) string {
		r := c.cwd
		for _, s := range parts {
			if strings.HasPrefix(s, "/") {
				r = s
			} else {
				r = path.Join(r, s)
			}
		}
		return path.Clean(r)
	})
	_ = p.Set("relative", func(from, to string) string {
		from, to = c.abs(from), c.abs(to)
		fp, tp := strings.Split(strings.Trim(from, "/"), "/"), strings.Split(strings.Trim(to, "/"), "/")
		i := 0
		for i < len(fp) && i < len(tp) && fp[i] == tp[i] {
			i++
		}
		var out []string
		for range fp[i:] {
			out = append(out, "..")
		}
		return strings.Join(append(out, tp[i:]...), "/")
	})
	_ = p.Set("posix", p)
	return p
}
