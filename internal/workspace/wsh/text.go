package wsh

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

func sortTool(c *call) int {
	f, err := parseFlags(c.args, "kto")
	if err != nil {
		return c.usage(err)
	}
	var all []string
	status := c.inputs(f.operands, func(_ string, data []byte) { all = append(all, lines(data)...) })
	sep := f.last('t', "")
	field := 0
	if k := f.last('k', ""); k != "" {
		k, _, _ = strings.Cut(k, ",")
		k, _, _ = strings.Cut(k, ".")
		if field, err = strconv.Atoi(strings.TrimRight(k, "nrbf")); err != nil || field < 1 {
			return c.usage(fmt.Errorf("invalid field specification '%s'", f.last('k', "")))
		}
		if strings.ContainsRune(f.last('k', ""), 'n') {
			f.set['n'] = true
		}
	}
	key := func(l string) string {
		if field == 0 {
			return l
		}
		var parts []string
		if sep != "" {
			parts = strings.Split(l, sep)
		} else {
			parts = strings.Fields(l)
		}
		if field > len(parts) {
			return ""
		}
		if sep != "" {
			return strings.Join(parts[field-1:], sep)
		}
		return strings.Join(parts[field-1:], " ")
	}
	cmp := func(a, b string) int {
		ka, kb := key(a), key(b)
		if f.set['f'] {
			ka, kb = strings.ToLower(ka), strings.ToLower(kb)
		}
		if f.set['n'] {
			na, nb := leadingNumber(ka), leadingNumber(kb)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			if field != 0 {
				return 0
			}
		}
		return strings.Compare(ka, kb)
	}
	slices.SortStableFunc(all, func(a, b string) int {
		r := cmp(a, b)
		if r == 0 && field == 0 && !f.set['n'] {
			r = strings.Compare(a, b)
		}
		if f.set['r'] {
			return -r
		}
		return r
	})
	if f.set['u'] {
		all = slices.CompactFunc(all, func(a, b string) bool { return cmp(a, b) == 0 })
	}
	for _, l := range all {
		c.stdout.WriteString(l + "\n")
	}
	return status
}

// leadingNumber reads the number a line starts with (0 when none), as
// sort -n does.
func leadingNumber(s string) float64 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || (end == 0 && s[end] == '-')) {
		end++
	}
	v, _ := strconv.ParseFloat(s[:end], 64)
	return v
}

func uniq(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	return c.inputs(f.operands[:min(len(f.operands), 1)], func(_ string, data []byte) {
		ls := lines(data)
		for i := 0; i < len(ls); {
			j := i + 1
			for j < len(ls) && (ls[j] == ls[i] || f.set['i'] && strings.EqualFold(ls[j], ls[i])) {
				j++
			}
			n := j - i
			if (f.set['d'] && n < 2) || (f.set['u'] && n > 1) {
				i = j
				continue
			}
			if f.set['c'] {
				fmt.Fprintf(c.stdout, "%7d %s\n", n, ls[i])
			} else {
				c.stdout.WriteString(ls[i] + "\n")
			}
			i = j
		}
	})
}

func cut(c *call) int {
	f, err := parseFlags(c.args, "dfcb")
	if err != nil {
		return c.usage(err)
	}
	list, byChar := f.last('f', ""), false
	if list == "" {
		list, byChar = f.last('c', f.last('b', "")), true
	}
	if list == "" {
		return c.usage(errors.New("you must specify a list of bytes, characters, or fields"))
	}
	ranges, err := parseRanges(list)
	if err != nil {
		return c.usage(err)
	}
	delim := f.last('d', "\t")
	return c.inputs(f.operands, func(_ string, data []byte) {
		for _, l := range lines(data) {
			if byChar {
				r := []rune(l)
				var out []rune
				for i := range r {
					if inRanges(ranges, i+1) {
						out = append(out, r[i])
					}
				}
				c.stdout.WriteString(string(out) + "\n")
				continue
			}
			if !strings.Contains(l, delim) {
				if !f.set['s'] {
					c.stdout.WriteString(l + "\n")
				}
				continue
			}
			parts := strings.Split(l, delim)
			var out []string
			for i, p := range parts {
				if inRanges(ranges, i+1) {
					out = append(out, p)
				}
			}
			c.stdout.WriteString(strings.Join(out, delim) + "\n")
		}
	})
}

// parseRanges reads cut's lists: 1,3, 2-4, -2, 5-.
func parseRanges(list string) ([][2]int, error) {
	var out [][2]int
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		var a, b int
		var err error
		switch {
		case !isRange:
			a, err = strconv.Atoi(part)
			b = a
		case lo == "":
			a = 1
			b, err = strconv.Atoi(hi)
		case hi == "":
			a, err = strconv.Atoi(lo)
			b = int(^uint(0) >> 1)
		default:
			if a, err = strconv.Atoi(lo); err == nil {
				b, err = strconv.Atoi(hi)
			}
		}
		if err != nil || a < 1 || b < a {
			return nil, fmt.Errorf("invalid field range '%s'", part)
		}
		out = append(out, [2]int{a, b})
	}
	return out, nil
}

func inRanges(rs [][2]int, n int) bool {
	for _, r := range rs {
		if n >= r[0] && n <= r[1] {
			return true
		}
	}
	return false
}

