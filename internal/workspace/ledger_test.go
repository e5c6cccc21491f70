package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
	"github.com/paddock-dev/paddock/internal/workspace/wsh"
)

// TestLedgerRecordsEveryCommand: every command is in the ledger, read-only
// ones too, with the version it made (in the version's own transaction),
// a stopped one with its bound, one whose changes conflicted with the
// reason nothing was kept; file writes and rollbacks too; pages follow.
func TestLedgerRecordsEveryCommand(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, "")
	r := newWorkspace(t, s, "ledger", 0, 0)
	run := func(script string, timeout time.Duration, base int64) (*api.WorkspaceRunResult, error) {
		t.Helper()
		rec, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		spec := RunSpec{Workspace: rec, Caller: "alice", Executor: "", Script: script, Command: script, Timeout: timeout}
		if base < 0 {
			return s.Run(ctx, spec)
		}
		// A command that saw version base, finishing now (as one that ran
		// beside the commands since would).
		entries, err := s.entriesAt(ctx, s.r, r.ID, base)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := vfs.New(entries, s.Content, vfs.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		res := wsh.Run(ctx, tr, wsh.Options{Script: script, Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Second, MaxOutput: 1 << 20, MaxMemory: 1 << 26})
		out := &api.WorkspaceRunResult{Executor: api.ExecutorShell, Reason: "test", ExitCode: res.ExitCode, BaseVersion: base, Version: base}
		return out, s.finish(ctx, s.commit(spec, base, changesOf(tr, res.Stopped), out), out)
	}
	if _, err := run("echo hi > a.txt", 0, -1); err != nil { // version 1
		t.Fatal(err)
	}
	if _, err := run("cat a.txt", 0, -1); err != nil { // read-only
		t.Fatal(err)
	}
	if _, err := run("exit 3", 0, -1); err != nil {
		t.Fatal(err)
	}
	if res, _ := run("echo late > b.txt; sleep 5", 200*time.Millisecond, -1); res == nil || res.Stopped == "" {
		t.Fatalf("a command past its timeout: %+v", res)
	}
	if _, err := run("echo two > a.txt", 0, -1); err != nil { // version 2
		t.Fatal(err)
	}
	if _, err := run("echo three > a.txt", 0, 1); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a command on version 1 changing a.txt after version 2 did: %v", err)
	}
	if _, err := putFile(t, s, r, "c.txt", "c", 0, -1); err != nil { // version 3
		t.Fatal(err)
	}
	rec, _ := s.Get(ctx, r.ID)
	if _, _, err := s.Rollback(ctx, rec, 1, "bob"); err != nil { // version 4
		t.Fatal(err)
	}
	entries, next, err := s.Ledger(ctx, r.ID, 0, 0)
	if err != nil || next != 0 {
		t.Fatal(err, next)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s|%s|%d|%d->%d|%s|%v", e.Executor, e.Command, e.ExitCode, e.BaseVersion, e.Version, e.Stopped, e.Error != ""))
	}
	want := []string{
		"shell|echo hi > a.txt|0|0->1||false",
		"shell|cat a.txt|0|1->1||false",
		"shell|exit 3|3|1->1||false",
		"shell|echo late > b.txt; sleep 5|124|1->1|timeout|false",
		"shell|echo two > a.txt|0|1->2||false",
		"shell|echo three > a.txt|0|1->1||true",
		"files|write c.txt|0|2->3||false",
		"|rollback to version 1|0|3->4||false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e := entries[5]; !strings.Contains(e.Error, "changed by another command") || e.Caller != "alice" {
		t.Fatalf("the conflicting command's entry: %+v", e)
	}
	if entries[7].Caller != "bob" || entries[0].Reason == "" || entries[0].At.IsZero() {
		t.Fatalf("entries: %+v", entries)
	}
	page, next, err := s.Ledger(ctx, r.ID, entries[2].Seq, 3)
	if err != nil || len(page) != 3 || page[0].Seq != entries[3].Seq || next != entries[5].Seq {
		t.Fatalf("a page after the third: %d entries, next %d, %v", len(page), next, err)
	}
	// Gone with its workspace.
	if err := s.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if left, _, _ := s.Ledger(ctx, r.ID, 0, 0); len(left) != 0 {
		t.Fatalf("%d ledger entries outlived their workspace", len(left))
	}
}

