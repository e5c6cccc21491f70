package files

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// within runs fn and fails the test if it has not returned in 5 s: the bug
// these tests guard against is a handler that never returns.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return in 5s (blocked on a special file)", what)
	}
}

// specialFiles makes a named pipe and a listening unix socket in dir.
func specialFiles(t *testing.T, dir string) (fifo, sock string) {
	t.Helper()
	fifo = filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return fifo, sock
}

func TestDownloadSpecialFile(t *testing.T) {
	a, home := testService(t)
	specialFiles(t, home)
	if err := os.Symlink("fifo", filepath.Join(home, "link-to-fifo")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"fifo", "is a named pipe, not a regular file"},
		{"link-to-fifo", "is a named pipe, not a regular file"},
		{"sock", "is a socket, not a regular file"},
		{".", "is a directory, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			within(t, "download of "+tc.name, func() {
				a.handleDownload(rec, httptest.NewRequest(http.MethodGet, "/files?path="+tc.name, nil))
			})
			var body struct{ Message string }
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(body.Message, tc.want) {
				t.Errorf("download %s: %d %q, want 400 saying %q", tc.name, rec.Code, body.Message, tc.want)
			}
		})
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		_, err := openRegularTimed(t, "/dev/null")
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "character device") {
			t.Errorf("open /dev/null: %v, want a character device refusal", err)
		}
	}
}

func openRegularTimed(t *testing.T, path string) (f *os.File, err error) {
	t.Helper()
	within(t, "open "+path, func() { f, _, err = safefs.OpenRegular("open", path, os.O_RDONLY) })
	if f != nil {
		f.Close()
	}
	return f, err
}

// TestUploadOntoSpecialFile: an upload to a pipe's or socket's path
// replaces it with the uploaded file, without blocking on it.
func TestUploadOntoSpecialFile(t *testing.T) {
	a, home := testService(t)
	fifo, sock := specialFiles(t, home)
	u, err := a.userFor(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, sock} {
		within(t, "upload onto "+p, func() {
			if _, err := a.writeFile(u, p, strings.NewReader("data"), nil); err != nil {
				t.Errorf("upload onto %s: %v", p, err)
			}
		})
		if b, err := os.ReadFile(p); err != nil || string(b) != "data" {
			t.Errorf("%s after upload: %q %v", p, b, err)
		}
	}
}

// TestTarOutSkipsSpecialFiles: a tree with a pipe in it is archived
// without it, and without blocking.
func TestTarOutSkipsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	specialFiles(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	within(t, "writeTar", func() {
		if err := writeTar(context.Background(), &buf, dir, tarOptions{}); err != nil {
			t.Error(err)
		}
	})
	names := tarNames(t, buf.Bytes())
	if strings.Join(names, ",") != "f" {
		t.Errorf("archived %v, want only f", names)
	}
}

// TestUserDBSpecialFile: /etc/passwd replaced by a pipe (root in the
// sandbox can) fails requests that need it, quickly and clearly.
func TestUserDBSpecialFile(t *testing.T) {
	a, _ := testService(t)
	passwd := filepath.Join(a.users.EtcDir(), "passwd")
	if err := os.Remove(passwd); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(passwd, 0o644); err != nil {
		t.Fatal(err)
	}
	within(t, "user lookup", func() {
		_, err := a.userFor(context.Background(), "user")
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "regular file") {
			t.Errorf("user lookup with a pipe for /etc/passwd: %v", err)
		}
	})
}

func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	return tarLines(t, data, func(hdr *tar.Header, _ []byte) string { return hdr.Name })
}

// tarLines reads a tar and describes each entry, from its header and
// content, with line.
func tarLines(t *testing.T, data []byte, line func(hdr *tar.Header, body []byte) string) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, line(hdr, body))
	}
}
