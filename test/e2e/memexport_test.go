package e2e

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestMemorySnapshotExportImport: a memory snapshot's file carries its
// memory image. Imported into the daemon that exported it, it restores
// the counting process where it was; a file whose memory part was changed
// is refused by its checksum; another daemon refuses the image (its seal
// is not under that daemon's key) until the exporter's key file is copied
// to it, and imports the files alone with --files-only.
func TestMemorySnapshotExportImport(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	src := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true})
	execOut(t, d, src.ID, "sh", "-c", counterLoop)
	pid, _ := execOut(t, d, src.ID, "cat", "/home/user/loop.pid")
	pid = strings.TrimSpace(pid)
	before := readCount(t, d, src.ID)
	var snap api.Snapshot
	mustJSON(t, d.must("--json", "snapshot", "create", src.ID, "--memory", "--name", "warm"), &snap)

	file := filepath.Join(t.TempDir(), "warm.tar")
	d.must("snapshot", "export", "warm", "-o", file)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	names, memBytes := tarNames(t, data)
	if !containsPrefix(names, "memory/") || memBytes < snap.MemorySize {
		t.Fatalf("export holds %v with %d bytes of memory files; want the memory image (%d bytes)", names, memBytes, snap.MemorySize)
	}

	// A changed byte in the memory part is caught.
	bad := filepath.Join(t.TempDir(), "bad.tar")
	if err := os.WriteFile(bad, flipMemoryByte(t, data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.run("snapshot", "import", bad, "--name", "bad"); code == 0 || !strings.Contains(errOut, "checksum") {
		t.Errorf("import of a tampered memory image: exit %d, %q", code, errOut)
	}

	// The same daemon takes its own file back, memory and all.
	var again api.Snapshot
	mustJSON(t, d.must("--json", "snapshot", "import", file, "--name", "again"), &again)
	if !again.Memory || again.MemorySize != snap.MemorySize {
		t.Fatalf("imported %+v; want memory of %d bytes", again, snap.MemorySize)
	}
	cp := create(t, d, api.CreateSandboxRequest{FromSnapshot: "again", KeepAlive: true})
	if n := readCount(t, d, cp.ID); n < before {
		t.Errorf("count in the restored import %d, before the snapshot %d", n, before)
	}
	if _, code := execOut(t, d, cp.ID, "kill", "-0", pid); code != 0 {
		t.Error("the counting process is not in the sandbox restored from the import")
	}

	// Another daemon has another key.
	d2 := startDaemon(t, daemonOpts{})
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = d2.client.ImportSnapshot(ctx, f, paddock.ImportOptions{Name: "foreign"})
	if !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "memory-export.key") {
		t.Fatalf("import of another daemon's memory image = %v; want a precondition failure naming the key", err)
	}
	var filesOnly api.Snapshot
	mustJSON(t, d2.must("--json", "snapshot", "import", file, "--files-only", "--name", "files"), &filesOnly)
	if filesOnly.Memory {
		t.Errorf("--files-only import kept memory: %+v", filesOnly)
	}
	fs := create(t, d2, api.CreateSandboxRequest{FromSnapshot: "files", Runtime: api.RuntimeGVisor, KeepAlive: true})
	if out, _ := execOut(t, d2, fs.ID, "cat", "/home/user/loop.pid"); strings.TrimSpace(out) != pid {
		t.Errorf("the files-only import's files: loop.pid %q, want %q", out, pid)
	}
	if _, err := os.Stat(filepath.Join(d2.stateDir, "memory-import")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(d2.stateDir, "memory-import")); len(ents) > 0 {
			t.Errorf("refused and files-only imports left %d staged memory images", len(ents))
		}
	}

	// With the exporter's key, the other daemon restores the image too.
	key, err := os.ReadFile(filepath.Join(d.stateDir, "memory-export.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d2.stateDir, "memory-export.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	var moved api.Snapshot
	mustJSON(t, d2.must("--json", "snapshot", "import", file, "--name", "moved"), &moved)
	if !moved.Memory {
		t.Fatalf("import with the exporter's key: %+v", moved)
	}
	other := create(t, d2, api.CreateSandboxRequest{FromSnapshot: "moved", KeepAlive: true})
	if n := readCount(t, d2, other.ID); n < before {
		t.Errorf("count on the other daemon %d, before the snapshot %d", n, before)
	}
	if _, code := execOut(t, d2, other.ID, "kill", "-0", pid); code != 0 {
		t.Error("the counting process did not move to the other daemon")
	}
	d2.must("snapshot", "rm", "moved")
	if _, err := os.Stat(filepath.Join(d2.stateDir, "memory-snapshots", moved.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the imported memory image outlived its snapshot: %v", err)
	}
}

// tarNames lists a tar's entries and sums the sizes of its memory files.
func tarNames(t *testing.T, data []byte) ([]string, int64) {
	t.Helper()
	var names []string
	var mem int64
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, mem
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.HasPrefix(h.Name, "memory/") {
			mem += h.Size
		}
	}
}

func containsPrefix(ss []string, p string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// flipMemoryByte rewrites an export with one byte of its largest memory
// file changed, the manifest as it was.
func flipMemoryByte(t *testing.T, data []byte) []byte {
	t.Helper()
	var largest string
	var size int64
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "memory/") && h.Size > size {
			largest, size = h.Name, h.Size
		}
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr = tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == largest {
			b[len(b)/2] ^= 0xff
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
