package e2b

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func tarOfEntries(t testing.TB, zip bool, entries ...uploadEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if zip {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.linkname, Size: int64(len(e.data))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func file(name, data string) uploadEntry {
	return uploadEntry{name: name, typ: tar.TypeReg, data: []byte(data)}
}

func TestReadUpload(t *testing.T) {
	for _, zip := range []bool{false, true} {
		b := tarOfEntries(t, zip, uploadEntry{name: "folder/", typ: tar.TypeDir}, file("folder/a.txt", "alpha"), file("./b.txt", "beta"))
		got, n, err := readUpload(bytes.NewReader(b), 1000)
		if err != nil {
			t.Fatalf("gzip %v: %v", zip, err)
		}
		// 9 bytes of content, the names and what each entry costs.
		if n != 9+int64(len("folder")+len("folder/a.txt")+len("b.txt"))+3*entryOverhead || len(got) != 3 || got[0].name != "folder" || got[1].name != "folder/a.txt" || got[2].name != "b.txt" {
			t.Fatalf("gzip %v: %d bytes, %+v", zip, n, got)
		}
	}
	// Bounds and names: bytes beyond what is left, a name that leaves the
	// context, a device, not a tar at all.
	for _, c := range []struct {
		body []byte
		code error
	}{
		{tarOfEntries(t, true, file("big", strings.Repeat("x", 1001))), errdefs.ErrResourceExhausted},
		{tarOfEntries(t, false, file("../escape", "x")), errdefs.ErrInvalidArgument},
		{tarOfEntries(t, false, uploadEntry{name: "dev", typ: tar.TypeChar}), errdefs.ErrInvalidArgument},
		{[]byte("\x1f\x8bnot gzip at all"), errdefs.ErrInvalidArgument},
		{bytes.Repeat([]byte("junk"), 200), errdefs.ErrInvalidArgument},
	} {
		if _, _, err := readUpload(bytes.NewReader(c.body), 1000); !errors.Is(err, c.code) {
			t.Errorf("%q: err %v, want %v", c.body[:min(len(c.body), 20)], err, c.code)
		}
	}
}

func FuzzReadUpload(f *testing.F) {
	f.Add(tarOfEntries(f, false, file("a/b", "x"), uploadEntry{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}))
	f.Add(tarOfEntries(f, true, file("a", "y")))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, n, err := readUpload(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		if n > 1<<16 || len(es) > maxBuildEntries {
			t.Fatalf("bounds not kept: %d bytes, %d entries", n, len(es))
		}
		for _, e := range es {
			if e.name == "" || strings.HasPrefix(e.name, "/") || hasDotDot(e.name) {
				t.Fatalf("name %q accepted", e.name)
			}
		}
	})
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"folder/*.txt", "folder/a.txt", true},
		{"folder/*.txt", "folder/sub/a.txt", false},
		{"folder/**/*.txt", "folder/sub/deep/a.txt", true},
		{"folder/**/*.txt", "folder/a.txt", true},
		{"**", "anything/at/all", true},
		{"single.txt", "single.txt", true},
		{"single.txt", "single.txt.bak", false},
		{"[", "[", false},
	} {
		if got := globMatch(c.pat, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pat, c.name, got)
		}
	}
}

func TestPlaceCopy(t *testing.T) {
	up := []uploadEntry{
		{name: "folder", typ: tar.TypeDir}, file("folder/a.txt", "a"), file("folder/c.md", "c"),
		{name: "folder/sub", typ: tar.TypeDir}, file("folder/sub/d.txt", "d"), file("single.txt", "s"),
	}
	names := func(p placed) string {
		var s []string
		for _, e := range p.entries {
			s = append(s, e.name)
		}
		return p.dir + ":" + strings.Join(s, ",")
	}
	for _, c := range []struct{ src, dest, want string }{
		{"folder/*.txt", "folder", "/home/user/folder:a.txt"},
		{"folder", "/app", "/app:a.txt,c.md,sub,sub/d.txt"},
		{"folder/sub", "/opt/x/", "/opt/x:d.txt"},
		{"single.txt", "/opt/app/renamed.txt", "/opt/app:renamed.txt"},
		{"single.txt", "/opt/app/", "/opt/app:single.txt"},
		{"single.txt", "rel", "/home/user:rel"},
	} {
		p, err := placeCopy(up, c.src, c.dest, "/home/user")
		if err != nil {
			t.Fatalf("%s -> %s: %v", c.src, c.dest, err)
		}
		if got := names(p); got != c.want {
			t.Errorf("%s -> %s: %s, want %s", c.src, c.dest, got, c.want)
		}
	}
	if _, err := placeCopy(up, "nothing/*", "/x", "/"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a copy that matches nothing: %v", err)
	}
}