// TestLedgerKeepsItsLast: the ledger is cut back to its last entries.
func TestLedgerKeepsItsLast(t *testing.T) {
	keep, every := ledgerKeep, ledgerPruneEvery
	ledgerKeep, ledgerPruneEvery = 5, 4
	t.Cleanup(func() { ledgerKeep, ledgerPruneEvery = keep, every })
	ctx := context.Background()
	s := openStore(t, "")
	r := newWorkspace(t, s, "short", 0, 0)
	other := newWorkspace(t, s, "other", 0, 0)
	for i := range 3 {
		if _, err := s.Run(ctx, RunSpec{Workspace: other, Script: "echo", Command: fmt.Sprint("other ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := s.Run(ctx, RunSpec{Workspace: r, Script: "echo", Command: fmt.Sprint("cmd ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, _ := s.Ledger(ctx, r.ID, 0, 0)
	if n := len(entries); n < 5 || n > 5+4 || entries[n-1].Command != "cmd 19" {
		t.Fatalf("%d entries kept, the last %+v", n, entries[n-1])
	}
	if o, _, _ := s.Ledger(ctx, other.ID, 0, 0); len(o) != 3 {
		t.Fatalf("another workspace's ledger was cut: %d entries", len(o))
	}
	// Two workspaces whose commands alternate are both cut back.
	for i := range 40 {
		for _, w := range []Record{r, other} {
			if _, err := s.Run(ctx, RunSpec{Workspace: w, Script: "echo", Command: fmt.Sprint("turn ", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range []Record{r, other} {
		if got, _, _ := s.Ledger(ctx, w.ID, 0, 0); len(got) > 5+4 {
			t.Fatalf("workspace %s keeps %d entries after alternating commands", w.Name, len(got))
		}
	}
}

// TestPruneByHand: the versions before the one named go (no diff, read or
// rollback to them), the contents only they held are freed and counted,
// the versions from it on are whole, and the ledger says so.
func TestPruneByHand(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, "")
	r := newWorkspace(t, s, "prune", 0, 0)
	for i, data := range []string{"one", "two", "three", "four"} { // versions 1-4
		if _, err := putFile(t, s, r, "f", data, 0, -1); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := putFile(t, s, r, "kept", "always", 0, -1); err != nil { // version 2
				t.Fatal(err)
			}
		}
	}
	rec, _ := s.Get(ctx, r.ID)
	if rec.Head != 5 {
		t.Fatalf("head %d, want 5", rec.Head)
	}
	if _, err := s.Prune(ctx, rec, 6, "ops"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("prune past the head: %v", err)
	}
	res, err := s.Prune(ctx, rec, 4, "ops")
	if err != nil {
		t.Fatal(err)
	}
	// Versions 1-3 go; "one" (versions 1-2) and "two" (3) are freed,
	// "three" is version 4's.
	if res.Oldest != 4 || res.Versions != 3 || res.FreedBytes != int64(len("one")+len("two")) {
		t.Fatalf("prune before 4: %+v", res)
	}
	rec, _ = s.Get(ctx, r.ID)
	for _, v := range []int64{1, 3} {
		if _, err := s.ReadFile(ctx, rec, v, "f"); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("read of pruned version %d: %v", v, err)
		}
		if _, _, err := s.Rollback(ctx, rec, v, "ops"); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("rollback to pruned version %d: %v", v, err)
		}
	}
	for v, want := range map[int64]string{4: "three", 5: "four"} {
		if f, err := s.ReadFile(ctx, rec, v, "f"); err != nil || string(f.Data) != want {
			t.Fatalf("version %d after the prune: %q, %v", v, f.Data, err)
		}
		if f, err := s.ReadFile(ctx, rec, v, "kept"); err != nil || string(f.Data) != "always" {
			t.Fatalf("kept at version %d after the prune: %q, %v", v, f.Data, err)
		}
	}
	if res, err := s.Prune(ctx, rec, 2, "ops"); err != nil || res.Versions != 0 || res.Oldest != 4 {
		t.Fatalf("a prune below the oldest: %+v, %v", res, err)
	}
	entries, _, _ := s.Ledger(ctx, r.ID, 0, 0)
	if last := entries[len(entries)-1]; last.Command != "prune versions before 4" || last.Caller != "ops" {
		t.Fatalf("the ledger's last entry: %+v", last)
	}
	// A rollback to a kept version still works, and the next commit's
	// pruning by bound still counts right.
	if _, _, err := s.Rollback(ctx, rec, 4, "ops"); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.Get(ctx, r.ID)
	if f, _ := s.ReadFile(ctx, rec, -1, "f"); string(f.Data) != "three" || f.Version != 6 {
		t.Fatalf("after a rollback to 4: %q", f.Data)
	}
}

// TestLedgerQueueIsWritten: the entry of a command that made no version
// reaches the database by itself shortly after, and at Close.
func TestLedgerQueueIsWritten(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/w.db"
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	r := newWorkspace(t, s, "queue", 0, 0)
	count := func() (n int) {
		if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM commands WHERE workspace = ?", r.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.Run(ctx, RunSpec{Workspace: r, Script: "echo one", Command: "echo one"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a queued ledger entry was not written within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.Run(ctx, RunSpec{Workspace: r, Script: "echo two", Command: "echo two"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	entries, _, err := s.Ledger(ctx, r.ID, 0, 0)
	if err != nil || len(entries) != 2 || entries[1].Command != "echo two" {
		t.Fatalf("after Close and a reopen: %+v, %v", entries, err)
	}
}
