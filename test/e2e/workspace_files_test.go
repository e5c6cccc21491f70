package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestWorkspaceFileRoutes moves files in and out of a workspace without a
// command: put and get through the CLI (a local file, stdin, stdout, -o),
// a binary file byte for byte, a file of an older version, permission
// bits, a write on the version the writer read refused once another
// version changed the file, and the files seen by the shell and
// container executors both ways.
func TestWorkspaceFileRoutes(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	d.must("workspace", "create", "xfer")
	local := filepath.Join(t.TempDir(), "in.bin")
	blob := make([]byte, 2<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.must("workspace", "put", "xfer", "data/blob.bin", local); !strings.HasPrefix(out, "version 1\n") || !strings.Contains(out, "+ data/\n") || !strings.Contains(out, "+ data/blob.bin\n") {
		t.Fatalf("put of a local file printed %q", out)
	}
	back := filepath.Join(t.TempDir(), "out.bin")
	d.must("workspace", "get", "xfer", "data/blob.bin", "-o", back)
	if got, _ := os.ReadFile(back); !bytes.Equal(got, blob) {
		t.Fatalf("get -o gave %d bytes that differ from the %d put", len(got), len(blob))
	}
	// stdin in, stdout out; a mode; the shell executor sees it.
	if out, errOut, code := d.runStdin([]byte("#!/bin/sh\necho hi\n"), "workspace", "put", "xfer", "bin/hi.sh", "--mode", "0755"); code != 0 {
		t.Fatalf("put from stdin: %d %s %s", code, out, errOut)
	}
	if out := d.must("workspace", "get", "xfer", "bin/hi.sh"); out != "#!/bin/sh\necho hi\n" {
		t.Fatalf("get to stdout: %q", out)
	}
	if out := d.must("run", "xfer", "--", "ls", "-l", "bin/hi.sh"); !strings.HasPrefix(out, "-rwxr-xr-x") {
		t.Fatalf("ls -l of the put file: %q", out)
	}
	// The container executor runs it, changes a file, and get reads that.
	res, err := d.client.RunInWorkspace(ctx, "xfer", api.WorkspaceRunRequest{Script: "sh bin/hi.sh > hi.out && sha256sum data/blob.bin | cut -c1-8 >> hi.out", Executor: api.ExecutorContainer})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("container command: %v %+v", err, res)
	}
	out := d.must("workspace", "get", "xfer", "hi.out")
	if lines := strings.Split(out, "\n"); len(lines) != 3 || lines[0] != "hi" || len(lines[1]) != 8 {
		t.Fatalf("hi.out written in the container: %q", out)
	}
	// A file of an older version, and a missing one.
	if out := d.must("workspace", "get", "xfer", "bin/hi.sh", "--version", "2"); out != "#!/bin/sh\necho hi\n" {
		t.Fatalf("get --version 2: %q", out)
	}
	if _, errOut, code := d.run("workspace", "get", "xfer", "hi.out", "--version", "2"); code == 0 || !strings.Contains(errOut, "no hi.out in version 2") {
		t.Fatalf("get of a file not yet made: %d %q", code, errOut)
	}
	if _, errOut, code := d.run("workspace", "put", "xfer", "/etc/passwd", local); code == 0 || !strings.Contains(errOut, "relative to the workspace's root") {
		t.Fatalf("put to an absolute path: %d %q", code, errOut)
	}

	// Read, then write back on the version read: it lands while nobody
	// else changed the file, and is refused (nothing lands) once someone
	// did.
	var buf bytes.Buffer
	f, err := d.client.ReadWorkspaceFile(ctx, "xfer", "hi.out", -1, &buf)
	if err != nil || f.Version != 3 || f.Mode != 0o644 {
		t.Fatalf("read of hi.out: %+v, %v", f, err)
	}
	if _, err := d.client.WriteWorkspaceFile(ctx, "xfer", "notes.txt", strings.NewReader("elsewhere"), paddock.WriteWorkspaceFileOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := d.client.WriteWorkspaceFile(ctx, "xfer", "hi.out", strings.NewReader("mine\n"), paddock.WriteWorkspaceFileOptions{Base: f.Version})
	if err != nil || w.BaseVersion != 3 || w.Version != 5 {
		t.Fatalf("write on the version read, another file changed since: %+v, %v", w, err)
	}
	if _, err := d.client.WriteWorkspaceFile(ctx, "xfer", "hi.out", strings.NewReader("stale\n"), paddock.WriteWorkspaceFileOptions{Base: f.Version}); !errors.Is(err, paddock.ErrConflict) {
		t.Fatalf("write on a version the file changed after: %v, want a conflict", err)
	}
	if out := d.must("workspace", "get", "xfer", "hi.out"); out != "mine\n" {
		t.Fatalf("hi.out after the refused write: %q", out)
	}
	var hist api.WorkspaceHistory
	if err := json.Unmarshal([]byte(d.must("--json", "workspace", "log", "xfer")), &hist); err != nil || len(hist.Versions) != 5 ||
		hist.Versions[0].Command != "write hi.out" || hist.Versions[0].Executor != "files" {
		t.Fatalf("history: %v %+v", err, hist.Versions)
	}
	// The same content again makes no version.
	if w, err := d.client.WriteWorkspaceFile(ctx, "xfer", "hi.out", strings.NewReader("mine\n"), paddock.WriteWorkspaceFileOptions{}); err != nil || w.Version != 5 || len(w.Changes) != 0 {
		t.Fatalf("a repeated write: %+v, %v", w, err)
	}

	// The ledger has every command and write, read-only ones and the
	// refused one included, and survives a kill -9 (an entry of a command
	// that made no version is written within 20 ms of it).
	d.must("run", "xfer", "--", "cat", "notes.txt")
	time.Sleep(200 * time.Millisecond)
	d.kill9()
	d.start()
	var l api.WorkspaceLedger
	if err := json.Unmarshal([]byte(d.must("--json", "workspace", "ledger", "xfer")), &l); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l.Entries {
		got = append(got, e.Executor+": "+e.Command)
	}
	want := []string{
		"files: write data/blob.bin", "files: write bin/hi.sh", "shell: ls -l bin/hi.sh",
		"container: sh bin/hi.sh > hi.out && sha256sum data/blob.bin | cut -c1-8 >> hi.out",
		"files: write notes.txt", "files: write hi.out", "files: write hi.out", "files: write hi.out", "shell: cat notes.txt",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e := l.Entries[6]; e.Error == "" || e.Version != e.BaseVersion {
		t.Fatalf("the refused write's entry: %+v", e)
	}
	if e := l.Entries[8]; e.Version != 5 || e.BaseVersion != 5 || e.DurationMs <= 0 {
		t.Fatalf("a read-only command's entry: %+v", e)
	}
	if table := d.must("workspace", "ledger", "xfer"); !strings.Contains(table, "not kept") || !strings.Contains(table, "cat notes.txt") {
		t.Fatalf("ledger table:\n%s", table)
	}

	// Pruned by hand: the last two versions are kept, the older ones go
	// (every content of theirs is still held by version 4 or 5).
	if out := d.must("workspace", "prune", "xfer", "--keep", "2"); out != "dropped 3 versions, freed 0 bytes; oldest version now 4\n" {
		t.Fatalf("prune --keep 2: %q", out)
	}
	if _, errOut, code := d.run("workspace", "get", "xfer", "bin/hi.sh", "--version", "2"); code == 0 || !strings.Contains(errOut, "versions 4 to 5") {
		t.Fatalf("get of a pruned version: %d %q", code, errOut)
	}
	if out := d.must("workspace", "get", "xfer", "data/blob.bin", "--version", "4"); len(out) != len(blob) {
		t.Fatalf("a kept version's blob: %d bytes", len(out))
	}
}
