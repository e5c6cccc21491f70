package workspace

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "workspaces.db")
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newWorkspace(t *testing.T, s *Store, name string, maxBytes, maxFiles int64) Record {
	t.Helper()
	r, err := s.Create(context.Background(), Record{ID: "w" + name, Name: name, Owner: "local", MaxBytes: maxBytes, MaxFiles: maxFiles})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// edit runs fn on a Tree over the workspace's current version and lands
// what it changed.
func edit(t *testing.T, s *Store, r Record, fn func(tr *vfs.Tree)) (int64, []api.WorkspaceChange, error) {
	t.Helper()
	ctx := context.Background()
	base, ix, err := s.Head(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := vfs.New(ix.Entries(), s.Content, vfs.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fn(tr)
	return s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: tr.Changes(), Caller: "local", Executor: "test", Command: "edit"})
}

func write(t testing.TB, tr vfs.FS, name, data string) {
	t.Helper()
	f, err := tr.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func read(t *testing.T, s *Store, r Record, name string) string {
	t.Helper()
	_, ix, err := s.Head(context.Background(), r.ID)
	entries := ix.Entries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Path == name {
			b, err := s.Content(e.Hash)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	return "<absent>"
}

func TestHistoryDiffAndRollback(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "dev", 0, 0)
	v1, ch, err := edit(t, s, r, func(tr *vfs.Tree) {
		tr.Mkdir("src", 0o755)
		write(t, tr, "src/a.txt", "one")
	})
	if err != nil || v1 != 1 || len(ch) != 2 {
		t.Fatalf("first version %d, changes %v, %v", v1, ch, err)
	}
	v2, _, err := edit(t, s, r, func(tr *vfs.Tree) {
		write(t, tr, "src/a.txt", "two")
		write(t, tr, "b.txt", "bee")
	})
	if err != nil || v2 != 2 {
		t.Fatalf("second version %d, %v", v2, err)
	}
	// A command that changes nothing makes no version.
	if v, _, err := edit(t, s, r, func(*vfs.Tree) {}); err != nil || v != 2 {
		t.Fatalf("no-op made version %d, %v", v, err)
	}
	rec, _ := s.Get(context.Background(), r.ID)
	d, err := s.Diff(context.Background(), rec, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d) != "[{b.txt added false} {src/a.txt modified false}]" {
		t.Fatalf("diff 1..2: %v", d)
	}
	v3, _, err := s.Rollback(context.Background(), rec, 1, "local")
	if err != nil || v3 != 3 {
		t.Fatalf("rollback made %d, %v", v3, err)
	}
	if got := read(t, s, r, "src/a.txt"); got != "one" {
		t.Fatalf("after rollback a.txt is %q", got)
	}
	if got := read(t, s, r, "b.txt"); got != "<absent>" {
		t.Fatalf("after rollback b.txt is %q", got)
	}
	hist, err := s.Versions(context.Background(), r.ID, 10)
	if err != nil || len(hist) != 3 || hist[0].Command != "rollback to version 1" || hist[2].Added != 2 {
		t.Fatalf("history %+v, %v", hist, err)
	}
	rec, _ = s.Get(context.Background(), r.ID)
	if rec.Bytes != 3 || rec.Files != 2 {
		t.Fatalf("after rollback the record says %d bytes, %d files", rec.Bytes, rec.Files)
	}
	if _, err := s.Diff(context.Background(), rec, 0, 4); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("diff to a version that does not exist: %v", err)
	}
}

func TestConcurrentCommandsAreIsolated(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "dev", 0, 0)
	if _, _, err := edit(t, s, r, func(tr *vfs.Tree) { tr.Mkdir("d", 0o755); write(t, tr, "shared", "0") }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Two commands start from version 1.
	base, ix, _ := s.Head(ctx, r.ID)
	entries := ix.Entries()
	a, _ := vfs.New(entries, s.Content, vfs.Limits{})
	b, _ := vfs.New(entries, s.Content, vfs.Limits{})
	c, _ := vfs.New(entries, s.Content, vfs.Limits{})
	write(t, a, "shared", "a")
	write(t, a, "a-only", "a")
	write(t, b, "b-only", "b")
	write(t, b, "shared", "b")
	write(t, c, "d/new", "c")
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: a.Changes(), Command: "a"}); err != nil {
		t.Fatal(err)
	}
	// b wrote the path a changed first: nothing of b lands.
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: b.Changes(), Command: "b"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second writer of shared: %v", err)
	}
	if got := read(t, s, r, "b-only"); got != "<absent>" {
		t.Fatalf("part of a conflicting command landed: b-only = %q", got)
	}
	// A command on other paths lands beside a's.
	d, _ := vfs.New(entries, s.Content, vfs.Limits{})
	d.Remove("d")
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: d.Changes(), Command: "rmdir d"}); err != nil {
		t.Fatalf("removing d beside a: %v", err)
	}
	// c wrote into d, which was removed since: refused.
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: c.Changes(), Command: "c"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("write under a removed directory: %v", err)
	}
	if got := read(t, s, r, "shared"); got != "a" {
		t.Fatalf("shared = %q", got)
	}
}

