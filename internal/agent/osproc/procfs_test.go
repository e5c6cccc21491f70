package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
		want       statFields
		bad        bool
	}{
		{name: "plain", line: statLine(42, "sleep", 'S', 7, 1, 12345, 200),
			want: statFields{pid: 42, ppid: 7, comm: "sleep", state: 'S', threads: 1, startTicks: 12345, rssPages: 200}},
		// A process names itself: spaces and parentheses must not shift
		// the fields that follow.
		{name: "parens in comm", line: statLine(9, ") ( x", 'R', 1, 3, 5, 10),
			want: statFields{pid: 9, ppid: 1, comm: ") ( x", state: 'R', threads: 3, startTicks: 5, rssPages: 10}},
		{name: "fake fields in comm", line: statLine(9, "a) Z 1 1", 'S', 4, 1, 5, 10),
			want: statFields{pid: 9, ppid: 4, comm: "a) Z 1 1", state: 'S', threads: 1, startTicks: 5, rssPages: 10}},
		{name: "empty comm", line: statLine(3, "", 'Z', 1, 1, 5, 0),
			want: statFields{pid: 3, ppid: 1, comm: "", state: 'Z', threads: 1, startTicks: 5}},
		{name: "newline in comm", line: statLine(3, "a\nb", 'S', 1, 1, 5, 0),
			want: statFields{pid: 3, ppid: 1, comm: "a\nb", state: 'S', threads: 1, startTicks: 5}},
		{name: "no name", line: "12 S 1 1", bad: true},
		{name: "no pid", line: "(x) S 1", bad: true},
		{name: "negative pid", line: statLine(-4, "x", 'S', 1, 1, 1, 1), bad: true},
		{name: "short", line: "12 (x) S 1 1 1", bad: true},
		{name: "two-letter state", line: strings.Replace(statLine(12, "x", 'S', 1, 1, 1, 1), ") S ", ") SS ", 1), bad: true},
		{name: "bad ppid", line: strings.Replace(statLine(12, "x", 'S', 1, 1, 1, 1), ") S 1 ", ") S x ", 1), bad: true},
		{name: "long comm", line: statLine(12, strings.Repeat("x", 65), 'S', 1, 1, 1, 1), bad: true},
		{name: "huge", line: statLine(12, "x", 'S', 1, 1, 1, 1) + strings.Repeat(" 0", maxStatBytes), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
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
		_, _ = parseStat(raw)
		line := statLine(77, comm, 'S', int(ppid>>1), 2, start, 9)
		got, err := parseStat([]byte(line))
		if len(comm) > maxCommBytes || len(line) > maxStatBytes {
			if err == nil {
				t.Fatalf("accepted a %d-byte name", len(comm))
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got.pid != 77 || got.ppid != int(ppid>>1) || got.state != 'S' || got.threads != 2 || got.startTicks != start || got.rssPages != 9 {
			t.Fatalf("%q: fields shifted: %+v", line, got)
		}
		if !utf8.ValidString(got.comm) || (utf8.ValidString(comm) && got.comm != comm) {
			t.Fatalf("name %q came back as %q", comm, got.comm)
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
		got, trunc := parseCmdline([]byte(tc.in), tc.limit)
		if !slices.Equal(got, tc.want) || trunc != tc.trunc {
			t.Errorf("parseCmdline(%q) = %q, %v; want %q, %v", tc.in, got, trunc, tc.want, tc.trunc)
		}
	}
}

func TestParseStatusUID(t *testing.T) {
	uid, ok := parseStatusUID([]byte("Name:\tsleep\nState:\tS (sleeping)\nUid:\t1000\t1001\t1002\t1003\nGid:\t0\t0\t0\t0\n"))
	if !ok || uid != 1000 {
		t.Fatalf("got %d %v, want the real uid 1000", uid, ok)
	}
	if _, ok := parseStatusUID([]byte("Name:\tx\nUid:\n")); ok {
		t.Fatal("accepted an empty Uid line")
	}
	if _, ok := parseStatusUID([]byte("Name:\tUid: 5\n")); ok {
		t.Fatal("took a Uid from another line")
	}
}

// fakeProc writes a /proc with the given processes (stat lines keyed by
// pid, uids and command lines) and an uptime.
func fakeProc(t *testing.T, procs map[int]statFields, uids map[int]int, cmds map[int]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, data string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "uptime"), "1000.00 1900.00\n")
	write(filepath.Join(root, "self", "stat"), "not a process dir")
	for pid, st := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		write(filepath.Join(dir, "stat"), statLine(pid, st.comm, st.state, st.ppid, st.threads, st.startTicks, st.rssPages))
		write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n", st.comm, uids[pid], uids[pid], uids[pid], uids[pid]))
		write(filepath.Join(dir, "cmdline"), cmds[pid])
	}
	// An entry whose stat cannot be read (a process that just ended).
	if err := os.MkdirAll(filepath.Join(root, "999"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestListProcsFromProc(t *testing.T) {
	etc := t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	procs := map[int]statFields{
		1:  {comm: "paddock", state: 'S', ppid: 0, threads: 8, startTicks: 100, rssPages: 3},
		7:  {comm: "sh", state: 'S', ppid: 1, threads: 1, startTicks: 50000, rssPages: 1},
		8:  {comm: "sleep", state: 'S', ppid: 7, threads: 1, startTicks: 90000, rssPages: 1},
		12: {comm: "defunct", state: 'Z', ppid: 1, threads: 1, startTicks: 99000},
		30: {comm: "x", state: 'S', ppid: 40, threads: 1, startTicks: 99000}, // under a process not listed
	}
	root := fakeProc(t, procs, map[int]int{7: 1000, 8: 4242}, map[int]string{1: "/.paddock/bin/paddock\x00agent\x00", 7: "sh\x00-c\x00sleep 1000 &\x00", 8: "sleep\x001000\x00"})
	a := New(Options{EtcDir: etc})

	// As the sandbox's PID 1, every process of /proc is listed.
	list := a.listProcs(procScope{root: root, self: 1})
	var pids []int
	for _, p := range list.Procs {
		pids = append(pids, p.Pid)
	}
	if !slices.Equal(pids, []int{1, 7, 8, 12, 30}) || list.Truncated {
		t.Fatalf("listed %v (truncated %v)", pids, list.Truncated)
	}
	agent, sh, sleep, zombie := list.Procs[0], list.Procs[1], list.Procs[2], list.Procs[3]
	if !agent.Agent || sh.Agent || agent.User != "root" || agent.RSSBytes != 3*int64(os.Getpagesize()) || agent.Threads != 8 {
		t.Errorf("agent: %+v", agent)
	}
	if sh.PPid != 1 || sh.UID != 1000 || sh.User != "user" || !slices.Equal(sh.Cmd, []string{"sh", "-c", "sleep 1000 &"}) {
		t.Errorf("sh: %+v", sh)
	}
	if sleep.PPid != 7 || sleep.UID != 4242 || sleep.User != "" || sleep.State != "S" {
		t.Errorf("sleep: %+v", sleep)
	}
	// Started 100 s before the 1000 s of uptime, give or take the clock.
	if d := sleep.StartedAt.Sub(agent.StartedAt); d < 898*time.Second || d > 900*time.Second {
		t.Errorf("agent started %v before the sleep, want 899 s", d)
	}
	if zombie.State != "Z" || zombie.Cmd != nil {
		t.Errorf("zombie: %+v", zombie)
	}

	// Not PID 1 (tests, a hand-run agent): only itself and what is below it.
	pids = nil
	for _, p := range a.listProcs(procScope{root: root, self: 7}).Procs {
		pids = append(pids, p.Pid)
		if p.Agent != (p.Pid == 7) {
			t.Errorf("pid %d marked agent=%v", p.Pid, p.Agent)
		}
	}
	if !slices.Equal(pids, []int{7, 8}) {
		t.Fatalf("outside PID 1 listed %v, want the agent and its descendant", pids)
	}

	// A FIFO where a procfs file should be is skipped, not waited on.
	if err := os.MkdirAll(filepath.Join(root, "50"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "50", "stat"), 0o644); err != nil {
		t.Fatal(err)
	}
	listed := make(chan int, 1)
	go func() { listed <- len(a.listProcs(procScope{root: root, self: 1}).Procs) }()
	select {
	case n := <-listed:
		if n != 5 {
			t.Errorf("listed %d processes, want 5", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listing with a FIFO where a stat file should be did not return in 5s")
	}
}
