package backups

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// newService builds the subsystem over a real controller on the process
// backend (no root); storeMax, if set, caps the local store.
func newService(t *testing.T, storeMax int64) (*Service, *controllertest.Env) {
	t.Helper()
	env := controllertest.New(t, controllertest.Options{Config: func(c *config.Config) { c.SnapshotStoreMax = storeMax }})
	s := New(Options{Core: env.Controller, Store: env.Store, TTL: time.Hour, Logger: controllertest.Logger(t)})
	return s, env
}

func write(t *testing.T, c *controller.Controller, ctx context.Context, sandbox, path, content string) {
	t.Helper()
	if _, err := c.WriteFile(ctx, controller.FileRef{Sandbox: sandbox, Path: path}, 0o644, strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
}

func read(c *controller.Controller, ctx context.Context, sandbox, path string) (string, error) {
	var b bytes.Buffer
	err := c.ReadFile(ctx, controller.FileRef{Sandbox: sandbox, Path: path}, &b)
	return b.String(), err
}

// archives lists the files of the local backup store.
func archives(t *testing.T, c *controller.Controller) []string {
	t.Helper()
	entries, err := os.ReadDir(c.BackupsDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRoundTripAndTenancy: a backup leaves out what its patterns exclude,
// restores into another sandbox, is recorded in both ledgers, and is
// another key's not found through every call (the same words as none at
// all), while a key of scope all sees it.
func TestRoundTripAndTenancy(t *testing.T) {
	s, env := newService(t, 0)
	c := env.Controller
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	ops := controller.WithCaller(base, "oooooooooooooooo", api.KeyScopeAll)
	for _, name := range []string{"src", "dst"} {
		if _, err := c.Create(a, api.CreateSandboxRequest{Name: name, Image: controllertest.Image}); err != nil {
			t.Fatal(err)
		}
	}
	write(t, c, a, "src", "notes/a.txt", "kept")
	write(t, c, a, "src", "notes/debug.log", "left out")

	bk, err := s.Create(a, "src", api.CreateBackupRequest{Path: "notes", Exclude: []string{"*.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if bk.SizeBytes <= 0 || len(bk.SHA256) != 64 || bk.Storage != storageLocal || bk.ExpiresAt == nil || bk.CreatedBy != "aaaaaaaaaaaaaaaa" {
		t.Errorf("backup: %+v", bk)
	}
	if got := archives(t, c); len(got) != 1 || got[0] != bk.ID+".tar.gz" {
		t.Errorf("the store holds %v, want only %s.tar.gz", got, bk.ID)
	}
	if _, err := s.Restore(a, bk.ID, api.RestoreBackupRequest{Sandbox: "dst", Path: "restored"}); err != nil {
		t.Fatal(err)
	}
	if got, err := read(c, a, "dst", "restored/a.txt"); err != nil || got != "kept" {
		t.Errorf("restored a.txt: %q, %v", got, err)
	}
	if _, err := read(c, a, "dst", "restored/debug.log"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the excluded file was restored: %v", err)
	}
	for sandbox, kind := range map[string]string{"src": api.LedgerBackup, "dst": api.LedgerBackupRestore} {
		found := false
		for _, e := range env.Ledger(a, t, sandbox) {
			found = found || (e.Kind == kind && e.Data["backup_id"] == bk.ID)
		}
		if !found {
			t.Errorf("the ledger of %s has no %s entry of %s", sandbox, kind, bk.ID)
		}
	}

	// Another key: a's backup is not found, worded as a missing one.
	const none = "bkaaaaaaaaaaaaaaaaaaaa"
	for name, call := range map[string]func(id string) error{
		"get": func(id string) error { _, err := s.Get(b, id); return err },
		"restore": func(id string) error {
			_, err := s.Restore(b, id, api.RestoreBackupRequest{Sandbox: "dst"})
			return err
		},
		"delete": func(id string) error { return s.Delete(b, id) },
	} {
		theirs, missing := call(bk.ID), call(none)
		if !errors.Is(theirs, errdefs.ErrNotFound) || !errors.Is(missing, errdefs.ErrNotFound) || theirs.Error() != strings.Replace(missing.Error(), none, bk.ID, 1) {
			t.Errorf("%s of another's backup: %v; of none: %v", name, theirs, missing)
		}
	}
	if _, err := s.Create(b, "src", api.CreateBackupRequest{Path: "notes"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b backed up a's sandbox: %v", err)
	}
	for _, ref := range []string{"", "src"} {
		if list, err := s.List(b, ref); err == nil && len(list) != 0 {
			t.Errorf("b lists %d backups of %q", len(list), ref)
		} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("b lists %q: %v", ref, err)
		}
	}
	if list, err := s.List(ops, ""); err != nil || len(list) != 1 || list[0].ID != bk.ID {
		t.Errorf("a key of scope all lists %+v, %v", list, err)
	}
	if list, err := s.List(a, "src"); err != nil || len(list) != 1 {
		t.Errorf("a lists the backups of src: %+v, %v", list, err)
	}

	// The sandbox goes; its backups stay, listed by its id.
	sb, err := c.Get(a, "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(a, "src"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(a, sb.ID); err != nil || len(list) != 1 {
		t.Errorf("the backups of a destroyed sandbox: %+v, %v", list, err)
	}
	if err := s.Delete(a, bk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(a, bk.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if got := archives(t, c); len(got) != 0 {
		t.Errorf("the store still holds %v", got)
	}
}

// TestRefusals: bad requests are refused before any work, with the field
// named; S3 is unavailable until configured.
func TestRefusals(t *testing.T) {
	s, env := newService(t, 0)
	c := env.Controller
	ctx := controller.WithCaller(context.Background(), "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Name: "src", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]api.CreateBackupRequest{
		"path":    {},
		"exclude": {Path: "x", Exclude: []string{"/abs"}},
		"user":    {Path: "x", User: "Not A User"},
		"ttl":     {Path: "x", TTL: "soon"},
		"store":   {Path: "x", Store: "gcs"},
	} {
		if _, err := s.Create(ctx, "src", req); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.Create(ctx, "src", api.CreateBackupRequest{Path: "x", Store: "s3"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("s3 without a configured store: %v", err)
	}
	if s.S3Info() != nil {
		t.Error("S3Info without a configured store")
	}
	if _, err := s.Get(ctx, "not-a-backup"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("get of a malformed id: %v", err)
	}
	if got := archives(t, c); len(got) != 0 {
		t.Errorf("refused backups left %v", got)
	}
}

// TestExpiry: an expired backup is gone for callers at once, and its
// archive with the next listing.
func TestExpiry(t *testing.T) {
	s, env := newService(t, 0)
	c := env.Controller
	ctx := controller.WithCaller(context.Background(), "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Name: "src", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	write(t, c, ctx, "src", "d/f", "x")
	short, err := s.Create(ctx, "src", api.CreateBackupRequest{Path: "d", TTL: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Create(ctx, "src", api.CreateBackupRequest{Path: "d", TTL: "never"})
	if err != nil || kept.ExpiresAt != nil {
		t.Fatalf("a backup kept forever: %+v, %v", kept, err)
	}
	time.Sleep(time.Until(*short.ExpiresAt) + 10*time.Millisecond)
	if _, err := s.Get(ctx, short.ID); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("get of an expired backup: %v", err)
	}
	list, err := s.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].ID != kept.ID {
		t.Errorf("list after expiry: %+v, %v", list, err)
	}
	if got := archives(t, c); len(got) != 1 || got[0] != kept.ID+".tar.gz" {
		t.Errorf("the store holds %v, want only %s.tar.gz", got, kept.ID)
	}
}

// TestStoreFull: a backup that would take the local store past its cap is
// refused as resource exhausted and leaves nothing behind.
func TestStoreFull(t *testing.T) {
	s, env := newService(t, 64)
	c := env.Controller
	ctx := controller.WithCaller(context.Background(), "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Name: "src", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	write(t, c, ctx, "src", "d/f", strings.Repeat("paddock ", 1000))
	_, err := s.Create(ctx, "src", api.CreateBackupRequest{Path: "d"})
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "store is full") {
		t.Fatalf("a backup past the store's cap: %v", err)
	}
	if got := archives(t, c); len(got) != 0 {
		t.Errorf("the refused backup left %v in %s", got, filepath.Base(c.BackupsDir()))
	}
	if list, err := s.List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("the refused backup is listed: %+v, %v", list, err)
	}
}
