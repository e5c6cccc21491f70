package paddock_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/paddock-dev/paddock/sdk/go/paddock/paddocktest"
)

func newFake(t *testing.T) (*paddocktest.Server, *paddock.Client) {
	t.Helper()
	s := paddocktest.NewServer()
	t.Cleanup(s.Close)
	return s, s.Client()
}

func TestSandboxLifecycle(t *testing.T) {
	s, c := newFake(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Name: "dev", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Name: "dev"}); !errors.Is(err, paddock.ErrConflict) {
		t.Fatalf("duplicate name: err = %v, want ErrConflict", err)
	}
	got, err := c.Get(ctx, "dev")
	if err != nil || got.ID != sb.ID {
		t.Fatalf("get by name: %+v %v", got, err)
	}
	if st, err := c.Stop(ctx, sb.ID); err != nil || st.State != api.StateStopped {
		t.Fatalf("stop: %+v %v", st, err)
	}
	if st, err := c.Start(ctx, sb.ID); err != nil || st.State != api.StateRunning {
		t.Fatalf("start: %+v %v", st, err)
	}
	for labels, want := range map[string]int{"a": 1, "b": 0} {
		list, err := c.List(ctx, map[string]string{"team": labels})
		if err != nil || len(list) != want {
			t.Fatalf("list team=%s: %d sandboxes, %v", labels, len(list), err)
		}
	}
	if err := c.Delete(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "dev"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("after delete: err = %v, want ErrNotFound", err)
	}
	if len(s.Sandboxes()) != 0 {
		t.Fatalf("sandboxes left: %v", s.Sandboxes())
	}
}

func TestFiles(t *testing.T) {
	_, c := newFake(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	fi, err := c.WriteFile(ctx, id, "/home/user/a.txt", strings.NewReader("hello"), 0o600)
	if err != nil || fi.Size != 5 || fi.Mode != 0o600 {
		t.Fatalf("write: %+v %v", fi, err)
	}
	var buf bytes.Buffer
	if err := c.ReadFile(ctx, id, "/home/user/a.txt", &buf); err != nil || buf.String() != "hello" {
		t.Fatalf("read: %q %v", buf.String(), err)
	}
	if _, err := c.MakeDir(ctx, id, "/home/user/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Move(ctx, id, "/home/user/a.txt", "/home/user/d/b.txt"); err != nil {
		t.Fatal(err)
	}
	entries, err := c.ListDir(ctx, id, "/home/user/d")
	if err != nil || len(entries) != 1 || entries[0].Name != "b.txt" {
		t.Fatalf("list: %+v %v", entries, err)
	}
	if st, err := c.Stat(ctx, id, "/home/user/d"); err != nil || st.Type != "dir" {
		t.Fatalf("stat: %+v %v", st, err)
	}

	var tb bytes.Buffer
	if err := c.TarOut(ctx, id, "/home/user", &tb); err != nil {
		t.Fatal(err)
	}
	names := tarNames(t, &tb)
	if strings.Join(names, ",") != "d/,d/b.txt" {
		t.Fatalf("tar out names = %v", names)
	}
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	_ = tw.WriteHeader(&tar.Header{Name: "x/y", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("hi"))
	_ = tw.Close()
	if err := c.TarIn(ctx, id, "/home/user/d", &in); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := c.ReadFile(ctx, id, "/home/user/d/x/y", &buf); err != nil || buf.String() != "hi" {
		t.Fatalf("read after tar in: %q %v", buf.String(), err)
	}
	var layer bytes.Buffer
	if err := c.ExportLayer(ctx, id, &layer); err != nil || len(tarNames(t, &layer)) == 0 {
		t.Fatalf("export layer: %v", err)
	}
	if err := c.Remove(ctx, id, "/home/user/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, id, "/home/user/d/b.txt"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("stat after remove: err = %v", err)
	}
}

func tarNames(t *testing.T, r io.Reader) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func TestImagesAndKeys(t *testing.T) {
	s, c := newFake(t)
	s.APIKey = "k"
	c.APIKey = "k"
	ctx := context.Background()
	var msgs []string
	img, err := c.BuildImage(ctx, "tools", func(ev api.BuildEvent) { msgs = append(msgs, ev.Type) })
	if err != nil || img.Name != "tools" {
		t.Fatalf("build: %+v %v", img, err)
	}
	if strings.Join(msgs, ",") != "progress,log,done" {
		t.Fatalf("events = %v", msgs)
	}
	if _, err := c.BuildImage(ctx, "broken", nil); !errors.Is(err, paddock.ErrInvalidArgument) {
		t.Fatalf("broken build: err = %v", err)
	}
	imgs, err := c.Images(ctx)
	if err != nil || len(imgs) != 2 {
		t.Fatalf("images: %+v %v", imgs, err)
	}
	k, err := c.CreateKey(ctx, "ci")
	if err != nil || k.Secret == "" || k.Name != "ci" {
		t.Fatalf("create key: %+v %v", k, err)
	}
	keys, err := c.ListKeys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	if err := c.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteKey(ctx, k.ID); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("second delete: err = %v", err)
	}
	c.APIKey = "wrong"
	if _, err := c.ListKeys(ctx); !errors.Is(err, paddock.ErrUnauthenticated) {
		t.Fatalf("wrong key: err = %v", err)
	}
}
