package wsh

// The smaller tools: tee, seq, sleep, rev, nl, paste, env, xargs, type and
// hash.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
)

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
