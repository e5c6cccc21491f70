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
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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

func mkdir(c *call) int {
	f, err := parseFlags(c.args, "m")
	if err != nil {
		return c.usage(err)
	}
	status := 0
	for _, p := range f.operands {
		name, err := c.path(p)
		if err == nil {
			if f.set['p'] {
				err = c.mkdirAll(name)
			} else {
				err = c.r.fsys.Mkdir(name, 0o755)
			}
		}
		if err != nil {
			status = c.fail(1, "cannot create directory '"+p+"'", err)
		}
	}
	return status
}

// mkdirAll makes name and its missing parents.
func (c *call) mkdirAll(name string) error { return vfs.MkdirAll(c.r.fsys, name) }

func rmdir(c *call) int {
	status := 0
	for _, p := range c.args {
		name, err := c.path(p)
		if err == nil {
			var fi fs.FileInfo
			if fi, err = c.r.fsys.Stat(name); err == nil && !fi.IsDir() {
				err = &fs.PathError{Op: "rmdir", Path: p, Err: errNotDir}
			} else if err == nil {
				err = c.r.fsys.Remove(name)
			}
		}
		if err != nil {
			status = c.fail(1, "failed to remove '"+p+"'", err)
		}
	}
	return status
}

func rm(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	recursive, force := f.set['r'] || f.set['R'], f.set['f']
	status := 0
	for _, p := range f.operands {
		name, err := c.path(p)
		if err == nil && name == "." {
			c.errf("refusing to remove '.' or '..' directory: skipping '%s'", p)
			status = 1
			continue
		}
		var fi fs.FileInfo
		if err == nil {
			fi, err = c.r.fsys.Stat(name)
		}
		switch {
		case err != nil && force && errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			status = c.fail(1, "cannot remove '"+p+"'", err)
			continue
		case fi.IsDir() && !recursive:
			c.errf("cannot remove '%s': Is a directory", p)
			status = 1
			continue
		}
		if err := c.removeAll(name); err != nil {
			status = c.fail(1, "cannot remove '"+p+"'", err)
		}
	}
	return status
}

// removeAll removes name and everything under it.
func (c *call) removeAll(name string) error { return vfs.RemoveAll(c.r.fsys, name) }

func touch(c *call) int {
	f, err := parseFlags(c.args, "dtr")
	if err != nil {
		return c.usage(err)
	}
	status := 0
	now := time.Now()
	for _, p := range f.operands {
		name, err := c.path(p)
		if err == nil {
			if _, err = c.r.fsys.Stat(name); errors.Is(err, fs.ErrNotExist) && !f.set['c'] {
				var fh io.Closer
				fh, err = c.r.fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
				if err == nil {
					err = fh.Close()
				}
			} else if err == nil {
				err = c.r.fsys.Chtimes(name, now)
			}
		}
		if err != nil && !(f.set['c'] && errors.Is(err, fs.ErrNotExist)) {
			status = c.fail(1, "cannot touch '"+p+"'", err)
		}
	}
	return status
}

func chmod(c *call) int {
	args := c.args
	recursive := false
	if len(args) > 0 && args[0] == "-R" {
		recursive, args = true, args[1:]
	}
	if len(args) < 2 {
		return c.usage(errors.New("missing operand"))
	}
	mode := args[0]
	status := 0
	var apply func(name, p string)
	apply = func(name, p string) {
		fi, err := c.r.fsys.Stat(name)
		if err == nil {
			var perm fs.FileMode
			if perm, err = newMode(fi.Mode().Perm(), mode); err == nil {
				err = c.r.fsys.Chmod(name, perm)
			}
		}
		if err != nil {
			status = c.fail(1, "cannot change permissions of '"+p+"'", err)
			return
		}
		if recursive && fi.IsDir() {
			ents, _ := c.r.fsys.ReadDir(name)
			for _, e := range ents {
				apply(path.Join(name, e.Name()), path.Join(p, e.Name()))
			}
		}
	}
	for _, p := range args[1:] {
		name, err := c.path(p)
		if err != nil {
			status = c.fail(1, "cannot access '"+p+"'", err)
			continue
		}
		apply(name, p)
	}
	return status
}

