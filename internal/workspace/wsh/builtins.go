package wsh

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

var (
	errNotDir   = vfs.ErrNotDir
	errIsDir    = vfs.ErrIsDir
	errNotEmpty = vfs.ErrNotEmpty
)

// call is one builtin's invocation.
type call struct {
	r      *run
	ctx    context.Context
	name   string
	args   []string
	dir    string
	env    expand.Environ
	stdin  io.Reader
	stdout *bufio.Writer
	stderr io.Writer
}

type tool func(c *call) int

// tools are the builtins, by name; init fills it (some tools call others).
var tools map[string]tool

func init() {
	tools = map[string]tool{
		"basename": basename, "cat": cat, "chmod": chmod, "cp": cp, "cut": cut, "diff": diff, "dirname": dirname,
		"env": env, "find": find, "grep": grep, "head": head, "ls": ls, "mkdir": mkdir, "mv": mv, "nl": nl,
		"paste": paste, "rev": rev, "rm": rm, "rmdir": rmdir, "sed": sed, "seq": seq, "sleep": sleep, "sort": sortTool,
		"tail": tail, "tee": tee, "touch": touch, "tr": tr, "uniq": uniq, "wc": wc, "xargs": xargs,
		hostless + "type": typeTool, hostless + "hash": hashTool,
	}
}

// interpreterBuiltins are what the interpreter itself runs (a subset of
// interp's builtins that agents use; all of them need no host).
var interpreterBuiltins = []string{
	":", ".", "[", "alias", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit", "export", "false",
	"getopts", "hash", "local", "printf", "pwd", "read", "readonly", "return", "set", "shift", "source", "test",
	"trap", "true", "type", "unalias", "unset", "wait",
}

// Builtins lists every command the shell executor runs, sorted.
func Builtins() []string {
	var out []string
	for n := range tools {
		if !strings.HasPrefix(n, hostless) {
			out = append(out, n)
		}
	}
	out = append(out, interpreterBuiltins...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Needs parses script and lists the commands it runs that the shell
// executor does not have; a command whose name is computed when it runs
// is listed as its source text.
func Needs(script string) ([]string, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, n := range Builtins() {
		have[n] = true
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		if f, ok := n.(*syntax.FuncDecl); ok {
			have[f.Name.Value] = true
		}
		return true
	})
	var missing []string
	syntax.Walk(file, func(n syntax.Node) bool {
		ce, ok := n.(*syntax.CallExpr)
		if !ok || len(ce.Args) == 0 {
			return true
		}
		name := ce.Args[0].Lit()
		if name == "" {
			// A name computed when the command runs: no telling.
			var b strings.Builder
			syntax.NewPrinter().Print(&b, ce.Args[0])
			missing = append(missing, b.String())
		} else if !have[name] {
			missing = append(missing, name)
		}
		for _, word := range commandWords(ce) {
			if !have[word] {
				missing = append(missing, word)
			}
		}
		return true
	})
	slices.Sort(missing)
	return slices.Compact(missing), nil
}

// commandWords are the commands a call runs through another command:
// xargs CMD, env CMD, exec CMD, command CMD.
func commandWords(ce *syntax.CallExpr) []string {
	var out []string
	for i := 0; i < len(ce.Args)-1; i++ {
		switch ce.Args[i].Lit() {
		case "command":
			if v := ce.Args[i+1].Lit(); v == "-v" || v == "-V" {
				return out // a lookup, not a run
			}
		case "xargs", "env", "exec":
		default:
			return out
		}
		j := i + 1
		for j < len(ce.Args) {
			w := ce.Args[j].Lit()
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
				j++
				if w == "-n" || w == "-I" || w == "-d" {
					j++
				}
				continue
			}
			break
		}
		if j < len(ce.Args) && ce.Args[j].Lit() != "" {
			out = append(out, ce.Args[j].Lit())
		}
		i = j - 1
	}
	return out
}

