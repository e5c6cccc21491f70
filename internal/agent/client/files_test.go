package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.c

	// Relative paths resolve against the user's home; parents are made.
	if err := c.WriteFile(ctx, "dir/a.txt", "", strings.NewReader("alpha")); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(e.home, "dir", "a.txt")
	if b, err := os.ReadFile(abs); err != nil || string(b) != "alpha" {
		t.Fatalf("file on disk %q, %v", b, err)
	}
	var buf bytes.Buffer
	if err := c.ReadFile(ctx, abs, "", &buf); err != nil || buf.String() != "alpha" {
		t.Fatalf("read back %q, %v", buf.String(), err)
	}
	// Overwrite keeps working and replaces the content whole.
	if err := c.WriteFile(ctx, abs, "", strings.NewReader("b")); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := c.ReadFile(ctx, "~/dir/a.txt", "", &buf); err != nil || buf.String() != "b" {
		t.Fatalf("read after overwrite %q, %v", buf.String(), err)
	}

	st, err := c.Stat(ctx, abs, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.GetType() != filesystem.FileType_FILE_TYPE_FILE || st.GetSize() != 1 || st.GetName() != "a.txt" || st.GetPath() != abs {
		t.Errorf("stat = %v", st)
	}
	if isRoot() && (st.GetOwner() != "user" || st.GetGroup() != "user") {
		t.Errorf("owner %s:%s, want user:user", st.GetOwner(), st.GetGroup())
	}

	d, err := c.MakeDir(ctx, "dir/sub/deeper", "")
	if err != nil || d.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("mkdir: %v %v", d, err)
	}
	if _, err := c.MakeDir(ctx, "dir/sub/deeper", ""); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("mkdir of an existing dir: %v, want conflict", err)
	}

	ents, err := c.ListDir(ctx, "dir", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.GetName())
	}
	if strings.Join(names, ",") != "a.txt,sub" {
		t.Errorf("list = %v", names)
	}
	// Depth 2 through the raw service reaches one level further.
	deep, err := c.Filesystem().ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: filepath.Join(e.home, "dir"), Depth: 2}))
	if err != nil || len(deep.Msg.GetEntries()) != 3 {
		t.Errorf("depth 2 list: %v, %v", deep, err)
	}

	moved, err := c.Move(ctx, abs, "dir/sub/b.txt", "")
	if err != nil || moved.GetPath() != filepath.Join(e.home, "dir/sub/b.txt") {
		t.Fatalf("move: %v %v", moved, err)
	}
	if err := c.Remove(ctx, "dir", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.home, "dir")); !os.IsNotExist(err) {
		t.Errorf("dir still exists after remove: %v", err)
	}

	errTests := []struct {
		name string
		op   func() error
		want error
	}{
		{"stat missing", func() error { _, err := c.Stat(ctx, "nope", ""); return err }, errdefs.ErrNotFound},
		{"read missing", func() error { return c.ReadFile(ctx, "nope", "", io.Discard) }, errdefs.ErrNotFound},
		{"read a directory", func() error { return c.ReadFile(ctx, e.home, "", io.Discard) }, errdefs.ErrInvalidArgument},
		{"move missing", func() error { _, err := c.Move(ctx, "nope", "x", ""); return err }, errdefs.ErrNotFound},
		{"list missing", func() error { _, err := c.ListDir(ctx, "nope", ""); return err }, errdefs.ErrNotFound},
		{"NUL in path", func() error { _, err := c.Stat(ctx, "a\x00b", ""); return err }, errdefs.ErrInvalidArgument},
		{"write over a directory", func() error { return c.WriteFile(ctx, e.home, "", strings.NewReader("x")) }, errdefs.ErrConflict},
		{"remove /", func() error { return c.Remove(ctx, "/", "") }, errdefs.ErrInvalidArgument},
		{"bad user name", func() error { _, err := c.Stat(ctx, "x", "bad name"); return err }, errdefs.ErrInvalidArgument},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// As envd does: removing what is not there is no error.
	if err := c.Remove(ctx, "nope", ""); err != nil {
		t.Errorf("remove of a missing path: %v, want nil", err)
	}
}

