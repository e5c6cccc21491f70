package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

// entry is one tar entry a test writes.
type entry struct {
	name     string
	typ      byte
	mode     int64
	uid      int
	body     string
	link     string
	pax      map[string]string
	devmajor int64
	mtime    time.Time // zero: a fixed time in 2023
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.uid, Linkname: e.link,
			PAXRecords: e.pax, ModTime: e.mtime, Format: tar.FormatPAX, Devmajor: e.devmajor}
		if e.mtime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a layer keeps owners and overlay's trusted.overlay.opaque attribute")
	}
}

// agentHome is a tar as the agent writes one of /home/user.
func agentHome(t *testing.T) []byte {
	return tarOf(t,
		entry{name: "a.txt", typ: tar.TypeReg, mode: 0o644, uid: 1000, body: "alpha\n"},
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o750, uid: 1000,
			// Nothing the sandbox says about attributes reaches the layer.
			pax: map[string]string{opaqueRecord: "y", paxXattrPrefix + "user.x": "1"}},
		entry{name: "bin/run.sh", typ: tar.TypeReg, mode: 0o755, uid: 1000, body: "#!/bin/sh\necho hi\n"},
		entry{name: "link", typ: tar.TypeSymlink, mode: 0o777, uid: 1000, link: "../../etc/passwd"},
		entry{name: "root-owned", typ: tar.TypeReg, mode: 0o600, uid: 0, body: "r"},
	)
}

