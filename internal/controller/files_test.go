package controller_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestProcessFiles: the file operations go through the controller: they
// reach the sandbox's agent, refuse bad paths and users before it, are
// another key's not found, and record the changes in the ledger.
func TestProcessFiles(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c, backend := env.Controller, env.Backend
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const keyA, keyB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	ctx := controller.WithCaller(base, keyA, api.KeyScopeOwn)
	ctxB := controller.WithCaller(base, keyB, api.KeyScopeOwn)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Name: "files", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) controller.FileRef { return controller.FileRef{Sandbox: "files", Path: p} }

	fi, err := c.WriteFile(ctx, at("notes/a.txt"), 0o600, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != 5 || fi.Type != "file" || fi.Name != "a.txt" {
		t.Errorf("written file: %+v", fi)
	}
	var got bytes.Buffer
	if err := c.ReadFile(ctx, at("notes/a.txt"), &got); err != nil || got.String() != "hello" {
		t.Errorf("read back %q, %v", got.String(), err)
	}
	if _, err := c.MakeDir(ctx, at("notes/sub")); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.MoveFile(ctx, at("notes/sub/b.txt"), "notes/a.txt"); err != nil || fi.Name != "b.txt" {
		t.Errorf("move: %+v, %v", fi, err)
	}
	list, err := c.ListDir(ctx, at("notes/sub"))
	if err != nil || len(list) != 1 || list[0].Name != "b.txt" {
		t.Errorf("list after the move: %+v, %v", list, err)
	}
	var tarball bytes.Buffer
	if err := c.TarOut(ctx, at("notes"), &tarball); err != nil {
		t.Fatal(err)
	}
	if !tarHas(t, tarball.Bytes(), "b.txt") {
		t.Error("the tar of notes/ lacks b.txt")
	}
	if err := c.TarIn(ctx, at("copy"), bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.StatFile(ctx, at("copy/sub/b.txt")); err != nil || fi.Size != 5 {
		t.Errorf("stat of the extracted copy: %+v, %v", fi, err)
	}
	// A relative path lands in the sandbox's own home, never in the home
	// of the host user who runs the test.
	if _, err := os.Stat(filepath.Join(backend.Home(sb.ID), "copy", "sub", "b.txt")); err != nil {
		t.Errorf("the extracted copy is not in the sandbox's home: %v", err)
	}
	if home, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(home, "copy", "sub", "b.txt")); err == nil {
			t.Errorf("the extracted copy landed in the host user's home %s", home)
		}
	}
	if err := c.RemoveFile(ctx, at("notes")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatFile(ctx, at("notes")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat after remove: %v, want not found", err)
	}
	if err := c.RemoveFile(ctx, at("notes")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("removing a missing path: %v, want not found", err)
	}

	// Refused before the agent.
	for _, f := range []controller.FileRef{
		{Sandbox: "files"},                                  // no path
		{Sandbox: "files", Path: "a\x00b"},                  // NUL
		{Sandbox: "files", Path: strings.Repeat("a", 5000)}, // too long
		{Sandbox: "files", Path: "x", User: "root:0"},       // not a user name
	} {
		if _, err := c.StatFile(ctx, f); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("StatFile(%.40q, user %q) = %v, want invalid", f.Path, f.User, err)
		}
	}
	if _, err := c.MoveFile(ctx, at("x"), ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("move without a source: %v, want invalid", err)
	}
	if _, err := c.WriteFile(ctx, at("x"), 0o4755, strings.NewReader("")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("write with a setuid mode: %v, want invalid", err)
	}
	// Another key's view: not found, nothing read.
	if err := c.ReadFile(ctxB, controller.FileRef{Sandbox: sb.ID, Path: "copy/sub/b.txt"}, io.Discard); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key's read: %v, want not found", err)
	}

	// The changes are in the ledger, in order.
	var kinds []string
	for _, e := range env.Ledger(ctx, t, sb.ID) {
		switch e.Kind {
		case api.LedgerFileWrite, api.LedgerMkdir, api.LedgerFileMove, api.LedgerTarUpload, api.LedgerFileRemove:
			kinds = append(kinds, e.Kind+" "+e.Path)
		}
	}
	want := []string{
		api.LedgerFileWrite + " notes/a.txt", api.LedgerMkdir + " notes/sub", api.LedgerFileMove + " notes/sub/b.txt",
		api.LedgerTarUpload + " copy", api.LedgerFileRemove + " notes",
	}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Errorf("ledger file entries:\n got %q\nwant %q", kinds, want)
	}
}

func tarHas(t *testing.T, b []byte, base string) bool {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if strings.HasSuffix(h.Name, "/"+base) || h.Name == base {
			return true
		}
	}
}