func tr(c *call) int {
	f, err := parseFlags(c.args, "")
	if err != nil {
		return c.usage(err)
	}
	ops := f.operands
	if len(ops) == 0 || (!f.set['d'] && !f.set['s'] && len(ops) < 2) {
		return c.usage(errors.New("missing operand"))
	}
	set1 := expandSet(ops[0])
	var set2 []rune
	if len(ops) > 1 {
		set2 = expandSet(ops[1])
	}
	in1 := func(r rune) bool { return slices.Contains(set1, r) != f.set['c'] }
	data, err := c.readAll("-")
	if err != nil {
		c.errf("%v", err)
		return 1
	}
	var b strings.Builder
	var last rune = -1
	squeeze := set1
	if len(set2) > 0 {
		squeeze = set2
	}
	for _, r := range string(data) {
		switch {
		case f.set['d'] && in1(r):
			continue
		case !f.set['d'] && len(set2) > 0 && in1(r):
			if i := slices.Index(set1, r); i >= 0 {
				r = set2[min(i, len(set2)-1)]
			} else {
				r = set2[len(set2)-1]
			}
		}
		if f.set['s'] && r == last && slices.Contains(squeeze, r) {
			continue
		}
		b.WriteRune(r)
		last = r
	}
	c.stdout.WriteString(b.String())
	return 0
}

// expandSet expands tr's ranges (a-z), classes ([:lower:]) and escapes.
func expandSet(s string) []rune {
	classes := map[string]func(rune) bool{
		"[:lower:]": unicode.IsLower, "[:upper:]": unicode.IsUpper, "[:digit:]": unicode.IsDigit,
		"[:space:]": unicode.IsSpace, "[:alpha:]": unicode.IsLetter, "[:alnum:]": func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) },
		"[:punct:]": unicode.IsPunct, "[:blank:]": func(r rune) bool { return r == ' ' || r == '\t' },
	}
	var out []rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		if rs[i] == '[' {
			if end := strings.Index(string(rs[i:]), ":]"); end > 0 {
				if is, ok := classes[string(rs[i:i+end+2])]; ok {
					for r := rune(0); r < 128; r++ {
						if is(r) {
							out = append(out, r)
						}
					}
					i += end + 1
					continue
				}
			}
		}
		r := rs[i]
		if r == '\\' && i+1 < len(rs) {
			i++
			switch rs[i] {
			case 'n':
				r = '\n'
			case 't':
				r = '\t'
			case 'r':
				r = '\r'
			default:
				r = rs[i]
			}
		}
		if i+2 < len(rs) && rs[i+1] == '-' {
			for x := r; x <= rs[i+2]; x++ {
				out = append(out, x)
			}
			i += 2
			continue
		}
		out = append(out, r)
	}
	return out
}

func diff(c *call) int {
	f, err := parseFlags(c.args, "U")
	if err != nil {
		return c.usage(err)
	}
	if len(f.operands) != 2 {
		return c.usage(errors.New("give two files"))
	}
	a, err := c.readAll(f.operands[0])
	if err != nil {
		return c.fail(2, f.operands[0], err)
	}
	b, err := c.readAll(f.operands[1])
	if err != nil {
		return c.fail(2, f.operands[1], err)
	}
	if string(a) == string(b) {
		return 0
	}
	if f.set['q'] {
		fmt.Fprintf(c.stdout, "Files %s and %s differ\n", f.operands[0], f.operands[1])
		return 1
	}
	context := 3
	if v := f.last('U', ""); v != "" {
		context, _ = strconv.Atoi(v)
	}
	c.stdout.WriteString(unified(f.operands[0], f.operands[1], lines(a), lines(b), context))
	return 1
}

// unified is a unified diff of two line lists, from their longest common
// subsequence.
func unified(nameA, nameB string, a, b []string, context int) string {
	// ops: ' ' same, '-' only in a, '+' only in b.
	type op struct {
		kind byte
		line string
	}
	n, m := len(a), len(b)
	if n*m > 4<<20 {
		// Past a few million cells the table costs too much memory: the
		// files are shown as replaced whole.
		var out strings.Builder
		fmt.Fprintf(&out, "--- %s\n+++ %s\n@@ -%s +%s @@\n", nameA, nameB, hunkRange(1, n), hunkRange(1, m))
		for _, l := range a {
			out.WriteString("-" + l + "\n")
		}
		for _, l := range b {
			out.WriteString("+" + l + "\n")
		}
		return out.String()
	}
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops, i, j = append(ops, op{' ', a[i]}), i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops, j = append(ops, op{'+', b[j]}), j+1
		default:
			ops, i = append(ops, op{'-', a[i]}), i+1
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(k-context, 0)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		ai, bi := 1, 1
		for _, o := range ops[:start] {
			if o.kind != '+' {
				ai++
			}
			if o.kind != '-' {
				bi++
			}
		}
		var al, bl int
		var body strings.Builder
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				al++
			}
			if o.kind != '-' {
				bl++
			}
			body.WriteString(string(o.kind) + o.line + "\n")
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n%s", hunkRange(ai, al), hunkRange(bi, bl), body.String())
		k = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start-1)
	case 1:
		return strconv.Itoa(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