func TestE2BSpec(t *testing.T) {
	uploads := map[string][]uploadEntry{"ab12ab12ab12ab12": {file("x.txt", "x")}}
	def := buildStart{
		FromImage: "e2bdev/base", StartCmd: "serve", ReadyCmd: "test -f /tmp/up",
		Steps: []buildStep{
			{Type: "ENV", Args: []string{"A", "1", "B", "2"}},
			{Type: "RUN", Args: []string{"id", "root"}},
			{Type: "WORKDIR", Args: []string{"app"}},
			{Type: "COPY", Args: []string{"x.txt", "dst/", "", "0755"}, FilesHash: "ab12ab12ab12ab12"},
			{Type: "USER", Args: []string{"root"}},
		},
	}
	spec, _, origin, err := e2bSpec("tpl", def, uploads)
	if err != nil {
		t.Fatal(err)
	}
	// Which of E2B's steps each comes from: the two E2B defaults first.
	if got := fmt.Sprint(origin); got != "[0 0 1 2 2 2 3 3 4 4 5]" {
		t.Fatalf("origin %s", got)
	}
	var kinds []string
	for _, s := range spec.Steps {
		k := s.Kind
		switch s.Kind {
		case api.StepUser:
			k += "=" + s.User
		case api.StepWorkdir:
			k += "=" + s.Dir
		case api.StepCopy:
			k += "=" + s.Src + ">" + s.Dst
		case api.StepRun:
			k += "=" + s.Run
		}
		kinds = append(kinds, k)
	}
	want := "user=user workdir=/home/user env user=root run=id user=user run=mkdir -p '/home/user/app' workdir=/home/user/app " +
		"copy=s4>/home/user/app/dst run=chmod -R 0755 '/home/user/app/dst/x.txt' user=root"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("steps:\n got %s\nwant %s", got, want)
	}
	if spec.Image != "base" || spec.User != "root" || spec.Ready == nil || spec.Ready.Cmd != "test -f /tmp/up" || strings.Join(spec.Start, " ") != "/bin/sh -c serve" {
		t.Fatalf("spec: %+v", spec)
	}

	for _, bad := range []buildStart{
		{Steps: []buildStep{{Type: "RUN", Args: []string{"id", "root123"}}}},
		{Steps: []buildStep{{Type: "COPY", Args: []string{"x", "/y"}, FilesHash: "ffffffffffffffff"}}},
		{Steps: []buildStep{{Type: "ENV", Args: []string{"odd"}}}},
		{Steps: []buildStep{{Type: "HEALTHCHECK"}}},
		{Steps: []buildStep{{Type: "USER", Args: []string{"guest"}}}},
		{ReadyCmd: "true"},
		{FromImage: "a", FromTemplate: "b"},
		{FromImageRegistry: []byte(`{"type":"registry"}`)},
		{FromImage: "r.example/x:1", FromImageRegistry: []byte(`{"type":"aws","awsAccessKeyId":"a","awsSecretAccessKey":"b","awsRegion":"c"}`)},
		{FromTemplate: "t", FromImageRegistry: []byte(`{"type":"registry","username":"u","password":"p"}`)},
		{FromImageRegistry: []byte(`{"type":"registry","username":"u","password":"p"}`)},
	} {
		if _, _, _, err := e2bSpec("tpl", bad, uploads); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want invalid", bad, err)
		}
	}
}

func TestBuildTableBounds(t *testing.T) {
	tb := newBuildTable()
	var mine []*build
	for i := 0; i < maxBuildsPending; i++ {
		b, err := tb.add("a", "t", []string{"default"})
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, b)
	}
	if _, err := tb.add("a", "t", []string{"default"}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a key's builds past the bound: %v", err)
	}
	if _, err := tb.add("b", "t", []string{"default"}); err != nil {
		t.Fatalf("another key is not held back by the first's builds: %v", err)
	}
	// A build never started is let go after a while, and makes room.
	mine[0].created = mine[0].created.Add(-2 * buildKeptFor)
	if _, err := tb.add("a", "t", []string{"default"}); err != nil {
		t.Fatalf("an abandoned build still counts: %v", err)
	}
	if tb.byToken[mine[0].token] != nil {
		t.Fatal("the abandoned build's upload token still works")
	}
}

