package wsh

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// compilePattern turns grep or sed patterns into one Go regexp: basic
// regular expressions (the default) are translated to extended ones,
// fixed strings quoted.
func compilePattern(patterns []string, extended, fixed, icase, word, line bool) (*regexp.Regexp, error) {
	var alts []string
	for _, p := range patterns {
		switch {
		case fixed:
			p = regexp.QuoteMeta(p)
		case !extended:
			p = breToERE(p)
		}
		alts = append(alts, p)
	}
	re := strings.Join(alts, "|")
	if len(alts) > 1 {
		re = "(?:" + re + ")"
	}
	switch {
	case line:
		re = "^(?:" + re + ")$"
	case word:
		re = `\b(?:` + re + `)\b`
	}
	if icase {
		re = "(?i)" + re
	}
	return regexp.Compile(re)
}

// breToERE translates a POSIX basic regular expression: \( \) \{ \} \|
// \+ \? are operators there and the bare characters are literals.
func breToERE(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		switch {
		case ch == '\\' && i+1 < len(p):
			next := p[i+1]
			if strings.IndexByte("(){}|+?", next) >= 0 {
				b.WriteByte(next)
			} else {
				b.WriteByte('\\')
				b.WriteByte(next)
			}
			i++
		case strings.IndexByte("(){}|+?", ch) >= 0:
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch == '*' && (i == 0 || p[i-1] == '^'):
			b.WriteString(`\*`)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

func grep(c *call) int {
	f, err := parseFlags(c.args, "efmABC")
	if err != nil {
		return c.usage(err)
	}
	var include, exclude []string
	for _, l := range f.long {
		switch {
		case strings.HasPrefix(l, "--include="):
			include = append(include, strings.TrimPrefix(l, "--include="))
		case strings.HasPrefix(l, "--exclude="):
			exclude = append(exclude, strings.TrimPrefix(l, "--exclude="))
		case l == "--color=never" || l == "--no-color":
		default:
			return c.usage(fmt.Errorf("unrecognized option '%s'", l))
		}
	}
	patterns, operands := f.val['e'], f.operands
	if len(patterns) == 0 {
		if len(operands) == 0 {
			return c.usage(errors.New("usage: grep [OPTION]... PATTERNS [FILE]"))
		}
		patterns, operands = strings.Split(operands[0], "\n"), operands[1:]
	}
	re, err := compilePattern(patterns, f.set['E'], f.set['F'], f.set['i'], f.set['w'], f.set['x'])
	if err != nil {
		return c.usage(err)
	}
	recursive := f.set['r'] || f.set['R']
	if recursive && len(operands) == 0 {
		operands = []string{"."}
	}
	maxCount := -1
	if v := f.last('m', ""); v != "" {
		fmt.Sscan(v, &maxCount)
	}
	// Over a whole file, (?m) matches wherever a line would: a file it
	// does not match is skipped without splitting it into lines.
	pre, _ := regexp.Compile("(?m)" + re.String())
	g := &grepRun{c: c, f: f, re: re, pre: pre, maxCount: maxCount, include: include, exclude: exclude,
		names: recursive || len(operands) > 1}
	if f.set['h'] {
		g.names = false
	}
	if f.set['H'] {
		g.names = true
	}
	if len(operands) == 0 {
		data, err := c.readAll("-")
		if err != nil {
			return c.fail(2, "(standard input)", err)
		}
		g.search("(standard input)", data)
	}
	for _, op := range operands {
		if g.quit {
			break
		}
		if op == "-" {
			data, _ := c.readAll("-")
			g.search("(standard input)", data)
			continue
		}
		name, err := c.path(op)
		var fi fs.FileInfo
		if err == nil {
			fi, err = c.r.fsys.Stat(name)
		}
		switch {
		case err != nil:
			g.err(op, err)
		case fi.IsDir() && !recursive:
			if !f.set['s'] {
				c.errf("%s: Is a directory", op)
			}
		case fi.IsDir():
			g.walk(name, op)
		default:
			g.file(name, op)
		}
	}
	switch {
	case g.errors && !(f.set['q'] && g.matched):
		return 2
	case g.matched:
		return 0
	}
	return 1
}

type grepRun struct {
	c                *call
	f                *flags
	re, pre          *regexp.Regexp
	maxCount         int
	include, exclude []string
	names            bool
	matched, errors  bool
	quit             bool
}

func (g *grepRun) err(p string, err error) {
	g.errors = true
	if !g.f.set['s'] {
		g.c.errf("%s: %s", p, errText(err))
	}
}

// walk searches a directory tree in name order.
func (g *grepRun) walk(name, shown string) {
	ents, err := g.c.r.fsys.ReadDir(name)
	if err != nil {
		g.err(shown, err)
		return
	}
	for _, e := range ents {
		if g.quit || g.c.ctx.Err() != nil {
			return
		}
		child, childShown := path.Join(name, e.Name()), strings.TrimSuffix(shown, "/")+"/"+e.Name()
		if e.IsDir() {
			g.walk(child, childShown)
			continue
		}
		if !globsAllow(e.Name(), g.include, g.exclude) {
			continue
		}
		g.file(child, childShown)
	}
}

// globsAllow applies --include and --exclude to a file name.
func globsAllow(name string, include, exclude []string) bool {
	for _, x := range exclude {
		if ok, _ := path.Match(x, name); ok {
			return false
		}
	}
	if len(include) == 0 {
		return true
	}
	for _, in := range include {
		if ok, _ := path.Match(in, name); ok {
			return true
		}
	}
	return false
}

func (g *grepRun) file(name, shown string) {
	data, err := g.c.readAll(name2shell(name))
	if err != nil {
		g.err(shown, err)
		return
	}
	g.search(shown, data)
}

// name2shell makes a workspace path a shell path again.
func name2shell(name string) string {
	if name == "." {
		return Root
	}
	return Root + "/" + name
}

// search greps one input.
func (g *grepRun) search(shown string, data []byte) {
	f, out := g.f, g.c.stdout
	if isBinary(data) && !f.set['a'] {
		if g.re.FindAllStringIndex(string(data), 1) != nil && !f.set['v'] {
			g.matched = true
			if !f.set['q'] && !f.set['l'] && !f.set['c'] && !f.set['L'] {
				fmt.Fprintf(out, "Binary file %s matches\n", shown)
			} else if f.set['l'] {
				out.WriteString(shown + "\n")
			}
		}
		return
	}
	if g.pre != nil && !f.set['v'] && !f.set['L'] && !f.set['c'] && !g.pre.Match(data) {
		return
	}
	count := 0
	prefix := ""
	if g.names {
		prefix = shown + ":"
	}
	for i, l := range lines(data) {
		if g.maxCount >= 0 && count >= g.maxCount {
			break
		}
		locs := g.re.FindAllStringIndex(l, -1)
		if (locs != nil) == f.set['v'] {
			continue
		}
		count++
		g.matched = true
		if f.set['q'] {
			g.quit = true
			return
		}
		if f.set['l'] || f.set['L'] || f.set['c'] {
			continue
		}
		num := ""
		if f.set['n'] {
			num = fmt.Sprintf("%d:", i+1)
		}
		if f.set['o'] && !f.set['v'] {
			for _, loc := range locs {
				if loc[1] > loc[0] {
					out.WriteString(prefix + num + l[loc[0]:loc[1]] + "\n")
				}
			}
			continue
		}
		out.WriteString(prefix + num + l + "\n")
	}
	switch {
	case f.set['c']:
		fmt.Fprintf(out, "%s%d\n", prefix, count)
	case f.set['l'] && count > 0:
		out.WriteString(shown + "\n")
	case f.set['L'] && count == 0:
		out.WriteString(shown + "\n")
	}
}

// isBinary says a file holds a NUL byte in its first 8 KiB, as grep does.
func isBinary(data []byte) bool {
	return strings.IndexByte(string(data[:min(len(data), 8192)]), 0) >= 0
}