// builtin is the interpreter's exec handler: every command that is not
// the interpreter's own comes here.
func (r *run) builtin(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	out := bufio.NewWriterSize(&countingWriter{w: hc.Stdout, r: r}, 32<<10)
	c := &call{r: r, ctx: ctx, name: args[0], args: args[1:], dir: hc.Dir, env: hc.Env, stdin: hc.Stdin, stdout: out, stderr: hc.Stderr}
	code := c.run(args)
	if err := out.Flush(); err != nil && code == 0 {
		c.errf("write error: %s", errText(err))
		code = 1
	}
	if code != 0 {
		return interp.ExitStatus(uint8(code))
	}
	return nil
}

// run runs args as a builtin in c's context (also for xargs and env).
func (c *call) run(args []string) int {
	t, ok := tools[args[0]]
	if !ok {
		name := strings.TrimPrefix(args[0], hostless)
		fmt.Fprintf(c.stderr, "%s: command not found (the shell executor has no %s; run it with --executor container)\n", name, name)
		return 127
	}
	if err := c.ctx.Err(); err != nil {
		return 1
	}
	sub := *c
	sub.name, sub.args = strings.TrimPrefix(args[0], hostless), args[1:]
	return t(&sub)
}

// countingWriter counts the builtins' output toward the memory bound.
type countingWriter struct {
	w io.Writer
	r *run
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.r.produced.Add(int64(len(p))) > 4*w.r.opts.MaxMemory {
		w.r.stop(StoppedMemory)
		return 0, errors.New("memory limit")
	}
	return w.w.Write(p)
}

// errf reports an error of the builtin on stderr, as "name: message".
func (c *call) errf(format string, args ...any) {
	fmt.Fprintf(c.stderr, c.name+": "+format+"\n", args...)
}

// fail reports err about p and returns status.
func (c *call) fail(status int, p string, err error) int {
	c.errf("%s: %s", p, errText(err))
	return status
}

// errText is an error as coreutils words it.
func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "File exists"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	case errors.Is(err, os.ErrInvalid):
		return "Invalid argument"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(pe.Err, errNotDir):
			return "Not a directory"
		case errors.Is(pe.Err, errIsDir):
			return "Is a directory"
		case errors.Is(pe.Err, errNotEmpty):
			return "Directory not empty"
		}
		return pe.Err.Error()
	}
	return err.Error()
}

// path resolves a path argument to the workspace.
func (c *call) path(p string) (string, error) {
	name, ok, _ := resolve(c.dir, p)
	if !ok {
		return "", notExist("open", p)
	}
	return name, nil
}

// readAll reads a file argument ("-" is stdin), bounded by MaxMemory.
func (c *call) readAll(p string) ([]byte, error) {
	var b []byte
	var err error
	if p == "-" {
		b, err = io.ReadAll(io.LimitReader(c.stdin, c.r.opts.MaxMemory+1))
	} else {
		name, ok, dev := resolve(c.dir, p)
		switch {
		case dev:
			return nil, nil
		case !ok:
			return nil, notExist("open", p)
		}
		// The workspace's own bytes, not copied: builtins only read them.
		b, err = c.r.fsys.ReadFile(name)
	}
	if int64(len(b)) > c.r.opts.MaxMemory {
		c.r.stop(StoppedMemory)
		return nil, errors.New("input past the memory limit")
	}
	return b, err
}

// inputs reads each file operand (stdin when there is none) and calls fn;
// it returns 1 if any could not be read.
func (c *call) inputs(files []string, fn func(name string, data []byte)) int {
	if len(files) == 0 {
		files = []string{"-"}
	}
	status := 0
	for _, f := range files {
		data, err := c.readAll(f)
		if err != nil {
			status = c.fail(1, f, err)
			continue
		}
		fn(f, data)
	}
	return status
}

// lines splits data into lines without their newlines (a last line
// without one counts).
func lines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}