func TestHomeLayerExtractsUnderHomeUser(t *testing.T) {
	needRoot(t)
	dst := t.TempDir()
	if err := homeLayer(context.Background(), bytes.NewReader(agentHome(t)), dst, snapshot.Limits{MaxEntries: 100, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	check := func(rel string, mode os.FileMode, uid int) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != mode || int(st.Uid) != uid {
			t.Errorf("%s: mode %v owner %d, want %v %d", rel, fi.Mode(), st.Uid, mode, uid)
		}
	}
	check("home", os.ModeDir|0o755, 0)
	check("home/user", os.ModeDir|0o755, homeUID)
	check("home/user/a.txt", 0o644, 1000)
	check("home/user/bin", os.ModeDir|0o750, 1000)
	check("home/user/bin/run.sh", 0o755, 1000)
	check("home/user/root-owned", 0o600, 0)
	if b, err := os.ReadFile(filepath.Join(dst, "home/user/bin/run.sh")); err != nil || string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("run.sh: %q %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "home/user/link")); err != nil || l != "../../etc/passwd" {
		t.Errorf("link: %q %v", l, err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(dst, "home/user"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("home/user is not opaque: %q %v", buf[:n], err)
	}
	for _, x := range []string{"trusted.overlay.opaque", "user.x"} {
		if _, err := unix.Lgetxattr(filepath.Join(dst, "home/user/bin"), x, buf); !errors.Is(err, unix.ENODATA) {
			t.Errorf("home/user/bin carries %s from the sandbox's stream: %v", x, err)
		}
	}
	ents, _ := os.ReadDir(dst)
	if len(ents) != 1 {
		t.Errorf("layer top: %v", ents)
	}
}

func TestHomeLayerBoundsAndRefusals(t *testing.T) {
	needRoot(t)
	big := strings.Repeat("x", 4096)
	many := make([]entry, 0, 20)
	for i := range 20 {
		many = append(many, entry{name: "f" + strings.Repeat("0", i), typ: tar.TypeReg, mode: 0o644, body: "1"})
	}
	for _, tc := range []struct {
		name    string
		stream  []byte
		lim     snapshot.Limits
		want    error
		escaped string
	}{
		{"bytes over the claim", tarOf(t, entry{name: "big", typ: tar.TypeReg, mode: 0o644, body: big}), snapshot.Limits{MaxEntries: 100, MaxBytes: 1000}, errdefs.ErrResourceExhausted, ""},
		{"too many entries", tarOf(t, many...), snapshot.Limits{MaxEntries: 10, MaxBytes: 1 << 20}, errdefs.ErrResourceExhausted, ""},
		{"climbs out", tarOf(t, entry{name: "../../../escaped", typ: tar.TypeReg, mode: 0o644, body: "x"}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, "escaped"},
		{"absolute", tarOf(t, entry{name: "/abs", typ: tar.TypeReg, mode: 0o644, body: "x"}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"whiteout from the sandbox", tarOf(t, entry{name: "wh", typ: tar.TypeChar}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"device", tarOf(t, entry{name: "dev", typ: tar.TypeChar, devmajor: 1}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"hard link", tarOf(t, entry{name: "a", typ: tar.TypeReg, body: "a"}, entry{name: "b", typ: tar.TypeLink, link: "a"}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"through a symlink", tarOf(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"}, entry{name: "l/x", typ: tar.TypeReg, body: "x"}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"twice", tarOf(t, entry{name: "a", typ: tar.TypeReg, body: "a"}, entry{name: "a", typ: tar.TypeReg, body: "a"}), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"sparse (pax)", append(tarsafetest.PAXSparse("s", 1<<40, []byte("x")), tarsafetest.End()...), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"sparse (gnu)", append(tarsafetest.GNUSparse("s", 1<<40, []byte("x")), tarsafetest.End()...), snapshot.Limits{}, snapshot.ErrUnsafeArchive, ""},
		{"truncated", tarOf(t, entry{name: "a", typ: tar.TypeReg, body: big})[:1024], snapshot.Limits{}, errdefs.ErrUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "layer")
			if err := os.Mkdir(dst, 0o700); err != nil {
				t.Fatal(err)
			}
			err := homeLayer(context.Background(), bytes.NewReader(tc.stream), dst, tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.escaped != "" {
				for _, p := range []string{filepath.Join(parent, tc.escaped), filepath.Join(dst, tc.escaped), filepath.Join(dst, "home", tc.escaped)} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s was written", p)
					}
				}
			}
		})
	}
}

// readTar lists a tar's entries as "name type mode uid [body|->link]"
// and fails on any extended attribute record.
func readTar(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, paxXattrPrefix) {
				t.Errorf("%s carries %s", h.Name, k)
			}
		}
		body, _ := io.ReadAll(tr)
		s := fmt.Sprintf("%s %c %o %d", h.Name, h.Typeflag, h.Mode, h.Uid)
		switch h.Typeflag {
		case tar.TypeReg:
			s += " " + string(body)
		case tar.TypeSymlink:
			s += " ->" + h.Linkname
		}
		out = append(out, s)
	}
}

func TestSplitHomeLayer(t *testing.T) {
	opaque := map[string]string{opaqueRecord: "y"}
	layer := tarOf(t,
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "etc/motd", typ: tar.TypeReg, mode: 0o644, body: "outside"},
		entry{name: "home/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "home/user/", typ: tar.TypeDir, mode: 0o700, uid: 1000},
		entry{name: "home/user/cache/", typ: tar.TypeDir, mode: 0o755, uid: 1000, pax: opaque},
		entry{name: "home/user/cache/new", typ: tar.TypeReg, mode: 0o644, uid: 1000, body: "n"},
		entry{name: "home/user/gone", typ: tar.TypeChar, mode: 0o600},
		entry{name: "home/user/run.sh", typ: tar.TypeReg, mode: 0o755, uid: 1000, body: "r",
			pax: map[string]string{paxXattrPrefix + "security.capability": "\x01\x00\x00\x02" + strings.Repeat("\x00", 8)}},
		entry{name: "home/user/ln", typ: tar.TypeSymlink, mode: 0o777, uid: 1000, link: "run.sh"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	)
	var body bytes.Buffer
	got, err := splitHomeLayer(bytes.NewReader(layer), &body)
	if err != nil {
		t.Fatal(err)
	}
	want := homeSplit{
		Deletions: []deletion{{Path: "/home/user/cache", Contents: true}, {Path: "/home/user/gone"}},
		Outside:   3,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("split = %+v, want %+v", got, want)
	}
	wantTar := []string{"cache/ 5 755 1000", "cache/new 0 644 1000 n", "run.sh 0 755 1000 r", "ln 2 777 1000 ->run.sh"}
	if g := readTar(t, body.Bytes()); !reflect.DeepEqual(g, wantTar) {
		t.Errorf("tar for the agent = %q, want %q", g, wantTar)
	}
	// Without a writer, only the deletions are read.
	if got2, err := splitHomeLayer(bytes.NewReader(layer), nil); err != nil || !reflect.DeepEqual(got2, want) {
		t.Errorf("split without a writer = %+v, %v", got2, err)
	}
}

func TestSplitHomeLayerHomeRemoved(t *testing.T) {
	for _, layer := range [][]byte{
		tarOf(t, entry{name: "home/", typ: tar.TypeDir, mode: 0o755}, entry{name: "home/user/", typ: tar.TypeDir, mode: 0o755, pax: map[string]string{opaqueRecord: "y"}}),
		tarOf(t, entry{name: "home/", typ: tar.TypeDir, mode: 0o755}, entry{name: "home/user", typ: tar.TypeChar}),
		tarOf(t, entry{name: "home", typ: tar.TypeChar}),
	} {
		got, err := splitHomeLayer(bytes.NewReader(layer), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if want := []deletion{{Path: homePath, Contents: true}}; !reflect.DeepEqual(got.Deletions, want) {
			t.Errorf("deletions = %+v, want %+v", got.Deletions, want)
		}
	}
}

func TestSplitHomeLayerRefuses(t *testing.T) {
	for name, layer := range map[string][]byte{
		"device":    tarOf(t, entry{name: "home/user/dev", typ: tar.TypeChar, devmajor: 1}),
		"hard link": tarOf(t, entry{name: "home/user/a", typ: tar.TypeReg, body: "a"}, entry{name: "home/user/b", typ: tar.TypeLink, link: "home/user/a"}),
		"unclean":   tarOf(t, entry{name: "home/user/../../etc/x", typ: tar.TypeReg, body: "a"}),
		"fifo":      tarOf(t, entry{name: "home/user/p", typ: tar.TypeFifo}),
	} {
		if _, err := splitHomeLayer(bytes.NewReader(layer), io.Discard); !errors.Is(err, snapshot.ErrUnsafeArchive) {
			t.Errorf("%s: err = %v, want an unsafe entry", name, err)
		}
	}
}

// A layer captured here, read back as the snapshot store writes it, gives
// the agent the same files, and clears the home first (it is opaque).
func TestHomeLayerRoundTrip(t *testing.T) {
	needRoot(t)
	dst := t.TempDir()
	if err := homeLayer(context.Background(), bytes.NewReader(agentHome(t)), dst, snapshot.Limits{}); err != nil {
		t.Fatal(err)
	}
	var tree bytes.Buffer
	if err := snapshot.WriteTree(context.Background(), dst, &tree, snapshot.TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	got, err := splitHomeLayer(&tree, &body)
	if err != nil {
		t.Fatal(err)
	}
	if want := (homeSplit{Deletions: []deletion{{Path: homePath, Contents: true}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("split = %+v, want %+v", got, want)
	}
	want := []string{"a.txt 0 644 1000 alpha\n", "bin/ 5 750 1000", "bin/run.sh 0 755 1000 #!/bin/sh\necho hi\n", "link 2 777 1000 ->../../etc/passwd", "root-owned 0 600 0 r"}
	if g := readTar(t, body.Bytes()); !reflect.DeepEqual(g, want) {
		t.Errorf("tar for the agent = %q, want %q", g, want)
	}
}

func TestFirstHomeLayer(t *testing.T) {
	whole := deletion{Path: homePath, Contents: true}
	for _, tc := range []struct {
		splits []homeSplit
		want   int
	}{
		{nil, 0},
		{[]homeSplit{{}, {}}, 0},
		{[]homeSplit{{Deletions: []deletion{whole}}, {Deletions: []deletion{whole}}, {}}, 1},
		// A deletion inside the home, or of its contents in a subdirectory, hides nothing below whole.
		{[]homeSplit{{Deletions: []deletion{whole}}, {Deletions: []deletion{{Path: homePath + "/x", Contents: true}, {Path: homePath + "/y"}}}}, 0},
		{[]homeSplit{{}, {Deletions: []deletion{{Path: homePath + "/a"}, whole}}}, 1},
	} {
		if got := firstHomeLayer(tc.splits); got != tc.want {
			t.Errorf("firstHomeLayer(%+v) = %d, want %d", tc.splits, got, tc.want)
		}
	}
}
