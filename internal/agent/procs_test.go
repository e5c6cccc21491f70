package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
)

// statLine writes a /proc/PID/stat line as Linux does, with the fields
// the agent reads set and the others plausible.
func statLine(pid int, st osproc.Stat) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 %d 0 %d 2400000 %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
		pid, st.Comm, st.State, st.PPid, pid, pid, st.Threads, st.StartTicks, st.RSSPages)
}

// fakeProc writes a /proc with the given processes (stat lines keyed by
// pid, uids and command lines) and an uptime.
func fakeProc(t *testing.T, procs map[int]osproc.Stat, uids map[int]int, cmds map[int]string) string {
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
		write(filepath.Join(dir, "stat"), statLine(pid, st))
		write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n", st.Comm, uids[pid], uids[pid], uids[pid], uids[pid]))
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
	procs := map[int]osproc.Stat{
		1:  {Comm: "paddock", State: 'S', PPid: 0, Threads: 8, StartTicks: 100, RSSPages: 3},
		7:  {Comm: "sh", State: 'S', PPid: 1, Threads: 1, StartTicks: 50000, RSSPages: 1},
		8:  {Comm: "sleep", State: 'S', PPid: 7, Threads: 1, StartTicks: 90000, RSSPages: 1},
		12: {Comm: "defunct", State: 'Z', PPid: 1, Threads: 1, StartTicks: 99000},
		30: {Comm: "x", State: 'S', PPid: 40, Threads: 1, StartTicks: 99000}, // under a process not listed
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