func TestBuildTags(t *testing.T) {
	for _, c := range []struct {
		ref  string
		more []string
		name string
		tags []string
	}{
		{"py", nil, "py", []string{"default"}},
		{"py:v1", nil, "py", []string{"v1"}},
		{"py:v1", []string{"prod", "default", "v1"}, "py", []string{"default", "prod", "v1"}},
		{"py", []string{"a"}, "py", []string{"a"}},
		{"py:", nil, "", nil},
		{":v1", nil, "", nil},
		{"py", []string{"x:y"}, "", nil},
		{"py:a:b", nil, "", nil},
	} {
		name, tags, err := buildTags(c.ref, c.more)
		if name != c.name || !slices.Equal(tags, c.tags) || (err == nil) != (c.name != "") {
			t.Errorf("buildTags(%q, %q) = %q %q %v", c.ref, c.more, name, tags, err)
		}
	}
}

// TestBuildTableSharedUploads: files uploaded while two builds of one
// name by one key wait serve either, pass to the one still waiting when
// the other ends, and are never another key's or another name's; the
// bytes held are counted once throughout.
func TestBuildTableSharedUploads(t *testing.T) {
	tb := newBuildTable()
	older, _ := tb.add("a", "t", []string{"v1"})
	newer, _ := tb.add("a", "t", []string{"v2"})
	other, _ := tb.add("b", "t", []string{"default"})
	elsewhere, _ := tb.add("a", "u", []string{"default"})
	put := func(b *build, hash string, n int) {
		b.uploads[hash] = []uploadEntry{{name: "f", typ: tar.TypeReg, data: make([]byte, n)}}
		b.upBytes += int64(n)
		tb.upBytes += int64(n)
	}
	put(newer, "h1", 10) // the older build's file, landed with the newer
	put(newer, "h2", 20)
	put(older, "h2", 20) // both uploaded it
	put(other, "h3", 5)
	put(elsewhere, "h4", 7)
	if got := tb.sharedUploads(older); len(got) != 2 || got["h1"] == nil || got["h2"] == nil {
		t.Fatalf("the older build shares %v, want h1 and h2", slices.Collect(maps.Keys(got)))
	}
	if got := tb.sharedUploads(other); len(got) != 0 {
		t.Fatalf("another key's build shares %v", slices.Collect(maps.Keys(got)))
	}
	newer.started = true
	tb.release(newer)
	if older.uploads["h1"] == nil || older.upBytes != 30 || newer.uploads != nil {
		t.Fatalf("after the newer ended, the older holds %d bytes (%v), want h1 and h2 in 30", older.upBytes, slices.Collect(maps.Keys(older.uploads)))
	}
	if tb.upBytes != 30+5+7 {
		t.Fatalf("held %d bytes in all, want %d", tb.upBytes, 30+5+7)
	}
	older.started = true
	tb.release(older)
	if tb.upBytes != 5+7 {
		t.Fatalf("held %d bytes once both ended, want %d", tb.upBytes, 5+7)
	}
}

// TestRegistryAuth: E2B's three kinds of registry credentials: a user and
// password as given, a GCP key (as a string or an object) as Google's
// registries take it, AWS keys refused with what to give instead; every
// field bounded.
func TestRegistryAuth(t *testing.T) {
	key := `{"type":"service_account","private_key":"k"}`
	quoted, _ := json.Marshal(key)
	for _, tc := range []struct {
		raw        string
		user, pass string
		err        string
	}{
		{raw: ``},
		{raw: `null`},
		{raw: `{"type":"registry","username":"u","password":"p"}`, user: "u", pass: "p"},
		{raw: `{"type":"gcp","serviceAccountJson":` + string(quoted) + `}`, user: "_json_key", pass: key},
		{raw: `{"type":"gcp","serviceAccountJson":` + key + `}`, user: "_json_key", pass: key},
		{raw: `{"type":"gcp","serviceAccountJson":"not json"}`, err: "serviceAccountJson"},
		{raw: `{"type":"aws","awsAccessKeyId":"a","awsSecretAccessKey":"b","awsRegion":"r"}`, err: "get-login-password"},
		{raw: `{"type":"registry","username":"u"}`, err: "needs a username and a password"},
		{raw: `{"type":"registry","username":"u","password":"` + strings.Repeat("p", maxRegistrySecret+1) + `"}`, err: "too long"},
		{raw: `{"type":"ftp"}`, err: "want registry, gcp or aws"},
		{raw: `[1]`, err: "fromImageRegistry"},
	} {
		a, err := registryAuth(json.RawMessage(tc.raw))
		switch {
		case tc.err != "":
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%.60s: %v, want an invalid naming %q", tc.raw, err, tc.err)
			}
		case err != nil:
			t.Errorf("%.60s: %v", tc.raw, err)
		case tc.user == "" && a != nil, tc.user != "" && (a == nil || a.Username != tc.user || a.Password != tc.pass):
			t.Errorf("%.60s: %+v", tc.raw, a)
		}
	}
}
