package wsh

// The tools that make, remove and change entries: mkdir, rmdir, rm, touch,
// chmod, and basename and dirname beside them.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

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