// writeFile replaces a file of the workspace.
func (c *call) writeFile(p string, data []byte, perm fs.FileMode) error {
	name, err := c.path(p)
	if err != nil {
		return err
	}
	f, err := c.r.fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	c.r.produced.Add(int64(len(data)))
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// flags parses short options: valued lists the letters that take a
// value. It stops at "--" or the first operand. Long options are left
// to the tool, in long.
type flags struct {
	set      map[byte]bool
	val      map[byte][]string
	long     []string
	operands []string
}

func parseFlags(args []string, valued string) (*flags, error) {
	f := &flags{set: map[byte]bool{}, val: map[byte][]string{}}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if strings.HasPrefix(a, "--") {
			f.long = append(f.long, a)
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			ch := a[j]
			if strings.IndexByte(valued, ch) >= 0 {
				v := a[j+1:]
				if v == "" {
					if i+1 >= len(args) {
						return nil, fmt.Errorf("option requires an argument -- '%c'", ch)
					}
					i++
					v = args[i]
				}
				f.val[ch] = append(f.val[ch], v)
				f.set[ch] = true
				break
			}
			f.set[ch] = true
		}
	}
	f.operands = args[i:]
	return f, nil
}

// last returns the last value of a valued flag, or def.
func (f *flags) last(ch byte, def string) string {
	if v := f.val[ch]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

func (c *call) usage(err error) int {
	c.errf("%v", err)
	return 2
}

func cat(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	n := 0
	return c.inputs(f.operands, func(_ string, data []byte) {
		if !f.set['n'] {
			c.stdout.Write(data)
			return
		}
		for _, l := range lines(data) {
			n++
			fmt.Fprintf(c.stdout, "%6d\t%s\n", n, l)
		}
	})
}

func head(c *call) int { return headTail(c, true) }
func tail(c *call) int { return headTail(c, false) }

func headTail(c *call, head bool) int {
	args := c.args
	if len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && args[0][1] >= '0' && args[0][1] <= '9' {
		args = append([]string{"-n", args[0][1:]}, args[1:]...)
	}
	f, err := parseFlags(args, "nc")
	if err != nil {
		return c.usage(err)
	}
	count, bytesMode := f.last('n', "10"), f.set['c']
	if bytesMode {
		count = f.last('c', "10")
	}
	fromStart := !head && strings.HasPrefix(count, "+")
	n, err := strconv.Atoi(strings.TrimPrefix(count, "+"))
	if err != nil || n < 0 {
		return c.usage(fmt.Errorf("invalid number of lines: %q", count))
	}
	multi := len(f.operands) > 1
	first := true
	return c.inputs(f.operands, func(name string, data []byte) {
		if multi {
			if !first {
				c.stdout.WriteString("\n")
			}
			fmt.Fprintf(c.stdout, "==> %s <==\n", name)
		}
		first = false
		if bytesMode {
			switch {
			case head:
				c.stdout.Write(data[:min(n, len(data))])
			case fromStart:
				c.stdout.Write(data[min(max(n-1, 0), len(data)):])
			default:
				c.stdout.Write(data[max(len(data)-n, 0):])
			}
			return
		}
		ls := lines(data)
		switch {
		case head:
			ls = ls[:min(n, len(ls))]
		case fromStart:
			ls = ls[min(max(n-1, 0), len(ls)):]
		default:
			ls = ls[max(len(ls)-n, 0):]
		}
		for _, l := range ls {
			c.stdout.WriteString(l + "\n")
		}
	})
}

func wc(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	show := []bool{f.set['l'], f.set['w'], f.set['c'] || f.set['m']}
	if !show[0] && !show[1] && !show[2] {
		show = []bool{true, true, true}
	}
	type row struct {
		n    [3]int
		name string
	}
	var rows []row
	var total [3]int
	status := c.inputs(f.operands, func(name string, data []byte) {
		r := row{n: [3]int{bytes.Count(data, []byte("\n")), len(bytes.Fields(data)), len(data)}}
		if len(f.operands) > 0 {
			r.name = name
		}
		for i := range 3 {
			total[i] += r.n[i]
		}
		rows = append(rows, r)
	})
	if len(rows) > 1 {
		rows = append(rows, row{n: total, name: "total"})
	}
	cols := 0
	for _, s := range show {
		if s {
			cols++
		}
	}
	width := 0
	if cols > 1 || len(rows) > 1 {
		width = len(strconv.Itoa(total[2]))
	}
	for _, r := range rows {
		var parts []string
		for i, s := range show {
			if s {
				parts = append(parts, fmt.Sprintf("%*d", width, r.n[i]))
			}
		}
		if r.name != "" {
			parts = append(parts, r.name)
		}
		c.stdout.WriteString(strings.Join(parts, " ") + "\n")
	}
	return status
}
