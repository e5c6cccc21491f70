package files

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"golang.org/x/sys/unix"
)

type tarEnt struct {
	name, link, body string
	typ              byte
	mode             int64
}

func buildTar(t testing.TB, ents []tarEnt) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func testUser() *users.User {
	return &users.User{Name: "user", UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Home: "/"}
}

// extractInto extracts into root/dest and reports whether anything
// appeared in root besides dest.
func extractInto(t testing.TB, data []byte, lim tarLimits) (string, []string, error) {
	root := t.TempDir()
	dest := filepath.Join(root, "dest")
	err := extractTar(context.Background(), bytes.NewReader(data), dest, testUser(), lim)
	var stray []string
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.Name() != "dest" {
			stray = append(stray, e.Name())
		}
	}
	return dest, stray, err
}

var testLimits = tarLimits{maxBytes: 1 << 20, maxEntries: 100}

func TestExtractTar(t *testing.T) {
	tests := []struct {
		name    string
		ents    []tarEnt
		wantErr error
		check   func(t *testing.T, dest string)
	}{
		{name: "files dirs and links", ents: []tarEnt{
			{name: "./", typ: tar.TypeDir},
			{name: "d/", typ: tar.TypeDir, mode: 0o750},
			{name: "d/f", typ: tar.TypeReg, body: "hello", mode: 0o4755},
			{name: "d/h", typ: tar.TypeLink, link: "d/f"},
			{name: "s", typ: tar.TypeSymlink, link: "/etc/passwd"},
			{name: "implicit/parent/file", typ: tar.TypeReg, body: "x"},
		}, check: func(t *testing.T, dest string) {
			b, err := os.ReadFile(filepath.Join(dest, "d/h"))
			if err != nil || string(b) != "hello" {
				t.Errorf("hard link content %q, %v", b, err)
			}
			fi, _ := os.Stat(filepath.Join(dest, "d/f"))
			if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
				t.Errorf("mode %v: setuid must be stripped", fi.Mode())
			}
			if l, _ := os.Readlink(filepath.Join(dest, "s")); l != "/etc/passwd" {
				t.Errorf("symlink %q", l)
			}
		}},
		{name: "file replaces an earlier symlink instead of writing through it", ents: []tarEnt{
			{name: "s", typ: tar.TypeSymlink, link: "../victim"},
			{name: "s", typ: tar.TypeReg, body: "safe"},
		}, check: func(t *testing.T, dest string) {
			fi, err := os.Lstat(filepath.Join(dest, "s"))
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("s is not a regular file: %v", err)
			}
		}},
		{name: "dotdot", ents: []tarEnt{{name: "a/../../victim", typ: tar.TypeReg}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "absolute", ents: []tarEnt{{name: "/victim", typ: tar.TypeReg}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "write through symlinked dir", ents: []tarEnt{
			{name: "l", typ: tar.TypeSymlink, link: ".."},
			{name: "l/victim", typ: tar.TypeReg, body: "x"},
		}, wantErr: errdefs.ErrInvalidArgument},
		{name: "symlinked dir deeper", ents: []tarEnt{
			{name: "a/", typ: tar.TypeDir},
			{name: "a/l", typ: tar.TypeSymlink, link: "../.."},
			{name: "a/l/b/victim", typ: tar.TypeDir},
		}, wantErr: errdefs.ErrInvalidArgument},
		{name: "hard link via dotdot", ents: []tarEnt{{name: "h", typ: tar.TypeLink, link: "../victim"}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "hard link through symlink", ents: []tarEnt{
			{name: "l", typ: tar.TypeSymlink, link: ".."},
			{name: "h", typ: tar.TypeLink, link: "l/victim"},
		}, wantErr: errdefs.ErrInvalidArgument},
		{name: "hard link to a symlink", ents: []tarEnt{
			{name: "l", typ: tar.TypeSymlink, link: "/etc/shadow"},
			{name: "h", typ: tar.TypeLink, link: "l"},
		}, wantErr: errdefs.ErrInvalidArgument},
		{name: "block device", ents: []tarEnt{{name: "b", typ: tar.TypeBlock}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "fifo", ents: []tarEnt{{name: "p", typ: tar.TypeFifo}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "too big", ents: []tarEnt{{name: "big", typ: tar.TypeReg, body: string(make([]byte, 2<<20))}}, wantErr: errTarTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest, stray, err := extractInto(t, buildTar(t, tt.ents), testLimits)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("extract: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if len(stray) > 0 {
				t.Fatalf("extraction escaped its directory: %v", stray)
			}
			if tt.check != nil {
				tt.check(t, dest)
			}
		})
	}
}

func TestExtractTarEntryLimit(t *testing.T) {
	var ents []tarEnt
	for i := range 101 {
		ents = append(ents, tarEnt{name: filepath.Join("d", string(rune('a'+i%26)), string(rune('a'+i/26))), typ: tar.TypeDir})
	}
	if _, _, err := extractInto(t, buildTar(t, ents), testLimits); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("err = %v, want resource exhausted", err)
	}
}

func TestExtractTarGarbage(t *testing.T) {
	if _, _, err := extractInto(t, bytes.Repeat([]byte{0xff}, 2048), testLimits); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid argument", err)
	}
}

