package adversarial

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestFilesSpecialFiles: reading a named pipe or a device through the
// files API is a quick 400 that names the file's type, never a request that
// hangs and leaves an agent thread blocked in open(2); a tar export of a
// tree with a pipe in it skips the pipe; an upload onto a pipe replaces it.
func TestFilesSpecialFiles(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	if out, code := execOut(t, d, sb.ID, "sh", "-c", "mkfifo /home/user/fifo && echo kept > /home/user/plain"); code != 0 {
		t.Fatalf("mkfifo: %d %s", code, out)
	}
	threads := func() int {
		out, code := execOut(t, d, sb.ID, "sh", "-c", "ls /proc/1/task | wc -l")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if code != 0 || err != nil {
			t.Fatalf("count agent threads: %d %q", code, out)
		}
		return n
	}
	before := threads()

	const tries = 8
	for i := range tries {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		err := d.client.ReadFile(ctx, sb.ID, "/home/user/fifo", io.Discard)
		cancel()
		if !errors.Is(err, paddock.ErrInvalidArgument) || !strings.Contains(err.Error(), "is a named pipe, not a regular file") {
			t.Fatalf("read #%d of a fifo after %s: %v, want invalid argument naming a named pipe", i, time.Since(start).Round(time.Millisecond), err)
		}
	}
	if err := d.client.ReadFile(ctxT(t, 20*time.Second), sb.ID, "/dev/null", io.Discard); !errors.Is(err, paddock.ErrInvalidArgument) || !strings.Contains(err.Error(), "character device") {
		t.Fatalf("read /dev/null: %v, want invalid argument naming a character device", err)
	}
	if after := threads(); after >= before+tries {
		t.Errorf("agent threads went from %d to %d over %d refused reads: reads are still blocking", before, after, tries)
	}

	// The CLI says what is wrong and exits non-zero.
	dest := filepath.Join(t.TempDir(), "out")
	_, errOut, code := d.run("cp", sb.ID+":/home/user/fifo", dest)
	if code == 0 || !strings.Contains(errOut, "named pipe") {
		t.Errorf("paddock cp of a fifo: exit %d, stderr %q", code, errOut)
	}

	var tarBuf bytes.Buffer
	if err := d.client.TarOut(ctxT(t, 30*time.Second), sb.ID, "/home/user", &tarBuf); err != nil {
		t.Fatalf("tar export of a tree with a fifo: %v", err)
	}
	tarPath := filepath.Join(t.TempDir(), "out.tar")
	if err := os.WriteFile(tarPath, tarBuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if files := readTar(t, tarPath); files["plain"] != "kept\n" {
		t.Errorf("tar export: %v", keys(files))
	}

	if _, err := d.client.WriteFile(ctxT(t, 20*time.Second), sb.ID, "/home/user/fifo", strings.NewReader("now a file"), 0o644); err != nil {
		t.Fatalf("upload onto a fifo: %v", err)
	}
	var got bytes.Buffer
	if err := d.client.ReadFile(ctxT(t, 20*time.Second), sb.ID, "/home/user/fifo", &got); err != nil || got.String() != "now a file" {
		t.Fatalf("read back the upload: %q %v", got.String(), err)
	}
}

// TestAgentBinaryNotReplaceable: a tar upload or a file write over the
// agent's binary (a read-only bind mount) is a 4xx that says why, not a
// 500.
func TestAgentBinaryNotReplaceable(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	_ = tw.WriteHeader(&tar.Header{Name: "paddock", Typeflag: tar.TypeReg, Mode: 0o755, Size: 4})
	_, _ = tw.Write([]byte("evil"))
	_ = tw.Close()
	err := d.client.TarIn(ctxT(t, 30*time.Second), sb.ID, "/.paddock/bin", bytes.NewReader(tarBuf.Bytes()), paddock.AsUser("root"))
	var ae *paddock.APIError
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 {
		t.Fatalf("tar over the agent binary: %v, want a 4xx", err)
	}
	t.Logf("tar over the agent binary: %d %s: %s", ae.Status, ae.Code, ae.Message)
	_, err = d.client.WriteFile(ctxT(t, 30*time.Second), sb.ID, "/.paddock/bin/paddock", strings.NewReader("evil"), 0o755, paddock.AsUser("root"))
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 {
		t.Fatalf("write over the agent binary: %v, want a 4xx", err)
	}
	t.Logf("write over the agent binary: %d %s: %s", ae.Status, ae.Code, ae.Message)
	if out, code := execOut(t, d, sb.ID, "true"); code != 0 {
		t.Fatalf("the sandbox no longer runs commands: %d %s", code, out)
	}
}
