package wsh

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// sedCmd is one command of a sed script with its addresses.
type sedCmd struct {
	from, to *sedAddr
	negate   bool
	name     byte
	// s: pattern, replacement, flags.
	re      *regexp.Regexp
	repl    string
	global  bool
	nth     int
	print   bool
	text    string // a, i, c
	inRange bool
}

// sedAddr is a line number, $ (last) or a regexp.
type sedAddr struct {
	line int
	last bool
	re   *regexp.Regexp
}

// parseSed parses a sed script (commands separated by ; or newlines).
func parseSed(script string, extended bool) ([]*sedCmd, error) {
	var cmds []*sedCmd
	s := script
	for {
		s = strings.TrimLeft(s, " \t\n;")
		if s == "" {
			return cmds, nil
		}
		cmd := &sedCmd{}
		var err error
		if cmd.from, s, err = parseAddr(s, extended); err != nil {
			return nil, err
		}
		if cmd.from != nil && strings.HasPrefix(s, ",") {
			if cmd.to, s, err = parseAddr(s[1:], extended); err != nil {
				return nil, err
			}
			if cmd.to == nil {
				return nil, errors.New("unexpected `,'")
			}
		}
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "!") {
			cmd.negate, s = true, strings.TrimLeft(s[1:], " \t")
		}
		if s == "" {
			return nil, errors.New("missing command")
		}
		cmd.name, s = s[0], s[1:]
		switch cmd.name {
		case 'd', 'p', 'q', '=', 'n':
		case 's':
			if s, err = cmd.parseSubst(s, extended); err != nil {
				return nil, err
			}
		case 'a', 'i', 'c':
			s = strings.TrimPrefix(strings.TrimLeft(s, " \t"), "\\")
			s = strings.TrimPrefix(s, "\n")
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				end = len(s)
			}
			cmd.text, s = strings.TrimLeft(s[:end], " \t"), s[end:]
		default:
			return nil, fmt.Errorf("unknown command: `%c'", cmd.name)
		}
		cmds = append(cmds, cmd)
		s = strings.TrimLeft(s, " \t")
		if s != "" && s[0] != ';' && s[0] != '\n' && s[0] != '}' {
			return nil, fmt.Errorf("extra characters after command")
		}
	}
}

func parseAddr(s string, extended bool) (*sedAddr, string, error) {
	switch {
	case s == "":
		return nil, s, nil
	case s[0] == '$':
		return &sedAddr{last: true}, s[1:], nil
	case s[0] >= '0' && s[0] <= '9':
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, _ := strconv.Atoi(s[:i])
		return &sedAddr{line: n}, s[i:], nil
	case s[0] == '/' || s[0] == '\\':
		delim := byte('/')
		if s[0] == '\\' {
			if len(s) < 2 {
				return nil, s, errors.New("unterminated address regex")
			}
			delim, s = s[1], s[1:]
		}
		pat, rest, ok := cutDelim(s[1:], delim)
		if !ok {
			return nil, s, errors.New("unterminated address regex")
		}
		re, err := compilePattern([]string{pat}, extended, false, false, false, false)
		if err != nil {
			return nil, s, err
		}
		return &sedAddr{re: re}, rest, nil
	}
	return nil, s, nil
}

// cutDelim splits s at the first unescaped delim; an escaped delim loses
// its backslash.
func cutDelim(s string, delim byte) (string, string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == delim:
			b.WriteByte(delim)
			i++
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte('\\')
			b.WriteByte(s[i+1])
			i++
		case s[i] == delim:
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", s, false
}

func (cmd *sedCmd) parseSubst(s string, extended bool) (string, error) {
	if s == "" || s[0] == '\n' || s[0] == '\\' {
		return s, errors.New("unterminated `s' command")
	}
	delim := s[0]
	pat, rest, ok := cutDelim(s[1:], delim)
	if !ok {
		return s, errors.New("unterminated `s' command")
	}
	repl, rest, ok := cutDelim(rest, delim)
	if !ok {
		return s, errors.New("unterminated `s' command")
	}
	icase := false
	i := 0
	for ; i < len(rest); i++ {
		switch ch := rest[i]; {
		case ch == 'g':
			cmd.global = true
		case ch == 'p':
			cmd.print = true
		case ch == 'i' || ch == 'I':
			icase = true
		case ch >= '1' && ch <= '9':
			j := i
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			cmd.nth, _ = strconv.Atoi(rest[i:j])
			i = j - 1
		default:
			goto done
		}
	}
done:
	re, err := compilePattern([]string{pat}, extended, false, icase, false, false)
	if err != nil {
		return s, err
	}
	cmd.re, cmd.repl = re, repl
	return rest[i:], nil
}

// expand builds a replacement: & is the match, \1-\9 groups, \n a newline.
func (cmd *sedCmd) expand(line string, m []int) string {
	var b strings.Builder
	r := cmd.repl
	for i := 0; i < len(r); i++ {
		switch {
		case r[i] == '&':
			b.WriteString(line[m[0]:m[1]])
		case r[i] == '\\' && i+1 < len(r):
			i++
			switch ch := r[i]; {
			case ch >= '0' && ch <= '9':
				g := int(ch - '0')
				if 2*g+1 < len(m) && m[2*g] >= 0 {
					b.WriteString(line[m[2*g]:m[2*g+1]])
				}
			case ch == 'n':
				b.WriteByte('\n')
			case ch == 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(ch)
			}
		default:
			b.WriteByte(r[i])
		}
	}
	return b.String()
}