func FuzzExtractTar(f *testing.F) {
	f.Add(buildTar(f, []tarEnt{{name: "a", typ: tar.TypeReg, body: "x"}}))
	f.Add(buildTar(f, []tarEnt{{name: "l", typ: tar.TypeSymlink, link: ".."}, {name: "l/x", typ: tar.TypeReg}}))
	f.Add(buildTar(f, []tarEnt{{name: "d/", typ: tar.TypeDir}, {name: "d/h", typ: tar.TypeLink, link: "../x"}}))
	f.Add(buildTar(f, []tarEnt{{name: "../x", typ: tar.TypeReg}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, stray, _ := extractInto(t, data, tarLimits{maxBytes: 1 << 16, maxEntries: 64})
		if len(stray) > 0 {
			t.Fatalf("extraction escaped its directory: %v", stray)
		}
	})
}

func FuzzCleanTarName(f *testing.F) {
	for _, s := range []string{"a/b", "../a", "/abs", "a/../../b", "./", "a//b/", "..", "a/..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		clean, err := cleanTarName(name)
		if err != nil {
			return
		}
		if filepath.IsAbs(clean) || clean == ".." || len(clean) >= 3 && clean[:3] == "../" {
			t.Fatalf("%q cleaned to %q, which leaves the directory", name, clean)
		}
		if !filepath.IsLocal(clean) && clean != "" {
			t.Fatalf("%q cleaned to non-local %q", name, clean)
		}
	})
}

// TestTarOutOneFilesystem: with xdev, a directory mounted inside the tree
// and a file bind-mounted over one come as names marked as mount points,
// with nothing read under or from them; the rest of the tree as always.
func TestTarOutOneFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	for _, d := range []string{"a", "mnt"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"a/f": "x", "hosts": "own", "outside": "bound"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", filepath.Join(dir, "mnt"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(dir, "mnt"), unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(dir, "mnt", "hidden"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file from another filesystem bound over one of the tree's.
	other := filepath.Join("/dev/shm", "paddock-xdev-"+filepath.Base(dir))
	if err := os.WriteFile(other, []byte("bound"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(other) })
	if err := unix.Mount(other, filepath.Join(dir, "hosts"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(dir, "hosts"), unix.MNT_DETACH) })

	for _, xdev := range []bool{false, true} {
		var buf bytes.Buffer
		if err := writeTar(context.Background(), &buf, dir, tarOptions{xdev: xdev}); err != nil {
			t.Fatal(err)
		}
		got := tarLines(t, buf.Bytes(), func(h *tar.Header, _ []byte) string {
			mark := ""
			if h.PAXRecords[wire.MountPointRecord] != "" {
				mark = " mount"
			}
			return fmt.Sprintf("%s %d%s", h.Name, h.Size, mark)
		})
		want := "a/ 0,a/f 1,hosts 5,mnt/ 0,mnt/hidden 1,outside 5"
		if xdev {
			want = "a/ 0,a/f 1,hosts 0 mount,mnt/ 0 mount,outside 5"
		}
		if strings.Join(got, ",") != want {
			t.Errorf("xdev %v: %s, want %s", xdev, strings.Join(got, ","), want)
		}
	}
}

// TestTarOutUnchangedBefore: with unchanged_before, a file whose inode
// has not changed since comes without its content, marked; one written,
// or only chmod-ed, after it comes whole; directories and symlinks as
// always.
func TestTarOutUnchangedBefore(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"old": "old content", "chmodded": "c", "rewritten": "r"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("old", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	since := time.Now().UnixNano()
	time.Sleep(20 * time.Millisecond)
	if err := os.Chmod(filepath.Join(dir, "chmodded"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rewritten"), []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTar(context.Background(), &buf, dir, tarOptions{unchangedBefore: since}); err != nil {
		t.Fatal(err)
	}
	got := tarLines(t, buf.Bytes(), func(h *tar.Header, body []byte) string {
		mark := ""
		if h.PAXRecords[wire.UnchangedRecord] != "" {
			mark = " unchanged"
		}
		return fmt.Sprintf("%s=%q%s", h.Name, body, mark)
	})
	want := `chmodded="c",link="",new="new",old=""` + " unchanged" + `,rewritten="rewritten"`
	if strings.Join(got, ",") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, ","), want)
	}
}

// TestTarOutOptionsRefused: a tar request with a malformed
// unchanged_before is a 400 naming the parameter, not an archive.
func TestTarOutOptionsRefused(t *testing.T) {
	a, home := testService(t)
	for _, v := range []string{"soon", "-1", "1e9"} {
		req := httptest.NewRequest(http.MethodGet, "/paddock/v1/tar?path="+url.QueryEscape(home)+"&unchanged_before="+v, nil)
		rec := httptest.NewRecorder()
		a.handleTarOut(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "unchanged_before") {
			t.Errorf("unchanged_before=%s: %d %s", v, rec.Code, rec.Body.String())
		}
	}
}
