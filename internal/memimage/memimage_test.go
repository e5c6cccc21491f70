package memimage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func image(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"checkpoint.img": "state", "pages.img": strings.Repeat("p", 10000), "pages_meta.img": "meta"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSealAndCheck(t *testing.T) {
	dir := image(t)
	m, err := Seal(dir, "runsc v1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 || m.Bytes() != 5+10000+4 {
		t.Fatalf("manifest %+v (%d bytes)", m, m.Bytes())
	}
	if _, err := Check(dir, "runsc v1"); err != nil {
		t.Fatalf("Check of a sealed image: %v", err)
	}
	if _, err := Seal(dir, "runsc v1", time.Now()); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second Seal = %v, want a conflict", err)
	}
}

func TestCheckRefuses(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		format  string
		damaged bool
		want    string
	}{
		{"other runtime version", func(*testing.T, string) {}, "runsc v2", false, "made by runsc v1 and this daemon runs runsc v2"},
		{"a byte changed", func(t *testing.T, dir string) { write(t, dir, "pages.img", strings.Repeat("p", 9999)+"q") }, "runsc v1", true, "pages.img changed"},
		{"truncated", func(t *testing.T, dir string) { write(t, dir, "pages.img", "ppp") }, "runsc v1", true, "pages.img changed"},
		{"file deleted", func(t *testing.T, dir string) { rm(t, dir, "pages_meta.img") }, "runsc v1", true, "pages_meta.img is missing"},
		{"file added", func(t *testing.T, dir string) { write(t, dir, "extra", "x") }, "runsc v1", true, "4 files"},
		{"manifest deleted", func(t *testing.T, dir string) { rm(t, dir, ManifestName) }, "runsc v1", true, "never finished"},
		{"manifest garbage", func(t *testing.T, dir string) { write(t, dir, ManifestName, "{") }, "runsc v1", true, "unreadable"},
		{"manifest names a path", func(t *testing.T, dir string) {
			write(t, dir, ManifestName, `{"format":"runsc v1","files":[{"name":"../x","size":1,"sha256":"00"}]}`)
		}, "runsc v1", true, "names"},
		{"file replaced by a symlink", func(t *testing.T, dir string) {
			rm(t, dir, "pages.img")
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "pages.img")); err != nil {
				t.Fatal(err)
			}
		}, "runsc v1", true, "symlink"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := image(t)
			if _, err := Seal(dir, "runsc v1", time.Now()); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, dir)
			_, err := Check(dir, tc.format)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("Check = %v, want a precondition failure with %q", err, tc.want)
			}
			if errors.Is(err, ErrDamaged) != tc.damaged {
				t.Errorf("Check = %v: damaged %v, want %v", err, errors.Is(err, ErrDamaged), tc.damaged)
			}
		})
	}
}

func TestSealRefuses(t *testing.T) {
	if _, err := Seal(t.TempDir(), "runsc v1", time.Now()); !errors.Is(err, ErrDamaged) {
		t.Errorf("Seal of an empty dir = %v, want damaged", err)
	}
	dir := image(t)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Seal(dir, "runsc v1", time.Now()); !errors.Is(err, ErrDamaged) {
		t.Errorf("Seal of a dir with a subdirectory = %v, want damaged", err)
	}
	if _, err := Seal(image(t), "", time.Now()); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Seal without a format = %v", err)
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// FuzzRead: any manifest on disk is either refused as damaged or read
// with every file name a plain name inside the image.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"format":"runsc v1","files":[{"name":"pages.img","size":3,"sha256":"00"}]}`))
	f.Add([]byte(`{"format":"runsc v1","files":[{"name":"../../etc/passwd","size":1,"sha256":"00"}]}`))
	f.Add([]byte(`{"format":"","files":[]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := Read(dir)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Read = %v, not ErrDamaged", err)
			}
			return
		}
		for _, f := range m.Files {
			if !validName(f.Name) || strings.ContainsRune(f.Name, '/') {
				t.Fatalf("Read accepted file name %q", f.Name)
			}
		}
		if m.Format == "" || len(m.Files) == 0 || len(m.Files) > maxFiles {
			t.Fatalf("Read accepted %+v", m)
		}
	})
}

// TestVerified: a file hashed by Seal or Check is not read again while it
// is as it was; a name added to it (a snapshot's link) keeps it known, and
// a write to it is caught even with its modification time set back.
func TestVerified(t *testing.T) {
	dir := image(t)
	var v Verified
	if _, err := v.Seal(dir, "runsc v1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if v.Reads() != 3 {
		t.Fatalf("Seal read %d files, want 3", v.Reads())
	}
	if _, err := v.Check(dir, "runsc v1"); err != nil || v.Reads() != 3 {
		t.Fatalf("Check after Seal: %v, %d files read; want none read again", err, v.Reads())
	}

	// A snapshot's hard links, then the first name removed.
	snap := filepath.Join(t.TempDir(), "snap")
	if err := os.Mkdir(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if err := os.Link(filepath.Join(dir, e.Name()), filepath.Join(snap, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Check(dir, "runsc v1"); err != nil || v.Reads() != 3 {
		t.Fatalf("Check after linking: %v, %d files read; want none read again", err, v.Reads())
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(snap, "runsc v1"); err != nil || v.Reads() != 3 {
		t.Fatalf("Check of the links after the first names went: %v, %d files read; want none read again", err, v.Reads())
	}

	// A byte changed in place, the size and modification time put back.
	pages := filepath.Join(snap, "pages.img")
	st, err := os.Stat(pages)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(pages, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("q"), 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(pages, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(snap, "runsc v1"); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "pages.img changed") {
		t.Fatalf("Check after a write with the time set back = %v, want pages.img damaged", err)
	}
	if v.Reads() != 4 {
		t.Errorf("%d files read; want the written one read again", v.Reads())
	}

	// A nil Verified reads every time.
	var none *Verified
	dir = image(t)
	if _, err := none.Seal(dir, "runsc v1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := none.Check(dir, "runsc v1"); err != nil || none.Reads() != 0 {
		t.Fatalf("nil Verified: %v, reads %d", err, none.Reads())
	}
}
