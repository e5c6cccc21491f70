package wsh

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

func ls(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	ops := f.operands
	if len(ops) == 0 {
		ops = []string{"."}
	}
	status := 0
	var files, dirs []string
	for _, p := range ops {
		name, err := c.path(p)
		var fi fs.FileInfo
		if err == nil {
			fi, err = c.r.fsys.Stat(name)
		}
		switch {
		case err != nil:
			status = c.fail(2, "cannot access '"+p+"'", err)
		case fi.IsDir() && !f.set['d']:
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	for _, p := range files {
		name, _ := c.path(p)
		fi, _ := c.r.fsys.Stat(name)
		c.lsEntry(f, fi, p)
	}
	for i, p := range dirs {
		if len(ops) > 1 || f.set['R'] {
			if i > 0 || len(files) > 0 {
				c.stdout.WriteString("\n")
			}
			c.stdout.WriteString(p + ":\n")
		}
		c.lsDir(f, p)
	}
	return status
}

func (c *call) lsDir(f *flags, p string) {
	name, _ := c.path(p)
	ents, err := c.r.fsys.ReadDir(name)
	if err != nil {
		c.fail(2, "cannot open directory '"+p+"'", err)
		return
	}
	if f.set['l'] {
		fmt.Fprintf(c.stdout, "total %d\n", len(ents))
	}
	var sub []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") && !f.set['a'] && !f.set['A'] {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		c.lsEntry(f, fi, e.Name())
		if e.IsDir() {
			sub = append(sub, strings.TrimSuffix(p, "/")+"/"+e.Name())
		}
	}
	if f.set['R'] {
		for _, s := range sub {
			c.stdout.WriteString("\n" + s + ":\n")
			c.lsDir(f, s)
		}
	}
}

func (c *call) lsEntry(f *flags, fi fs.FileInfo, shown string) {
	if !f.set['l'] {
		c.stdout.WriteString(shown + "\n")
		return
	}
	fmt.Fprintf(c.stdout, "%s 1 user user %8d %s %s\n", fi.Mode().String(), fi.Size(), fi.ModTime().Format("Jan _2 15:04"), shown)
}

// target resolves the destination of cp and mv: into a directory when it
// is one (or there are several sources).
func (c *call) target(dst string, srcs []string) (dir bool, err error) {
	name, err := c.path(dst)
	if err != nil {
		return false, err
	}
	fi, err := c.r.fsys.Stat(name)
	if err == nil && fi.IsDir() {
		return true, nil
	}
	if len(srcs) > 1 {
		return false, fmt.Errorf("target '%s' is not a directory", dst)
	}
	return false, nil
}

func mv(c *call) int {
	f, err := parseFlags(c.args, "t")
	if err != nil {
		return c.usage(err)
	}
	return c.copyOrMove(f.operands, true, true)
}

func cp(c *call) int {
	f, err := parseFlags(c.args, "t")
	if err != nil {
		return c.usage(err)
	}
	return c.copyOrMove(f.operands, false, f.set['r'] || f.set['R'] || f.set['a'])
}

func (c *call) copyOrMove(ops []string, move, recursive bool) int {
	if len(ops) < 2 {
		return c.usage(errors.New("missing file operand"))
	}
	srcs, dst := ops[:len(ops)-1], ops[len(ops)-1]
	intoDir, err := c.target(dst, srcs)
	if err != nil {
		c.errf("%v", err)
		return 1
	}
	status := 0
	for _, src := range srcs {
		from, err := c.path(src)
		to := dst
		if intoDir {
			to = strings.TrimSuffix(dst, "/") + "/" + path.Base(src)
		}
		var toName string
		if err == nil {
			toName, err = c.path(to)
		}
		var fi fs.FileInfo
		if err == nil {
			fi, err = c.r.fsys.Stat(from)
		}
		switch {
		case err != nil:
			status = c.fail(1, "cannot stat '"+src+"'", err)
		case from == toName:
			c.errf("'%s' and '%s' are the same file", src, to)
			status = 1
		case move:
			if err := c.r.fsys.Rename(from, toName); err != nil {
				status = c.fail(1, "cannot move '"+src+"' to '"+to+"'", err)
			}
		case fi.IsDir() && !recursive:
			c.errf("-r not specified; omitting directory '%s'", src)
			status = 1
		default:
			if err := c.copyTree(from, toName, fi); err != nil {
				status = c.fail(1, "cannot copy '"+src+"' to '"+to+"'", err)
			}
		}
	}
	return status
}

// copyTree copies a file or a directory with what it holds.
func (c *call) copyTree(from, to string, fi fs.FileInfo) error {
	if fi.IsDir() {
		if strings.HasPrefix(to+"/", from+"/") {
			return errors.New("cannot copy a directory into itself")
		}
		if err := c.r.fsys.Mkdir(to, fi.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		ents, err := c.r.fsys.ReadDir(from)
		if err != nil {
			return err
		}
		for _, e := range ents {
			efi, err := e.Info()
			if err != nil {
				return err
			}
			if err := c.copyTree(path.Join(from, e.Name()), path.Join(to, e.Name()), efi); err != nil {
				return err
			}
		}
		return nil
	}
	in, err := c.r.fsys.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := c.r.fsys.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	c.r.produced.Add(n)
	if err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// find supports paths, then -name, -iname, -path, -type, -maxdepth,
// -mindepth, -newer is not; -print and -delete; every test must hold.
func find(c *call) int {
	var roots []string
	args := c.args
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "!" && args[0] != "(" {
		roots, args = append(roots, args[0]), args[1:]
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	type test func(name string, fi fs.FileInfo, depth int) bool
	var tests []test
	minDepth, maxDepth, del := 0, -1, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		negate := false
		if a == "!" || a == "-not" {
			if i+1 >= len(args) {
				return c.usage(errors.New("expected an expression after '!'"))
			}
			negate, i, a = true, i+1, args[i+1]
		}
		value := func() (string, bool) {
			if i+1 >= len(args) {
				return "", false
			}
			i++
			return args[i], true
		}
		var t test
		switch a {
		case "-print", "-print0":
			continue
		case "-delete":
			del = true
			continue
		case "-name", "-iname", "-path", "-wholename":
			pat, ok := value()
			if !ok {
				return c.usage(fmt.Errorf("missing argument to '%s'", a))
			}
			kind := a
			t = func(shown string, _ fs.FileInfo, _ int) bool {
				subject, p := path.Base(shown), pat
				if kind == "-path" || kind == "-wholename" {
					subject = shown
				}
				if kind == "-iname" {
					subject, p = strings.ToLower(subject), strings.ToLower(p)
				}
				return globMatch(p, subject)
			}
		case "-type":
			v, ok := value()
			if !ok || (v != "f" && v != "d") {
				return c.usage(fmt.Errorf("-type takes f or d (the workspace holds only files and directories)"))
			}
			t = func(_ string, fi fs.FileInfo, _ int) bool { return fi.IsDir() == (v == "d") }
		case "-maxdepth", "-mindepth":
			v, ok := value()
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n < 0 {
				return c.usage(fmt.Errorf("%s takes a number", a))
			}
			if a == "-maxdepth" {
				maxDepth = n
			} else {
				minDepth = n
			}
			continue
		case "-empty":
			t = func(shown string, fi fs.FileInfo, _ int) bool {
				if !fi.IsDir() {
					return fi.Size() == 0
				}
				name, _ := c.path(shown)
				ents, _ := c.r.fsys.ReadDir(name)
				return len(ents) == 0
			}
		default:
			return c.usage(fmt.Errorf("unknown predicate `%s' (the shell executor's find has -name -iname -path -type -maxdepth -mindepth -empty -print -delete and !)", a))
		}
		if negate {
			inner := t
			t = func(s string, fi fs.FileInfo, d int) bool { return !inner(s, fi, d) }
		}
		tests = append(tests, t)
	}
	status := 0
	var deletions []string
	var walk func(shown, name string, fi fs.FileInfo, depth int)
	walk = func(shown, name string, fi fs.FileInfo, depth int) {
		if c.ctx.Err() != nil {
			return
		}
		ok := depth >= minDepth
		for _, t := range tests {
			if !ok {
				break
			}
			ok = t(shown, fi, depth)
		}
		if ok {
			if del {
				deletions = append(deletions, name)
			} else {
				c.stdout.WriteString(shown + "\n")
			}
		}
		if !fi.IsDir() || (maxDepth >= 0 && depth >= maxDepth) {
			return
		}
		ents, err := c.r.fsys.ReadDir(name)
		if err != nil {
			status = c.fail(1, "'"+shown+"'", err)
			return
		}
		for _, e := range ents {
			efi, err := e.Info()
			if err != nil {
				continue
			}
			walk(strings.TrimSuffix(shown, "/")+"/"+e.Name(), path.Join(name, e.Name()), efi, depth+1)
		}
	}
	for _, root := range roots {
		name, err := c.path(root)
		var fi fs.FileInfo
		if err == nil {
			fi, err = c.r.fsys.Stat(name)
		}
		if err != nil {
			status = c.fail(1, "'"+root+"'", err)
			continue
		}
		walk(root, name, fi, 0)
	}
	// Deepest first, so directories are empty when their turn comes.
	for i := len(deletions) - 1; i >= 0; i-- {
		if deletions[i] == "." {
			continue
		}
		if err := c.removeAll(deletions[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			status = c.fail(1, "cannot delete '"+deletions[i]+"'", err)
		}
	}
	return status
}

// globMatch is path.Match where * also matches '/' (find's -path).
func globMatch(pattern, s string) bool {
	if ok, err := path.Match(pattern, s); err == nil && ok {
		return true
	}
	if !strings.Contains(pattern, "*") || !strings.Contains(s, "/") {
		return false
	}
	// Let * cross slashes by matching on the path with them hidden.
	const sep = "\x00"
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", sep), strings.ReplaceAll(s, "/", sep))
	return ok
}