func TestQuotaChecksTheResult(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "small", 10, 3)
	if _, _, err := edit(t, s, r, func(tr *vfs.Tree) { write(t, tr, "a", "12345678") }); err != nil {
		t.Fatal(err)
	}
	// Each of two concurrent commands fits alone; together they do not.
	ctx := context.Background()
	base, ix, _ := s.Head(ctx, r.ID)
	entries := ix.Entries()
	x, _ := vfs.New(entries, s.Content, vfs.Limits{MaxBytes: 10})
	y, _ := vfs.New(entries, s.Content, vfs.Limits{MaxBytes: 10})
	write(t, x, "x", "12")
	write(t, y, "y", "12")
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: x.Changes()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: y.Changes()}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("past the quota together: %v", err)
	}
}

func TestDeleteDropsUnsharedContents(t *testing.T) {
	s := openStore(t, "")
	a := newWorkspace(t, s, "a", 0, 0)
	b := newWorkspace(t, s, "b", 0, 0)
	edit(t, s, a, func(tr *vfs.Tree) { write(t, tr, "f", "shared"); write(t, tr, "g", "only a") })
	edit(t, s, b, func(tr *vfs.Tree) { write(t, tr, "f", "shared") })
	if err := s.Delete(context.Background(), a.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	s.r.QueryRow("SELECT COUNT(*) FROM blobs").Scan(&n)
	if n != 1 {
		t.Fatalf("%d contents left, want the one b holds", n)
	}
	if got := read(t, s, b, "f"); got != "shared" {
		t.Fatalf("b's file after a's removal: %q", got)
	}
	if err := s.Delete(context.Background(), a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestKilledMidWrite kills a process that commits versions as fast as it
// can, then checks that the database is whole: every version's files add
// up to what the workspace's record says, and the head's history row is
// there.
func TestKilledMidWrite(t *testing.T) {
	if path := os.Getenv("PADDOCK_WORKSPACE_WRITER"); path != "" {
		writeForever(path)
		return
	}
	path := filepath.Join(t.TempDir(), "workspaces.db")
	s := openStore(t, path)
	r := newWorkspace(t, s, "busy", 0, 0)
	s.Close()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidWrite$")
		cmd.Env = append(os.Environ(), "PADDOCK_WORKSPACE_WRITER="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Killed once it has made round+1 versions (however slow the
		// machine is), a little later each round, so the kill falls at
		// different points of a write.
		committed := make(chan bool, 1)
		go func() {
			r := bufio.NewReader(out)
			for range round + 1 {
				if line, _ := r.ReadString('\n'); line != "committed\n" {
					committed <- false
					return
				}
			}
			committed <- true
		}()
		select {
		case ok := <-committed:
			if !ok {
				t.Fatal("the writer ended before making a version")
			}
		case <-time.After(time.Minute):
			t.Fatal("the writer made no version in a minute")
		}
		time.Sleep(time.Duration(7*round) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	s = openStore(t, path)
	rec, err := s.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Head < 6 {
		t.Fatalf("the writers made only %d versions, 6 were seen", rec.Head)
	}
	_, ix, err := s.Head(context.Background(), r.ID)
	entries := ix.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, e := range entries {
		b, err := s.Content(e.Hash)
		if err != nil {
			t.Fatalf("head's %s: %v", e.Path, err)
		}
		if int64(len(b)) != e.Size {
			t.Fatalf("head's %s has %d bytes, its entry says %d", e.Path, len(b), e.Size)
		}
		bytes += e.Size
	}
	if bytes != rec.Bytes || int64(len(entries)) != rec.Files {
		t.Fatalf("head holds %d bytes in %d files, the record says %d in %d", bytes, len(entries), rec.Bytes, rec.Files)
	}
	hist, _ := s.Versions(context.Background(), r.ID, 1)
	if len(hist) != 1 || hist[0].Version != rec.Head {
		t.Fatalf("history's newest %+v, head %d", hist, rec.Head)
	}
	t.Logf("%d versions made before the kills; the database is whole", rec.Head)
}

// writeForever commits versions that each rewrite every file with the
// version's number, until killed.
func writeForever(path string) {
	s, err := Open(context.Background(), path)
	if err != nil {
		os.Exit(2)
	}
	ctx := context.Background()
	for {
		base, ix, err := s.Head(ctx, "wbusy")
		if err != nil {
			os.Exit(3)
		}
		tr, _ := vfs.New(ix.Entries(), s.Content, vfs.Limits{})
		for i := range 50 {
			f, _ := tr.OpenFile("f"+strconv.Itoa(i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			fmt.Fprintf(f, "version %d file %d %s", base+1, i, make([]byte, 1000+int(base)%7))
			f.Close()
		}
		if _, _, err := s.Apply(ctx, Commit{Workspace: "wbusy", Base: base, Changes: tr.Changes(), Command: "write"}); err != nil {
			os.Exit(4)
		}
		fmt.Println("committed")
	}
}

// TestHeadCacheFollowsCommits: the head a commit leaves in the cache
// (made from the previous head and the changes) is the database's.
func TestHeadCacheFollowsCommits(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "cache", 0, 0)
	steps := []func(tr *vfs.Tree){
		func(tr *vfs.Tree) {
			tr.Mkdir("a", 0o755)
			tr.Mkdir("a/b", 0o755)
			write(t, tr, "a/b/f", "1")
			write(t, tr, "g", "2")
		},
		func(tr *vfs.Tree) { tr.Rename("a", "z"); write(t, tr, "g", "3") },
		func(tr *vfs.Tree) { tr.Remove("z/b/f"); tr.Remove("z/b"); tr.Chmod("g", 0o600) },
		func(tr *vfs.Tree) { tr.Remove("g"); tr.Mkdir("g", 0o700); write(t, tr, "g/h", "4") },
		// Files changed in place only: the cache's quick path.
		func(tr *vfs.Tree) { write(t, tr, "g/h", "five"); tr.Chmod("z/b", 0o700) },
		func(tr *vfs.Tree) { write(t, tr, "g/h", "6"); write(t, tr, "g/i", "7") },
		func(tr *vfs.Tree) { write(t, tr, "g/h", "eight"); tr.Chmod("g/i", 0o600) },
	}
	for i, step := range steps {
		if _, _, err := edit(t, s, r, step); err != nil {
			t.Fatal(err)
		}
		v, ix, err := s.Head(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		db, _ := s.entriesAt(context.Background(), s.r, r.ID, v)
		if fmt.Sprint(ix.Entries()) != fmt.Sprint(db) {
			t.Fatalf("step %d: cached head\n%v\ndatabase\n%v", i, ix.Entries(), db)
		}
		fresh, err := vfs.NewIndex(db)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ix, fresh) {
			t.Fatalf("step %d: cached index %+v, from the database %+v", i, ix, fresh)
		}
	}
}

// TestHistoryIsPrunedWithinItsBound: a workspace whose file is rewritten
// keeps its history's contents within four times its quota by dropping
// its oldest versions; what is left is whole: the current files, every
// version from the oldest kept, its export and import.
func TestHistoryIsPrunedWithinItsBound(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "churn", 100, 0)
	ctx := context.Background()
	edit(t, s, r, func(tr *vfs.Tree) { write(t, tr, "keep", "kept since version 1") })
	for i := range 12 {
		if _, _, err := edit(t, s, r, func(tr *vfs.Tree) { write(t, tr, "big", fmt.Sprintf("%02d%s", i, strings.Repeat("x", 60))) }); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := s.Get(ctx, r.ID)
	var stored, orphans int64
	s.r.QueryRow(`SELECT COALESCE(SUM(size),0) FROM blobs WHERE hash IN (SELECT DISTINCT hash FROM entries WHERE workspace = ?)`, r.ID).Scan(&stored)
	s.r.QueryRow(`SELECT COUNT(*) FROM blobs WHERE hash NOT IN (SELECT hash FROM entries WHERE hash IS NOT NULL)`).Scan(&orphans)
	if stored > 400 || rec.Oldest < 2 || orphans != 0 {
		t.Fatalf("history holds %d bytes (bound 400), oldest version %d, %d orphan contents", stored, rec.Oldest, orphans)
	}
	t.Logf("head %d, oldest kept %d, history contents %d bytes (bound 400)", rec.Head, rec.Oldest, stored)
	if read(t, s, r, "keep") != "kept since version 1" || !strings.HasPrefix(read(t, s, r, "big"), "11") {
		t.Fatal("the current version lost a file")
	}
	hist, _ := s.Versions(ctx, r.ID, 100)
	if int64(len(hist)) != rec.Head-rec.Oldest+1 {
		t.Fatalf("%d versions listed, head %d, oldest %d", len(hist), rec.Head, rec.Oldest)
	}
	if _, err := s.Diff(ctx, rec, 0, rec.Head); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "pruned") {
		t.Fatalf("diff from a pruned version: %v", err)
	}
	for v := rec.Oldest; v <= rec.Head; v++ {
		ents, _ := s.entriesAt(ctx, s.r, r.ID, v)
		if len(ents) != 2 {
			t.Fatalf("version %d has %d files, want keep and big", v, len(ents))
		}
	}
	if _, _, err := s.Rollback(ctx, rec, rec.Oldest, "local"); err != nil {
		t.Fatalf("rollback to the oldest version kept: %v", err)
	}
	rec, _ = s.Get(ctx, r.ID)
	dst := openStore(t, "")
	got, err := dst.Import(ctx, Record{ID: "wcopy", Name: "copy", Owner: "k", MaxBytes: 100}, bytes.NewReader(exported(t, s, r)))
	if err != nil || got.Oldest != rec.Oldest || got.Head != rec.Head {
		t.Fatalf("import of a pruned workspace: %+v, %v (source oldest %d head %d)", got, err, rec.Oldest, rec.Head)
	}
	for v := rec.Oldest; v <= rec.Head; v++ {
		a, _ := s.entriesAt(ctx, s.r, r.ID, v)
		b, _ := dst.entriesAt(ctx, dst.r, "wcopy", v)
		if len(a) != len(b) {
			t.Fatalf("version %d: %d entries here, %d imported", v, len(a), len(b))
		}
		for i := range a {
			if a[i].Path != b[i].Path || a[i].Hash != b[i].Hash {
				t.Fatalf("version %d differs: %v / %v", v, a[i], b[i])
			}
		}
	}
}

// TestOpensSchemaOne: a database made before history pruning gains the
// column and keeps its workspaces.
func TestOpensSchemaOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workspaces.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Replace(schema, "\toldest      INTEGER NOT NULL DEFAULT 0,\n", "", 1)
	if v1 == schema {
		t.Fatal("the schema no longer has the oldest column this test removes")
	}
	if _, err := db.Exec(v1 + `PRAGMA user_version = 1;
		INSERT INTO workspaces (id, name, owner, created_at, updated_at, head, bytes, files, max_bytes, max_files) VALUES ('wold', 'old', 'local', 0, 0, 0, 0, 0, 100, 10);`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openStore(t, path)
	r, err := s.Get(context.Background(), "wold")
	if err != nil || r.Name != "old" || r.Oldest != 0 {
		t.Fatalf("after the upgrade: %+v, %v", r, err)
	}
}