// newMode applies an octal mode or symbolic clauses like u+x,go-w, a+rw.
func newMode(cur fs.FileMode, spec string) (fs.FileMode, error) {
	if n, err := strconv.ParseUint(spec, 8, 32); err == nil {
		return fs.FileMode(n).Perm(), nil
	}
	m := cur
	for clause := range strings.SplitSeq(spec, ",") {
		i := strings.IndexAny(clause, "+-=")
		if i < 0 {
			return 0, fmt.Errorf("invalid mode: '%s'", spec)
		}
		who, op, perms := clause[:i], clause[i], clause[i+1:]
		if who == "" {
			who = "a"
		}
		var mask, bits fs.FileMode
		for _, w := range who {
			switch w {
			case 'u':
				mask |= 0o700
			case 'g':
				mask |= 0o070
			case 'o':
				mask |= 0o007
			case 'a':
				mask |= 0o777
			default:
				return 0, fmt.Errorf("invalid mode: '%s'", spec)
			}
		}
		for _, p := range perms {
			switch p {
			case 'r':
				bits |= 0o444
			case 'w':
				bits |= 0o222
			case 'x':
				bits |= 0o111
			default:
				return 0, fmt.Errorf("invalid mode: '%s'", spec)
			}
		}
		bits &= mask
		switch op {
		case '+':
			m |= bits
		case '-':
			m &^= bits
		case '=':
			m = m&^mask | bits
		}
	}
	return m, nil
}

func basename(c *call) int {
	if len(c.args) == 0 {
		return c.usage(errors.New("missing operand"))
	}
	b := path.Base(c.args[0])
	if len(c.args) > 1 && b != c.args[1] {
		b = strings.TrimSuffix(b, c.args[1])
	}
	c.stdout.WriteString(b + "\n")
	return 0
}

func dirname(c *call) int {
	if len(c.args) == 0 {
		return c.usage(errors.New("missing operand"))
	}
	for _, a := range c.args {
		c.stdout.WriteString(path.Dir(a) + "\n")
	}
	return 0
}

func tee(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if f.set['a'] {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	ws := []io.Writer{c.stdout}
	status := 0
	for _, p := range f.operands {
		name, ok, dev := resolve(c.dir, p)
		if dev {
			continue
		}
		if !ok {
			status = c.fail(1, p, notExist("open", p))
			continue
		}
		fh, err := c.r.fsys.OpenFile(name, flag, 0o644)
		if err != nil {
			status = c.fail(1, p, err)
			continue
		}
		defer fh.Close()
		ws = append(ws, fh)
	}
	if _, err := io.Copy(io.MultiWriter(ws...), c.stdin); err != nil {
		c.errf("%v", err)
		return 1
	}
	return status
}

func seq(c *call) int {
	nums := make([]float64, 0, 3)
	sep := "\n"
	args := c.args
	for len(args) > 0 && args[0] == "-s" && len(args) > 1 {
		sep, args = args[1], args[2:]
	}
	isInt := true
	for _, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			return c.usage(fmt.Errorf("invalid floating point argument: '%s'", a))
		}
		if strings.ContainsAny(a, ".eE") {
			isInt = false
		}
		nums = append(nums, v)
	}
	first, incr, last := 1.0, 1.0, 0.0
	switch len(nums) {
	case 1:
		last = nums[0]
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, incr, last = nums[0], nums[1], nums[2]
	default:
		return c.usage(errors.New("give LAST, FIRST LAST or FIRST INCREMENT LAST"))
	}
	if incr == 0 {
		return c.usage(errors.New("invalid Zero increment value"))
	}
	n := 0
	for v := first; (incr > 0 && v <= last) || (incr < 0 && v >= last); v = first + float64(n)*incr {
		if n > 0 {
			c.stdout.WriteString(sep)
		}
		if isInt {
			c.stdout.WriteString(strconv.FormatInt(int64(v), 10))
		} else {
			c.stdout.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
		n++
		if n%4096 == 0 && c.ctx.Err() != nil {
			return 1
		}
	}
	if n > 0 {
		c.stdout.WriteString("\n")
	}
	return 0
}

func sleep(c *call) int {
	var total time.Duration
	for _, a := range c.args {
		unit := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = strings.TrimSuffix(a, "s")
		case strings.HasSuffix(a, "m"):
			a, unit = strings.TrimSuffix(a, "m"), time.Minute
		case strings.HasSuffix(a, "h"):
			a, unit = strings.TrimSuffix(a, "h"), time.Hour
		}
		v, err := strconv.ParseFloat(a, 64)
		if err != nil || v < 0 {
			return c.usage(fmt.Errorf("invalid time interval '%s'", a))
		}
		total += time.Duration(v * float64(unit))
	}
	t := time.NewTimer(total)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-c.ctx.Done():
		return 1
	}
}

func rev(c *call) int {
	return c.inputs(c.args, func(_ string, data []byte) {
		for _, l := range lines(data) {
			r := []rune(l)
			slices.Reverse(r)
			c.stdout.WriteString(string(r) + "\n")
		}
	})
}

func nl(c *call) int {
	n := 0
	return c.inputs(c.args, func(_ string, data []byte) {
		for _, l := range lines(data) {
			if l == "" {
				c.stdout.WriteString("\n")
				continue
			}
			n++
			fmt.Fprintf(c.stdout, "%6d\t%s\n", n, l)
		}
	})
}

