package files

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

func TestParseMetadataHeaders(t *testing.T) {
	long := strings.Repeat("k", maxMetadataKey)
	tests := []struct {
		name    string
		headers [][2]string
		want    map[string]string
		wantErr bool
	}{
		{name: "none", headers: [][2]string{{"Content-Type", "x"}}},
		{name: "one, lowercased", headers: [][2]string{{"X-Metadata-Author", "mish"}}, want: map[string]string{"author": "mish"}},
		{name: "several", headers: [][2]string{{"X-Metadata-A", "1"}, {"x-metadata-b", "two words"}, {"X-Other", "no"}},
			want: map[string]string{"a": "1", "b": "two words"}},
		{name: "first value wins", headers: [][2]string{{"X-Metadata-A", "first"}, {"X-Metadata-A", "second"}}, want: map[string]string{"a": "first"}},
		{name: "empty value kept", headers: [][2]string{{"X-Metadata-A", ""}}, want: map[string]string{"a": ""}},
		{name: "bare prefix ignored", headers: [][2]string{{"X-Metadata-", "v"}}},
		{name: "longest key", headers: [][2]string{{"X-Metadata-" + long, "v"}}, want: map[string]string{long: "v"}},
		{name: "key too long", headers: [][2]string{{"X-Metadata-" + long + "k", "v"}}, wantErr: true},
		{name: "control byte in value", headers: [][2]string{{"X-Metadata-A", "a\tb"}}, wantErr: true},
		{name: "non-ASCII value", headers: [][2]string{{"X-Metadata-A", "caf\xc3\xa9"}}, wantErr: true},
		{name: "bad key char", headers: [][2]string{{"X-Metadata-a/b", "v"}}, wantErr: true},
		{name: "total too large", headers: func() [][2]string {
			var h [][2]string
			for i := range 5 {
				h = append(h, [2]string{fmt.Sprintf("X-Metadata-K%d", i), strings.Repeat("v", 1000)})
			}
			return h
		}(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h[kv[0]] = append(h[kv[0]], kv[1]) // raw, as a server may keep odd spellings
			}
			got, err := parseMetadataHeaders(h)
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid argument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzParseMetadataHeaders(f *testing.F) {
	f.Add("X-Metadata-Author", "mish", "X-Metadata-B", "2")
	f.Add("x-metadata-a", "\x00", "X-Metadata-", "")
	f.Add("X-Metadata-"+strings.Repeat("a", 300), "v", "Other", "w")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := http.Header{k1: {v1}, k2: {v2}}
		md, err := parseMetadataHeaders(h)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error outside the vocabulary: %v", err)
			}
			return
		}
		total := 0
		for k, v := range md {
			if !validMetadataKey(k) || k != strings.ToLower(k) || len(k) > maxMetadataKey || !printableASCII(v) {
				t.Fatalf("accepted bad entry %q=%q", k, v)
			}
			total += len(metadataXattrPrefix) + len(k) + len(v)
		}
		if total > maxMetadataTotal {
			t.Fatalf("accepted %d bytes of metadata", total)
		}
	})
}

