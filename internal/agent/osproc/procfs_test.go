package osproc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// statLine writes a /proc/PID/stat line as Linux does, with the fields
// the agent reads set and the others plausible.
func statLine(pid int, comm string, state byte, ppid, threads int, start uint64, rss int64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 %d 0 %d 2400000 %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
		pid, comm, state, ppid, pid, pid, threads, start, rss)
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
		bad        bool
	}{
		{name: "plain", line: statLine(42, "sleep", 'S', 7, 1, 12345, 200),
			want: Stat{Pid: 42, PPid: 7, Comm: "sleep", State: 'S', Threads: 1, StartTicks: 12345, RSSPages: 200}},
		// A process names itself: spaces and parentheses must not shift
		// the fields that follow.
		{name: "parens in comm", line: statLine(9, ") ( x", 'R', 1, 3, 5, 10),
			want: Stat{Pid: 9, PPid: 1, Comm: ") ( x", State: 'R', Threads: 3, StartTicks: 5, RSSPages: 10}},
		{name: "fake fields in comm", line: statLine(9, "a) Z 1 1", 'S', 4, 1, 5, 10),
			want: Stat{Pid: 9, PPid: 4, Comm: "a) Z 1 1", State: 'S', Threads: 1, StartTicks: 5, RSSPages: 10}},
		{name: "empty comm", line: statLine(3, "", 'Z', 1, 1, 5, 0),
			want: Stat{Pid: 3, PPid: 1, Comm: "", State: 'Z', Threads: 1, StartTicks: 5}},
		{name: "newline in comm", line: statLine(3, "a\nb", 'S', 1, 1, 5, 0),
			want: Stat{Pid: 3, PPid: 1, Comm: "a\nb", State: 'S', Threads: 1, StartTicks: 5}},
		{name: "no name", line: "12 S 1 1", bad: true},
		{name: "no pid", line: "(x) S 1", bad: true},
		{name: "negative pid", line: statLine(-4, "x", 'S', 1, 1, 1, 1), bad: true},
		{name: "short", line: "12 (x) S 1 1 1", bad: true},
		{name: "two-letter state", line: strings.Replace(statLine(12, "x", 'S', 1, 1, 1, 1), ") S ", ") SS ", 1), bad: true},
		{name: "bad ppid", line: strings.Replace(statLine(12, "x", 'S', 1, 1, 1, 1), ") S 1 ", ") S x ", 1), bad: true},
		{name: "long comm", line: statLine(12, strings.Repeat("x", 65), 'S', 1, 1, 1, 1), bad: true},
		{name: "huge", line: statLine(12, "x", 'S', 1, 1, 1, 1) + strings.Repeat(" 0", MaxStatBytes), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %q as %+v", tc.line, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseStat checks that whatever name a process gives itself, the
// fields after it come out as written, and that no input panics.
func FuzzParseStat(f *testing.F) {
	for _, c := range []string{"sleep", ") ( x", "a) Z 1 1", "((((", "))))", "", " ", "\x00", "日本"} {
		f.Add(c, uint32(5), uint64(100), []byte(nil))
	}
	f.Add("x", uint32(1), uint64(1), []byte("1 (a) b) c"))
	f.Fuzz(func(t *testing.T, comm string, ppid uint32, start uint64, raw []byte) {
		_, _ = ParseStat(raw)
		line := statLine(77, comm, 'S', int(ppid>>1), 2, start, 9)
		got, err := ParseStat([]byte(line))
		if len(comm) > maxCommBytes || len(line) > MaxStatBytes {
			if err == nil {
				t.Fatalf("accepted a %d-byte name", len(comm))
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got.Pid != 77 || got.PPid != int(ppid>>1) || got.State != 'S' || got.Threads != 2 || got.StartTicks != start || got.RSSPages != 9 {
			t.Fatalf("%q: fields shifted: %+v", line, got)
		}
		if !utf8.ValidString(got.Comm) || (utf8.ValidString(comm) && got.Comm != comm) {
			t.Fatalf("name %q came back as %q", comm, got.Comm)
		}
	})
}

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  []string
		trunc bool
	}{
		{"sleep\x001000\x00", 100, []string{"sleep", "1000"}, false},
		{"", 100, nil, false},
		{"node server.js", 100, []string{"node server.js"}, false}, // rewritten by setproctitle
		{"a\x00\x00b\x00", 100, []string{"a", "", "b"}, false},
		{"abcdef\x00", 4, []string{"abcd"}, true},
		{"\xff\x00", 100, []string{"\uFFFD"}, false},
	} {
		got, trunc := ParseCmdline([]byte(tc.in), tc.limit)
		if !slices.Equal(got, tc.want) || trunc != tc.trunc {
			t.Errorf("ParseCmdline(%q) = %q, %v; want %q, %v", tc.in, got, trunc, tc.want, tc.trunc)
		}
	}
}

func TestParseStatusUID(t *testing.T) {
	uid, ok := ParseStatusUID([]byte("Name:\tsleep\nState:\tS (sleeping)\nUid:\t1000\t1001\t1002\t1003\nGid:\t0\t0\t0\t0\n"))
	if !ok || uid != 1000 {
		t.Fatalf("got %d %v, want the real uid 1000", uid, ok)
	}
	if _, ok := ParseStatusUID([]byte("Name:\tx\nUid:\n")); ok {
		t.Fatal("accepted an empty Uid line")
	}
	if _, ok := ParseStatusUID([]byte("Name:\tUid: 5\n")); ok {
		t.Fatal("took a Uid from another line")
	}
}