func TestSymlinks(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	target := filepath.Join(e.root, "outside.txt")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.home, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	st, err := e.c.Stat(ctx, link, "")
	if err != nil {
		t.Fatal(err)
	}
	// As envd describes a symlink: its resolved absolute target, and the
	// target's type and mode; only the permissions string says link.
	if st.GetType() != filesystem.FileType_FILE_TYPE_FILE || st.GetSymlinkTarget() != target || !strings.HasPrefix(st.GetPermissions(), "L") {
		t.Errorf("stat of a symlink = %v", st)
	}
	ents, err := e.c.ListDir(ctx, e.home, "")
	if err != nil || len(ents) != 1 || ents[0].GetSymlinkTarget() != target {
		t.Fatalf("list = %v, %v", ents, err)
	}
	// Writing to the link's path replaces the link; the target is untouched.
	if err := e.c.WriteFile(ctx, link, "", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("write went through the symlink: target now %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link path is not a regular file after the write: %v", err)
	}
	// A symlinked directory can be listed through.
	if err := os.Symlink(e.root, filepath.Join(e.home, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ListDir(ctx, "dirlink", ""); err != nil {
		t.Errorf("list through a dir symlink: %v", err)
	}
}

// rawHTTP is an HTTP client for the agent's socket, for envd's HTTP API.
func rawHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func TestEnvdHTTP(t *testing.T) {
	e := newEnv(t)
	hc := rawHTTP(e.socket)

	resp, err := hc.Get("http://agent/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Envd-Version") == "" {
		t.Errorf("health: %d, version %q", resp.StatusCode, resp.Header.Get("X-Envd-Version"))
	}

	initBody := `{"envVars":{"FROM_INIT":"1"},"defaultWorkdir":"/"}`
	resp, err = hc.Post("http://agent/init", "application/json", strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("init: %d", resp.StatusCode)
	}
	resp, err = hc.Get("http://agent/envs")
	if err != nil {
		t.Fatal(err)
	}
	var envs map[string]string
	json.NewDecoder(resp.Body).Decode(&envs)
	resp.Body.Close()
	if envs["FROM_INIT"] != "1" || envs["SANDBOX_WIDE"] != "yes" {
		t.Errorf("envs after init = %v", envs)
	}
	var out strings.Builder
	if _, err := e.c.Exec(context.Background(), client.ExecOptions{Cmd: []string{"sh", "-c", "echo $FROM_INIT; pwd"}}, nil,
		func(_ int, p []byte) error { out.Write(p); return nil }); err != nil || out.String() != "1\n/\n" {
		t.Errorf("exec after init: %q, %v", out.String(), err)
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "up.txt")
	fw.Write([]byte("multipart content"))
	mw.Close()
	resp, err = hc.Post("http://agent/files?path=uploads/up.txt", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct{ Path, Name, Type string }
	json.NewDecoder(resp.Body).Decode(&entries)
	resp.Body.Close()
	want := filepath.Join(e.home, "uploads", "up.txt")
	if resp.StatusCode != http.StatusOK || len(entries) != 1 || entries[0].Path != want || entries[0].Type != "file" {
		t.Fatalf("upload: %d %+v", resp.StatusCode, entries)
	}
	if b, _ := os.ReadFile(want); string(b) != "multipart content" {
		t.Errorf("uploaded content %q", b)
	}
	if isRoot() {
		fi, _ := os.Stat(want)
		if fi.Sys().(*syscall.Stat_t).Uid != uint32(e.uid) {
			t.Errorf("uploaded file owned by %d, want %d", fi.Sys().(*syscall.Stat_t).Uid, e.uid)
		}
	}

	resp, err = hc.Get("http://agent/files?path=nope")
	if err != nil {
		t.Fatal(err)
	}
	var herr struct {
		Message string
		Code    int
	}
	json.NewDecoder(resp.Body).Decode(&herr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || herr.Code != 404 || herr.Message == "" {
		t.Errorf("missing file: %d %+v", resp.StatusCode, herr)
	}

	req, _ := http.NewRequest(http.MethodGet, "http://agent/files?path=x", nil)
	req.Header.Set("Authorization", "Bearer nope")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad authorization header: %d, want 401", resp.StatusCode)
	}
}

func TestInfo(t *testing.T) {
	e := newEnv(t)
	c := agentv1connect.NewAgentServiceClient(rawHTTP(e.socket), "http://agent")
	resp, err := c.Info(ctxT(t), connect.NewRequest(&agentv1.InfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetEnvdVersion() != agent.EnvdVersion || resp.Msg.GetPid() != uint32(os.Getpid()) || resp.Msg.GetStartedAtUnixNano() == 0 {
		t.Errorf("info = %v", resp.Msg)
	}
}

func TestWatchDir(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	stream, err := e.c.Filesystem().WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: e.home, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	if err := os.WriteFile(filepath.Join(e.home, "w.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
		fe := stream.Msg().GetFilesystem()
		if fe != nil && fe.GetName() == "w.txt" && fe.GetType() == filesystem.EventType_EVENT_TYPE_CREATE {
			if fe.GetEntry().GetName() != "w.txt" {
				t.Errorf("event entry = %v", fe.GetEntry())
			}
			return
		}
	}
	t.Fatalf("no create event: %v", stream.Err())
}

func TestPolledWatcher(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	fs := e.c.Filesystem()
	cw, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: e.home, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	if err := os.Mkdir(filepath.Join(e.home, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the new directory is watched once its create is seen
	if err := os.WriteFile(filepath.Join(e.home, "d", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		ev, err := fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, fe := range ev.Msg.GetEvents() {
			if fe.GetName() == filepath.Join("d", "f") {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no event for a file in a new subdirectory")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("events of a removed watcher: %v", err)
	}
}

func TestTarRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	src := filepath.Join(e.home, "src")
	files := map[string]string{"a.txt": "A", "sub/b.txt": strings.Repeat("B", 100000), "sub/deeper/c": ""}
	for name, content := range files {
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("a.txt", filepath.Join(src, "link"))
	os.Mkdir(filepath.Join(src, "empty"), 0o755)

	var archive bytes.Buffer
	if err := e.c.TarOut(ctx, src, "", &archive); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TarIn(ctx, "dst", "", bytes.NewReader(archive.Bytes())); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(e.home, "dst")
	for name, content := range files {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != content {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
		if fi, _ := os.Stat(filepath.Join(dst, name)); fi != nil && fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, want 0640", name, fi.Mode().Perm())
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "a.txt" {
		t.Errorf("symlink = %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty dir: %v", err)
	}
	if err := e.c.TarOut(ctx, filepath.Join(src, "a.txt"), "", io.Discard); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("tar of a file: %v, want invalid argument", err)
	}
}

func TestTarInRefusesEscapes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	outside := filepath.Join(e.root, "outside")
	if err := os.MkdirAll(outside, 0o777); err != nil {
		t.Fatal(err)
	}
	type ent struct {
		name, link string
		typ        byte
	}
	tests := []struct {
		name    string
		entries []ent
	}{
		{"dotdot", []ent{{name: "../outside/x", typ: tar.TypeReg}}},
		{"absolute", []ent{{name: outside + "/x", typ: tar.TypeReg}}},
		{"through a symlink", []ent{{name: "l", link: outside, typ: tar.TypeSymlink}, {name: "l/x", typ: tar.TypeReg}}},
		{"hard link outside", []ent{{name: "h", link: "../outside/x", typ: tar.TypeLink}}},
		{"hard link absolute", []ent{{name: "h", link: "/etc/passwd", typ: tar.TypeLink}}},
		{"char device", []ent{{name: "dev", typ: tar.TypeChar}}},
		{"fifo", []ent{{name: "fifo", typ: tar.TypeFifo}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, en := range tt.entries {
				tw.WriteHeader(&tar.Header{Name: en.name, Linkname: en.link, Typeflag: en.typ, Mode: 0o644})
			}
			tw.Close()
			err := e.c.TarIn(ctx, "target-"+strings.ReplaceAll(tt.name, " ", "-"), "", &buf)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("err = %v, want invalid argument", err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("something was written outside: %v", ents)
			}
		})
	}

	// Over the entry bound (1000 in newEnv).
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range 1001 {
		tw.WriteHeader(&tar.Header{Name: "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.Close()
	if err := e.c.TarIn(ctx, "many", "", &buf); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("too many entries: %v, want resource exhausted", err)
	}
}

func TestSocketSafety(t *testing.T) {
	e := newEnv(t)
	dir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(e.socket, link); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, nil, 0o644)
	tests := []struct{ name, path string }{
		{"symlink to a live socket", link},
		{"regular file", regular},
		{"missing", filepath.Join(dir, "missing.sock")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client.New(tt.path)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := c.WaitReady(ctx); err == nil {
				t.Fatal("WaitReady succeeded")
			}
			_, err := c.Stat(context.Background(), "/", "")
			if !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("stat: %v, want unavailable", err)
			}
			if err := c.ReadFile(context.Background(), "/etc/hostname", "", io.Discard); !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("read: %v, want unavailable", err)
			}
		})
	}
	// The real path still works.
	if _, err := e.c.Stat(context.Background(), "/", ""); err != nil {
		t.Errorf("stat through the real socket: %v", err)
	}
}