func TestNegotiateEncoding(t *testing.T) {
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"", "", true},
		{"gzip", "gzip", true}, // what the SDK's read({gzip: true}) sends
		{"GZIP", "gzip", true},
		{" gzip ;q=1", "gzip", true},
		{"gzip, deflate", "", true}, // what Node's fetch sends on every request
		{"gzip, deflate;q=0", "gzip", true},
		{"br", "", true},
		{"identity", "", true},
		{"gzip;q=0", "", true},
		{"gzip;q=0.5, identity", "", true},
		{"gzip, identity;q=0.5", "gzip", true},
		{"identity;q=0", "", false},
		{"identity;q=0, gzip", "gzip", true},
		{"identity;q=0, gzip, br", "gzip", true},
		{"identity;q=0, br", "", false},
		{"*", "", true},
		{"*;q=0", "", false},
		{"*;q=0, gzip", "gzip", true},
		{"gzip;q=bogus", "", true},
		{"x-gzip", "gzip", true},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			got, ok := negotiateEncoding(tt.header)
			if got != tt.want || ok != tt.ok {
				t.Errorf("negotiateEncoding(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// testService is a file service whose default user is the test's own uid,
// homed in a temporary directory, for calling its handlers directly.
func testService(t *testing.T) (*Service, string) {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	etc := filepath.Join(root, "etc")
	for _, d := range []string{home, etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uid, gid := os.Getuid(), os.Getgid()
	passwd := fmt.Sprintf("user:x:%d:%d::%s:/bin/sh\n", uid, gid, home)
	group := fmt.Sprintf("user:x:%d:\n", gid)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	db := users.NewDB(etc)
	user := func(_ context.Context, explicit string) (*users.User, error) {
		return db.Lookup(cmp.Or(explicit, "user"))
	}
	return New(Options{Users: db, User: user}), home
}

// requireXattrs skips where the test directory's file system has no user
// extended attributes (tmpfs before Linux 6.6).
func requireXattrs(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	if err := unix.Setxattr(p, "user.probe", []byte("1"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skip("needs user extended attributes on the temporary directory's file system")
	}
}

func upload(t *testing.T, a *Service, path string, body io.Reader, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/files?path="+path, body)
	req.Header.Set("Content-Type", "application/octet-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	a.handleUpload(rec, req)
	return rec
}

func TestUploadMetadata(t *testing.T) {
	a, home := testService(t)
	requireXattrs(t, home)
	fs := a
	ctx := context.Background()
	stat := func(p string) map[string]string {
		t.Helper()
		res, err := fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: p}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetEntry().GetMetadata()
	}

	rec := upload(t, a, "m.txt", strings.NewReader("x"), map[string]string{"X-Metadata-Author": "mish", "X-Metadata-Purpose": "test"})
	if rec.Code != http.StatusOK {
		t.Fatalf("upload: %d %s", rec.Code, rec.Body)
	}
	var written []entryJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &written); err != nil || len(written) != 1 {
		t.Fatalf("upload result %s: %v", rec.Body, err)
	}
	want := map[string]string{"author": "mish", "purpose": "test"}
	if fmt.Sprint(written[0].Metadata) != fmt.Sprint(want) {
		t.Errorf("upload result metadata %v, want %v", written[0].Metadata, want)
	}
	if got := stat("m.txt"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stat metadata %v, want %v", got, want)
	}
	list, err := fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: home}))
	if err != nil || len(list.Msg.GetEntries()) != 1 || fmt.Sprint(list.Msg.GetEntries()[0].GetMetadata()) != fmt.Sprint(want) {
		t.Errorf("list: %v %v", list, err)
	}

	// Attributes set from inside the sandbox count; other namespaces do not.
	p := filepath.Join(home, "m.txt")
	if err := unix.Setxattr(p, "user.e2b.outside", []byte("yes"), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, "user.other", []byte("no"), 0); err != nil {
		t.Fatal(err)
	}
	if got := stat("m.txt")["outside"]; got != "yes" {
		t.Errorf("out-of-band metadata %q", got)
	}

	// A new upload replaces the set; one without headers clears it.
	upload(t, a, "m.txt", strings.NewReader("y"), map[string]string{"X-Metadata-Author": "other"})
	if got := stat("m.txt"); fmt.Sprint(got) != "map[author:other]" {
		t.Errorf("after replace: %v", got)
	}
	upload(t, a, "m.txt", strings.NewReader("z"), nil)
	if got := stat("m.txt"); got != nil {
		t.Errorf("after an upload without metadata: %v", got)
	}
	if v, err := unix.Getxattr(p, "user.other", make([]byte, 8)); err != nil || v != 2 {
		t.Errorf("foreign xattr was touched: %d %v", v, err)
	}

	// Bad metadata is refused before the file is touched.
	rec = upload(t, a, "bad.txt", strings.NewReader("x"), map[string]string{"X-Metadata-A": "tab\there"})
	if rec.Code != http.StatusBadRequest {
		t.Errorf("bad value: %d %s", rec.Code, rec.Body)
	}
	if _, err := os.Lstat(filepath.Join(home, "bad.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused upload created the file: %v", err)
	}

	// Values that are not UTF-8, set out-of-band, are left out rather than
	// breaking every stat of the file.
	if err := unix.Setxattr(p, "user.e2b.bin", []byte{0xff, 0xfe}, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok := stat("m.txt")["bin"]; ok {
		t.Errorf("binary value reported: %q", got)
	}
}

// TestUploadMetadataNoXattrs writes to a file system without user xattrs:
// metadata fails the upload with a clear 412, and an upload without
// metadata still works.
func TestUploadMetadataNoXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a file system without xattr support")
	}
	a, home := testService(t)
	dir := filepath.Join(home, "noxattr")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// ramfs has no user xattrs on any kernel.
	if err := unix.Mount("ramfs", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("cannot mount ramfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	rec := upload(t, a, "noxattr/a.txt", strings.NewReader("x"), map[string]string{"X-Metadata-A": "1"})
	if rec.Code != http.StatusPreconditionFailed || !strings.Contains(rec.Body.String(), "extended attributes") {
		t.Errorf("metadata on ramfs: %d %s", rec.Code, rec.Body)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused upload left a file: %v", err)
	}
	rec = upload(t, a, "noxattr/b.txt", strings.NewReader("x"), nil)
	if rec.Code != http.StatusOK {
		t.Errorf("plain upload on ramfs: %d %s", rec.Code, rec.Body)
	}
	// Refused metadata leaves an existing file's content alone.
	rec = upload(t, a, "noxattr/b.txt", strings.NewReader("replaced"), map[string]string{"X-Metadata-A": "1"})
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); rec.Code != http.StatusPreconditionFailed || string(b) != "x" {
		t.Errorf("refused rewrite: %d, content now %q", rec.Code, b)
	}
	if e, err := entryInfo(filepath.Join(dir, "b.txt"), nil); err != nil || e.GetMetadata() != nil {
		t.Errorf("stat on ramfs: %v %v", e, err)
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGzipUpload(t *testing.T) {
	a, home := testService(t)
	content := bytes.Repeat([]byte("paddock gzip "), 10_000)
	tests := []struct {
		name     string
		body     []byte
		encoding string
		multi    bool
		want     int
	}{
		{name: "gzip", body: gzipped(t, content), encoding: "gzip", want: http.StatusOK},
		{name: "case and spaces", body: gzipped(t, content), encoding: " GZip ", want: http.StatusOK},
		{name: "identity", body: content, encoding: "identity", want: http.StatusOK},
		{name: "gzip multipart", body: gzipped(t, content), encoding: "gzip", multi: true, want: http.StatusOK},
		{name: "not gzip", body: content, encoding: "gzip", want: http.StatusBadRequest},
		{name: "truncated", body: gzipped(t, content)[:200], encoding: "gzip", want: http.StatusBadRequest},
		{name: "unsupported", body: content, encoding: "br", want: http.StatusBadRequest},
		{name: "stacked", body: gzipped(t, gzipped(t, content)), encoding: "gzip, gzip", want: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := strings.ReplaceAll(tt.name, " ", "-")
			body := tt.body
			ctype := "application/octet-stream"
			if tt.multi {
				// The whole multipart body is what gets compressed.
				raw := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + path + "\"\r\n\r\n" + string(content) + "\r\n--B--\r\n"
				body = gzipped(t, []byte(raw))
				ctype = "multipart/form-data; boundary=B"
			}
			req := httptest.NewRequest(http.MethodPost, "/files?path="+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", ctype)
			req.Header.Set("Content-Encoding", tt.encoding)
			rec := httptest.NewRecorder()
			a.handleUpload(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.want != http.StatusOK {
				return
			}
			got, err := os.ReadFile(filepath.Join(home, path))
			if err != nil || !bytes.Equal(got, content) {
				t.Errorf("content differs (%d bytes, %v)", len(got), err)
			}
		})
	}
}

// TestGzipBombBounded inflates 256 MiB of zeros from a small body into a
// writer that refuses past 16 MiB, as a full disk does: the upload stops at
// the limit with the same 507 a plain upload gets, and the heap never
// holds more than a window's worth of it.
func TestGzipBombBounded(t *testing.T) {
	const inflated = 256 << 20
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestSpeed)
	zeros := make([]byte, 1<<20)
	for range inflated / len(zeros) {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()

	a, home := testService(t)
	dir := filepath.Join(home, "small")
	if os.Geteuid() == 0 {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
			t.Skipf("cannot mount a small tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	} else {
		t.Skip("needs root to mount a size-capped file system")
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, tc := range []struct {
		name string
		body io.Reader
		enc  string
	}{
		{"gzip bomb", bytes.NewReader(bomb.Bytes()), "gzip"},
		{"plain", io.LimitReader(zeroes{}, 64<<20), ""},
	} {
		req := httptest.NewRequest(http.MethodPost, "/files?path=small/f", tc.body)
		req.Header.Set("Content-Type", "application/octet-stream")
		if tc.enc != "" {
			req.Header.Set("Content-Encoding", tc.enc)
		}
		rec := httptest.NewRecorder()
		a.handleUpload(rec, req)
		if rec.Code != http.StatusInsufficientStorage {
			t.Errorf("%s: status %d, want 507: %s", tc.name, rec.Code, rec.Body)
		}
	}
	runtime.ReadMemStats(&after)
	// TotalAlloc counts every allocation made, freed or not: inflating
	// into memory would add at least the 16 MiB that reached the disk.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("uploads allocated %d bytes", grew)
	}
}

type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestGzipDownload(t *testing.T) {
	a, home := testService(t)
	content := bytes.Repeat([]byte("download me "), 50_000)
	if err := os.WriteFile(filepath.Join(home, "d.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/files?path=d.bin", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		a.handleDownload(rec, req)
		return rec
	}

	rec := get(map[string]string{"Accept-Encoding": "gzip"})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip download: %d %v", rec.Code, rec.Header())
	}
	if rec.Body.Len() >= len(content)/10 {
		t.Errorf("gzip body is %d bytes for %d of repetitive content", rec.Body.Len(), len(content))
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("gunzipped download differs (%d bytes, %v)", len(got), err)
	}

	for _, tc := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"no header", nil, http.StatusOK},
		{"range stays identity", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-9"}, http.StatusPartialContent},
		{"gzip refused", map[string]string{"Accept-Encoding": "gzip;q=0"}, http.StatusOK},
		{"nothing acceptable", map[string]string{"Accept-Encoding": "identity;q=0, br"}, http.StatusNotAcceptable},
		{"generic client", map[string]string{"Accept-Encoding": "gzip, deflate"}, http.StatusOK},
	} {
		rec := get(tc.hdr)
		if rec.Code != tc.code || rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s: %d, encoding %q", tc.name, rec.Code, rec.Header().Get("Content-Encoding"))
		}
	}
}

// TestMultipartFileNamePath: without a path parameter each part lands at
// its file name with directories kept, as the SDKs' writeFiles sends them.
func TestMultipartFileNamePath(t *testing.T) {
	a, home := testService(t)
	body := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d/e/one.txt\"\r\n\r\n1\r\n" +
		"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + home + "/abs.txt\"\r\n\r\n2\r\n--B--\r\n"
	req := httptest.NewRequest(http.MethodPost, "/files", strings.NewReader(body))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
	rec := httptest.NewRecorder()
	a.handleUpload(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	for path, want := range map[string]string{"d/e/one.txt": "1", "abs.txt": "2"} {
		if b, err := os.ReadFile(filepath.Join(home, path)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", path, b, err)
		}
	}
	var written []entryJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &written); err != nil || len(written) != 2 || written[0].Path != filepath.Join(home, "d/e/one.txt") {
		t.Errorf("result %s: %v", rec.Body, err)
	}
}

// TestListMetadataBudget: a listing spends at most maxResponseMetadata on
// metadata, however much the sandbox stored on its files; the entries past
// the budget are still listed.
func TestListMetadataBudget(t *testing.T) {
	a, home := testService(t)
	requireXattrs(t, home)
	const files, valSize = 1200, 3800
	val := bytes.Repeat([]byte("v"), valSize)
	for i := range files {
		p := filepath.Join(home, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "user.e2b.v", val, 0); err != nil {
			t.Skipf("cannot store %d-byte attributes here: %v", valSize, err)
		}
	}
	res, err := a.ListDir(context.Background(), connect.NewRequest(&filesystem.ListDirRequest{Path: home}))
	if err != nil {
		t.Fatal(err)
	}
	total, with := 0, 0
	for _, e := range res.Msg.GetEntries() {
		if md := e.GetMetadata(); md != nil {
			with++
			total += len("v") + len(md["v"])
		}
	}
	if len(res.Msg.GetEntries()) != files || with == 0 || with == files || total > maxResponseMetadata+valSize+1 {
		t.Errorf("%d entries, %d with metadata, %d bytes of it", len(res.Msg.GetEntries()), with, total)
	}
}