// substitute applies s to line, saying whether it replaced anything.
func (cmd *sedCmd) substitute(line string) (string, bool) {
	all := cmd.re.FindAllStringSubmatchIndex(line, -1)
	if all == nil {
		return line, false
	}
	var b strings.Builder
	last, done := 0, false
	for k, m := range all {
		if (cmd.nth > 0 && k+1 != cmd.nth) || (cmd.nth == 0 && !cmd.global && k > 0) || (cmd.nth > 0 && done) {
			continue
		}
		b.WriteString(line[last:m[0]])
		b.WriteString(cmd.expand(line, m))
		last, done = m[1], true
		if !cmd.global && cmd.nth == 0 {
			break
		}
	}
	if !done {
		return line, false
	}
	b.WriteString(line[last:])
	return b.String(), true
}

func (a *sedAddr) match(n int, line string, last bool) bool {
	switch {
	case a.last:
		return last
	case a.re != nil:
		return a.re.MatchString(line)
	}
	return a.line == n
}

// selects says whether cmd applies to line n.
func (cmd *sedCmd) selects(n int, line string, last bool) bool {
	sel := false
	switch {
	case cmd.from == nil:
		sel = true
	case cmd.to == nil:
		sel = cmd.from.match(n, line, last)
	case cmd.inRange:
		sel = true
		if cmd.to.match(n, line, last) || (cmd.to.re == nil && !cmd.to.last && n >= cmd.to.line) {
			cmd.inRange = false
		}
	case cmd.from.match(n, line, last):
		sel = true
		// A numeric end at or before the start ends the range at once.
		cmd.inRange = !(cmd.to.re == nil && !cmd.to.last && cmd.to.line <= n)
	}
	return sel != cmd.negate
}

// runSed runs the script over one input's lines.
func runSed(cmds []*sedCmd, data []byte, quiet bool) (out []byte, quit bool) {
	var b bytes.Buffer
	ls := lines(data)
	for i := 0; i < len(ls); i++ {
		line, n, last := ls[i], i+1, i == len(ls)-1
		deleted := false
		var after []string
		for _, cmd := range cmds {
			if !cmd.selects(n, line, last) {
				continue
			}
			switch cmd.name {
			case 'd':
				deleted = true
			case 'p':
				b.WriteString(line + "\n")
			case '=':
				fmt.Fprintf(&b, "%d\n", n)
			case 'q':
				quit = true
			case 'n':
				if !quiet {
					b.WriteString(line + "\n")
				}
				if i+1 < len(ls) {
					i++
					line, n, last = ls[i], i+1, i == len(ls)-1
				}
			case 's':
				var did bool
				if line, did = cmd.substitute(line); did && cmd.print {
					b.WriteString(line + "\n")
				}
			case 'a':
				after = append(after, cmd.text)
			case 'i':
				b.WriteString(cmd.text + "\n")
			case 'c':
				if cmd.to == nil || !cmd.inRange {
					b.WriteString(cmd.text + "\n")
				}
				deleted = true
			}
			if deleted || quit {
				break
			}
		}
		if !deleted && !quiet {
			b.WriteString(line + "\n")
		}
		for _, a := range after {
			b.WriteString(a + "\n")
		}
		if quit {
			break
		}
	}
	return b.Bytes(), quit
}

func sed(c *call) int {
	f, err := parseFlags(c.args, "ef")
	if err != nil {
		return c.usage(err)
	}
	for _, l := range f.long {
		switch {
		case l == "--in-place" || strings.HasPrefix(l, "--in-place="):
			f.set['i'] = true
		case l == "--quiet" || l == "--silent":
			f.set['n'] = true
		case l == "--regexp-extended":
			f.set['E'] = true
		default:
			return c.usage(fmt.Errorf("unknown option -- '%s'", l))
		}
	}
	scripts, files := f.val['e'], f.operands
	if len(scripts) == 0 {
		if len(files) == 0 {
			return c.usage(errors.New("usage: sed [OPTION]... {script} [input-file]"))
		}
		scripts, files = files[:1], files[1:]
	}
	cmds, err := parseSed(strings.Join(scripts, "\n"), f.set['E'] || f.set['r'])
	if err != nil {
		c.errf("-e expression #1: %v", err)
		return 1
	}
	quiet := f.set['n']
	if !f.set['i'] {
		var all bytes.Buffer
		status := c.inputs(files, func(_ string, data []byte) {
			all.Write(data)
			if len(data) > 0 && data[len(data)-1] != '\n' {
				all.WriteByte('\n')
			}
		})
		out, _ := runSed(cmds, all.Bytes(), quiet)
		c.stdout.Write(out)
		return status
	}
	if len(files) == 0 {
		c.errf("no input files")
		return 1
	}
	status := 0
	for _, p := range files {
		data, err := c.readAll(p)
		if err != nil {
			status = c.fail(4, "couldn't edit "+p, err)
			continue
		}
		for _, cmd := range cmds {
			cmd.inRange = false
		}
		out, _ := runSed(cmds, data, quiet)
		if bytes.Equal(out, data) {
			continue // nothing changed: leave the file (and its version) alone
		}
		name, _ := c.path(p)
		fi, err := c.r.fsys.Stat(name)
		if err == nil {
			err = c.writeFile(p, out, fi.Mode().Perm())
		}
		if err != nil {
			status = c.fail(4, "couldn't edit "+p, err)
		}
	}
	return status
}
