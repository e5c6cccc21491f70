package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"
)

func version(t *testing.T, lim Limits) (*Tree, *int) {
	t.Helper()
	reads := 0
	blobs := map[string][]byte{"h1": []byte("hello\n"), "h2": []byte("two")}
	mt := time.Unix(1000, 0)
	tr, err := New([]Entry{
		{Path: "src/a.txt", Mode: 0o644, Size: 6, Hash: "h1", ModTime: mt},
		{Path: "src", Dir: true, Mode: 0o755, ModTime: mt},
		{Path: "b", Mode: 0o600, Size: 3, Hash: "h2", ModTime: mt},
	}, func(h string) ([]byte, error) { reads++; return blobs[h], nil }, lim)
	if err != nil {
		t.Fatal(err)
	}
	return tr, &reads
}

func TestTreeReadsLazilyAndReportsNoChange(t *testing.T) {
	tr, reads := version(t, Limits{})
	if *reads != 0 {
		t.Fatalf("contents read before use: %d", *reads)
	}
	f, err := tr.Open("src/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	if string(b) != "hello\n" || *reads != 1 {
		t.Fatalf("read %q after %d content reads", b, *reads)
	}
	ents, _ := tr.ReadDir(".")
	if len(ents) != 2 || ents[0].Name() != "b" || !ents[1].IsDir() {
		t.Fatalf("root lists %v", ents)
	}
	if tr.Changed() || tr.Changes() != nil {
		t.Fatal("reading counted as a change")
	}
}

func TestTreeChanges(t *testing.T) {
	tr, reads := version(t, Limits{})
	f, err := tr.OpenFile("src/new.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("fresh"))
	f.Close()
	if err := tr.Rename("src", "lib"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Remove("b"); err != nil {
		t.Fatal(err)
	}
	chs := tr.Changes()
	var got []string
	for _, c := range chs {
		s := c.Path
		if c.Removed {
			s = "-" + s
		} else if c.Data != nil {
			s += "=" + string(c.Data)
		}
		got = append(got, s)
	}
	exp := map[string]bool{"-b": true, "lib": true, "lib/a.txt": true, "lib/new.txt=fresh": true, "-src": true, "-src/a.txt": true}
	if len(got) != len(exp) {
		t.Fatalf("changes %v", got)
	}
	for _, g := range got {
		if !exp[g] {
			t.Fatalf("unexpected change %q in %v", g, got)
		}
	}
	if *reads != 0 {
		t.Fatalf("a rename read %d contents", *reads)
	}
}

func TestTreeQuota(t *testing.T) {
	tr, _ := version(t, Limits{MaxBytes: 12, MaxEntries: 4})
	f, err := tr.OpenFile("c", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("d")); !IsQuota(err) {
		t.Fatalf("write past 12 bytes: %v", err)
	}
	if err := tr.Mkdir("d", 0o755); !IsQuota(err) {
		t.Fatalf("fifth entry: %v", err)
	}
	// Truncating an existing file frees its bytes.
	g, _ := tr.OpenFile("b", os.O_WRONLY|os.O_TRUNC, 0)
	g.Close()
	if _, err := f.Write([]byte("def")); err != nil {
		t.Fatalf("write after freeing: %v", err)
	}
	if b, n := tr.Usage(); b != 12 || n != 4 {
		t.Fatalf("usage %d bytes %d entries", b, n)
	}
}

func TestTreeErrors(t *testing.T) {
	tr, _ := version(t, Limits{})
	for _, c := range []struct {
		err  error
		want error
	}{
		{tr.Mkdir("b/x", 0o755), ErrNotDir},
		{tr.Mkdir("src", 0o755), fs.ErrExist},
		{tr.Remove("src"), ErrNotEmpty},
		{tr.Remove("nope"), fs.ErrNotExist},
		{tr.Rename("src", "src/inner"), fs.ErrInvalid},
		{tr.Mkdir("../x", 0o755), fs.ErrInvalid},
		{tr.Mkdir("/x", 0o755), fs.ErrInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("got %v, want %v", c.err, c.want)
		}
	}
	if _, err := tr.OpenFile("src", os.O_WRONLY, 0); !errors.Is(err, ErrIsDir) {
		t.Errorf("open dir for writing: %v", err)
	}
}

// TestTreeLeavesUntouchedDirectoriesAlone: a change in one directory
// lists only that change, without looking into the others.
func TestTreeLeavesUntouchedDirectoriesAlone(t *testing.T) {
	var entries []Entry
	for _, d := range []string{"a", "b", "c"} {
		entries = append(entries, Entry{Path: d, Dir: true, Mode: 0o755})
		for i := range 3 {
			entries = append(entries, Entry{Path: d + "/f" + string(rune('0'+i)), Mode: 0o644, Size: 1, Hash: "h"})
		}
	}
	tr, err := New(entries, func(string) ([]byte, error) { return []byte("x"), nil }, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := tr.OpenFile("b/new", os.O_WRONLY|os.O_CREATE, 0o644)
	f.Close()
	chs := tr.Changes()
	if len(chs) != 2 || chs[0].Path != "b" || chs[1].Path != "b/new" {
		t.Fatalf("changes %+v", chs)
	}
	if !tr.root.children["a"].lazy || !tr.root.children["c"].lazy {
		t.Fatal("untouched directories were made")
	}
}