func paste(c *call) int {
	f, err := parseFlags(c.args, "d")
	if err != nil {
		return c.usage(err)
	}
	delim := f.last('d', "\t")
	var cols [][]string
	status := c.inputs(f.operands, func(_ string, data []byte) { cols = append(cols, lines(data)) })
	if f.set['s'] {
		for _, col := range cols {
			c.stdout.WriteString(strings.Join(col, delim) + "\n")
		}
		return status
	}
	rows := 0
	for _, col := range cols {
		rows = max(rows, len(col))
	}
	for i := range rows {
		parts := make([]string, len(cols))
		for j, col := range cols {
			if i < len(col) {
				parts[j] = col[i]
			}
		}
		c.stdout.WriteString(strings.Join(parts, delim) + "\n")
	}
	return status
}

func env(c *call) int {
	args := c.args
	extra := map[string]string{}
	for len(args) > 0 && strings.Contains(args[0], "=") && !strings.HasPrefix(args[0], "=") {
		k, v, _ := strings.Cut(args[0], "=")
		extra[k], args = v, args[1:]
	}
	if len(args) > 0 {
		if len(extra) > 0 {
			c.errf("setting variables for a command is not supported: use export, or VAR=value cmd")
			return 125
		}
		return c.run(args)
	}
	var out []string
	c.env.Each(func(name string, v expand.Variable) bool {
		if v.Exported && v.Kind == expand.String {
			out = append(out, name+"="+v.Str)
		}
		return true
	})
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	for _, l := range out {
		c.stdout.WriteString(l + "\n")
	}
	return 0
}

func xargs(c *call) int {
	f, err := parseFlags(c.args, "nId")
	if err != nil {
		return c.usage(err)
	}
	cmd := f.operands
	if len(cmd) == 0 {
		cmd = []string{"echo"}
	}
	data, err := c.readAll("-")
	if err != nil {
		c.errf("%v", err)
		return 1
	}
	var items []string
	if f.set['I'] || f.set['d'] {
		d := "\n"
		if f.set['d'] {
			d = strings.ReplaceAll(f.last('d', "\n"), `\n`, "\n")
		}
		for _, it := range strings.Split(strings.TrimSuffix(string(data), "\n"), d) {
			if it != "" {
				items = append(items, it)
			}
		}
	} else {
		items = strings.Fields(string(data))
	}
	per := len(items)
	if v := f.last('n', ""); v != "" {
		if per, err = strconv.Atoi(v); err != nil || per < 1 {
			return c.usage(fmt.Errorf("invalid number for -n option: %q", v))
		}
	}
	if f.set['I'] {
		per = 1
	}
	status := 0
	for i := 0; i < len(items) || (i == 0 && len(items) == 0 && !f.set['I']); i += max(per, 1) {
		chunk := items[i:min(i+max(per, 1), len(items))]
		var args []string
		if f.set['I'] {
			rep := f.last('I', "{}")
			for _, a := range cmd {
				args = append(args, strings.ReplaceAll(a, rep, chunk[0]))
			}
		} else {
			args = append(slices.Clone(cmd), chunk...)
		}
		if code := c.runCommand(args); code != 0 {
			status = 123
			if code == 127 {
				return 127
			}
		}
		if len(items) == 0 {
			break
		}
	}
	return status
}

// runCommand runs a builtin or one of the interpreter's echo/printf/true
// and false (what xargs and find -exec are given).
func (c *call) runCommand(args []string) int {
	switch args[0] {
	case "echo":
		c.stdout.WriteString(strings.Join(args[1:], " ") + "\n")
		return 0
	case "true":
		return 0
	case "false":
		return 1
	}
	return c.run(args)
}

// typeTool stands in for the interpreter's type and command -v: it says
// what the shell executor has, and never looks at the host.
func typeTool(c *call) int {
	verbose := c.name == "type"
	status := 0
	for _, a := range c.args {
		switch a {
		case "-v":
			verbose = false
			continue
		case "-V", "-a", "-t", "-p", "-P":
			continue
		}
		switch {
		case tools[a] != nil:
			if verbose {
				fmt.Fprintf(c.stdout, "%s is a builtin of the shell executor\n", a)
			} else {
				c.stdout.WriteString(a + "\n")
			}
		case slices.Contains(interpreterBuiltins, a):
			if verbose {
				fmt.Fprintf(c.stdout, "%s is a shell builtin\n", a)
			} else {
				c.stdout.WriteString(a + "\n")
			}
		default:
			if verbose {
				fmt.Fprintf(c.stderr, "type: %s: not found\n", a)
			}
			status = 1
		}
	}
	return status
}

func hashTool(*call) int { return 0 }
