package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func testLedger(t *testing.T, s store.Store) {
	ctx := t.Context()
	code := 3
	entries := []*store.LedgerEntry{
		{SandboxID: "sb-l1", SandboxName: "dev", Kind: "create", Source: store.SourcePaddock, At: base},
		{SandboxID: "sb-l1", SandboxName: "dev", Kind: "exec", Source: store.SourcePaddock, At: base.Add(time.Second),
			Command: []string{"sh", "-c", "exit 3", "héllo ✓"}, ExitCode: &code, Duration: 1500 * time.Millisecond},
		{SandboxID: "sb-l2", Kind: "create", Source: store.SourcePaddock, At: base},
		{SandboxID: "sb-l1", SandboxName: "dev", Kind: "payment.sent", Source: store.SourceCaller,
			Note: "charged card", Data: map[string]string{"amount": "12.50", "ref": "ch_1"}},
	}
	for _, e := range entries {
		checkErr(t, "AppendLedger", s.AppendLedger(ctx, e), nil)
		if e.Seq <= 0 {
			t.Fatalf("AppendLedger left Seq %d", e.Seq)
		}
	}
	if entries[3].At.IsZero() {
		t.Fatal("AppendLedger did not stamp a zero At")
	}
	got, err := s.Ledger(ctx, "sb-l1", 0, 100)
	checkErr(t, "Ledger", err, nil)
	if len(got) != 3 {
		t.Fatalf("Ledger(sb-l1) has %d entries, want 3: %+v", len(got), got)
	}
	for i, w := range []*store.LedgerEntry{entries[0], entries[1], entries[3]} {
		g := got[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || g.Source != w.Source || !g.At.Equal(w.At) ||
			!slices.Equal(g.Command, w.Command) || g.Duration != w.Duration || g.Note != w.Note ||
			fmt.Sprint(g.Data) != fmt.Sprint(w.Data) || (g.ExitCode == nil) != (w.ExitCode == nil) ||
			(g.ExitCode != nil && *g.ExitCode != *w.ExitCode) || g.SandboxName != w.SandboxName {
			t.Errorf("entry %d = %+v, want %+v", i, g, *w)
		}
	}
	// Paging: after the first entry, one at a time.
	page, err := s.Ledger(ctx, "sb-l1", got[0].Seq, 1)
	checkErr(t, "Ledger page", err, nil)
	if len(page) != 1 || page[0].Seq != got[1].Seq {
		t.Errorf("page after %d = %+v, want entry %d", got[0].Seq, page, got[1].Seq)
	}
	empty, err := s.Ledger(ctx, "sb-none", 0, 10)
	checkErr(t, "Ledger of an unknown sandbox", err, nil)
	if empty == nil || len(empty) != 0 {
		t.Errorf("Ledger of an unknown sandbox = %#v, want empty and non-nil", empty)
	}

	for _, c := range []struct {
		ref, want string
		err       error
	}{
		{"sb-l1", "sb-l1", nil},
		{"dev", "sb-l1", nil},
		{"sb-l2", "sb-l2", nil},
		{"nobody", "", errdefs.ErrNotFound},
	} {
		ids, err := s.LedgerSandboxes(ctx, c.ref)
		checkErr(t, "LedgerSandboxes("+c.ref+")", err, c.err)
		if id := strings.Join(ids, ","); id != c.want {
			t.Errorf("LedgerSandboxes(%s) = %q, want %q", c.ref, id, c.want)
		}
	}
	// A later sandbox with the same name comes first, the older one after.
	checkErr(t, "AppendLedger", s.AppendLedger(ctx, &store.LedgerEntry{SandboxID: "sb-l3", SandboxName: "dev", Kind: "create", Source: store.SourcePaddock}), nil)
	if ids, _ := s.LedgerSandboxes(ctx, "dev"); strings.Join(ids, ",") != "sb-l3,sb-l1" {
		t.Errorf("LedgerSandboxes(dev) = %q after a newer sandbox named dev, want sb-l3, sb-l1", ids)
	}

	bad := []store.LedgerEntry{
		{SandboxID: "", Kind: "x", Source: store.SourceCaller},
		{SandboxID: "a", Kind: "Bad Kind", Source: store.SourceCaller},
		{SandboxID: "a", Kind: "x", Source: "elsewhere"},
		{SandboxID: "a", Kind: "x", Source: store.SourceCaller, Note: "nul\x00"},
		{SandboxID: "a", Kind: "x", Source: store.SourceCaller, Duration: -1},
	}
	for i := range bad {
		checkErr(t, fmt.Sprintf("AppendLedger(bad %d)", i), s.AppendLedger(ctx, &bad[i]), errdefs.ErrInvalidArgument)
	}
	_, err = s.Ledger(ctx, "sb-l1", 0, 0)
	checkErr(t, "Ledger with limit 0", err, errdefs.ErrInvalidArgument)
}

func testLedgerPurge(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := base.Add(-90 * 24 * time.Hour)
	live := minimal("sb-live", "")
	mustCreate(t, s, live)
	gone := minimal("sb-gone", "")
	mustCreate(t, s, gone)
	gone.State = api.StateDestroyed
	mustUpdate(t, s, gone)
	recent := minimal("sb-recent", "")
	mustCreate(t, s, recent)
	recent.State = api.StateDestroyed
	mustUpdate(t, s, recent)
	for _, e := range []store.LedgerEntry{
		{SandboxID: "sb-live", Kind: "create", At: old},     // live: kept whatever its age
		{SandboxID: "sb-gone", Kind: "create", At: old},     // destroyed long ago: purged
		{SandboxID: "sb-gone", Kind: "destroy", At: old},    // (both entries)
		{SandboxID: "sb-recent", Kind: "create", At: old},   // destroyed, but its newest
		{SandboxID: "sb-recent", Kind: "destroy", At: base}, // entry is recent: kept
		{SandboxID: "sb-norecord", Kind: "create", At: old}, // record gone: purged
	} {
		e.Source = store.SourcePaddock
		checkErr(t, "AppendLedger", s.AppendLedger(ctx, &e), nil)
	}
	n, err := s.PurgeLedgers(ctx, base.Add(-30*24*time.Hour))
	checkErr(t, "PurgeLedgers", err, nil)
	if n != 3 {
		t.Errorf("PurgeLedgers deleted %d entries, want 3", n)
	}
	for id, want := range map[string]int{"sb-live": 1, "sb-gone": 0, "sb-recent": 2, "sb-norecord": 0} {
		got, err := s.Ledger(ctx, id, 0, 100)
		checkErr(t, "Ledger", err, nil)
		if len(got) != want {
			t.Errorf("after purge, %s has %d entries, want %d", id, len(got), want)
		}
	}
}

func testIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	rec := func(key, fp string, at time.Time) *store.IdempotencyRecord {
		return &store.IdempotencyRecord{Key: key, Fingerprint: fp, Method: "POST", Path: "/v1/sandboxes",
			Owner: "boot-1", CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
	}
	first := rec("k1", "fp1", base)
	existing, created, err := s.BeginIdempotent(ctx, first)
	checkErr(t, "BeginIdempotent", err, nil)
	if !created || existing != nil {
		t.Fatalf("first BeginIdempotent: created=%v existing=%+v", created, existing)
	}
	existing, created, err = s.BeginIdempotent(ctx, rec("k1", "fp2", base.Add(time.Hour)))
	checkErr(t, "BeginIdempotent again", err, nil)
	if created || existing == nil || existing.State != store.IdemInProgress || existing.Fingerprint != "fp1" || existing.Owner != "boot-1" {
		t.Fatalf("second BeginIdempotent: created=%v existing=%+v", created, existing)
	}
	first.State, first.Status, first.ContentType, first.Body = store.IdemDone, 201, "application/json", []byte(`{"id":"x"}`)
	checkErr(t, "FinishIdempotent", s.FinishIdempotent(ctx, first), nil)
	existing, _, err = s.BeginIdempotent(ctx, rec("k1", "fp1", base.Add(time.Hour)))
	checkErr(t, "BeginIdempotent after finish", err, nil)
	if existing == nil || existing.State != store.IdemDone || existing.Status != 201 ||
		existing.ContentType != "application/json" || !bytes.Equal(existing.Body, first.Body) || !existing.CreatedAt.Equal(base) {
		t.Fatalf("finished record = %+v", existing)
	}
	// Expired: the key is free again.
	existing, created, err = s.BeginIdempotent(ctx, rec("k1", "fp3", base.Add(25*time.Hour)))
	checkErr(t, "BeginIdempotent after expiry", err, nil)
	if !created || existing != nil {
		t.Fatalf("BeginIdempotent after expiry: created=%v existing=%+v", created, existing)
	}
	checkErr(t, "FinishIdempotent of an unknown key", s.FinishIdempotent(ctx, &store.IdempotencyRecord{
		Key: "nope", Fingerprint: "f", State: store.IdemDone, CreatedAt: base, ExpiresAt: base.Add(time.Hour)}), errdefs.ErrNotFound)
	_, _, err = s.BeginIdempotent(ctx, &store.IdempotencyRecord{Key: "", CreatedAt: base, ExpiresAt: base})
	checkErr(t, "BeginIdempotent without a key", err, errdefs.ErrInvalidArgument)

	// A forgotten key is free at once, for any request.
	_, _, _ = s.BeginIdempotent(ctx, rec("k3", "fp", base))
	checkErr(t, "ForgetIdempotent", s.ForgetIdempotent(ctx, "k3"), nil)
	if existing, created, err = s.BeginIdempotent(ctx, rec("k3", "other", base.Add(time.Second))); err != nil || !created || existing != nil {
		t.Fatalf("BeginIdempotent after ForgetIdempotent: created=%v existing=%+v err=%v", created, existing, err)
	}
	checkErr(t, "ForgetIdempotent again", s.ForgetIdempotent(ctx, "k3"), nil)
	checkErr(t, "ForgetIdempotent of an unknown key", s.ForgetIdempotent(ctx, "never"), nil)
	checkErr(t, "ForgetIdempotent without a key", s.ForgetIdempotent(ctx, ""), errdefs.ErrInvalidArgument)

	_, _, _ = s.BeginIdempotent(ctx, rec("k2", "fp", base))
	n, err := s.PurgeIdempotency(ctx, base.Add(24*time.Hour))
	checkErr(t, "PurgeIdempotency", err, nil)
	if n != 1 { // k2; k1 was renewed at +25h
		t.Errorf("PurgeIdempotency deleted %d, want 1", n)
	}

	// Concurrent claims of one key: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := s.BeginIdempotent(ctx, rec("k-race", "fp", base))
			if err != nil {
				t.Error(err)
			}
			if created {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d concurrent claims of one key won, want 1", wins)
	}
}

func testBackups(t *testing.T, s store.Store) {
	ctx := t.Context()
	b1 := &store.Backup{ID: "bk1", SandboxID: "sb-1", SandboxName: "dev", Path: "/home/user/p",
		Excludes: []string{"*.log", "node_modules"}, SizeBytes: 1234, SHA256: "ab12", Storage: "local",
		CreatedAt: base, ExpiresAt: base.Add(72 * time.Hour)}
	b2 := &store.Backup{ID: "bk2", SandboxID: "sb-2", Path: "/data", SHA256: "cd34", Storage: "local", CreatedAt: base.Add(time.Second)}
	checkErr(t, "CreateBackup", s.CreateBackup(ctx, b1), nil)
	checkErr(t, "CreateBackup", s.CreateBackup(ctx, b2), nil)
	checkErr(t, "CreateBackup duplicate", s.CreateBackup(ctx, b1), errdefs.ErrConflict)
	checkErr(t, "CreateBackup bad", s.CreateBackup(ctx, &store.Backup{ID: "x", SandboxID: "s"}), errdefs.ErrInvalidArgument)

	got, err := s.GetBackup(ctx, "bk1")
	checkErr(t, "GetBackup", err, nil)
	if got.SandboxName != "dev" || got.Path != b1.Path || !slices.Equal(got.Excludes, b1.Excludes) || got.SizeBytes != 1234 ||
		got.SHA256 != "ab12" || got.Storage != "local" || !got.CreatedAt.Equal(base) || !got.ExpiresAt.Equal(b1.ExpiresAt) {
		t.Errorf("GetBackup = %+v, want %+v", got, b1)
	}
	if g2, _ := s.GetBackup(ctx, "bk2"); g2 == nil || !g2.ExpiresAt.IsZero() || g2.Excludes != nil {
		t.Errorf("GetBackup(bk2) = %+v, want no expiry and nil excludes", g2)
	}
	_, err = s.GetBackup(ctx, "nope")
	checkErr(t, "GetBackup missing", err, errdefs.ErrNotFound)

	all, err := s.ListBackups(ctx, "")
	checkErr(t, "ListBackups", err, nil)
	if len(all) != 2 || all[0].ID != "bk1" || all[1].ID != "bk2" {
		t.Errorf("ListBackups = %v", backupIDs(all))
	}
	one, err := s.ListBackups(ctx, "sb-2")
	checkErr(t, "ListBackups(sb-2)", err, nil)
	if len(one) != 1 || one[0].ID != "bk2" {
		t.Errorf("ListBackups(sb-2) = %v", backupIDs(one))
	}
	exp, err := s.ExpiredBackups(ctx, base.Add(71*time.Hour))
	checkErr(t, "ExpiredBackups", err, nil)
	if len(exp) != 0 {
		t.Errorf("ExpiredBackups before expiry = %v", backupIDs(exp))
	}
	exp, err = s.ExpiredBackups(ctx, base.Add(72*time.Hour))
	checkErr(t, "ExpiredBackups", err, nil)
	if len(exp) != 1 || exp[0].ID != "bk1" {
		t.Errorf("ExpiredBackups at expiry = %v, want [bk1]", backupIDs(exp))
	}
	checkErr(t, "DeleteBackup", s.DeleteBackup(ctx, "bk1"), nil)
	err = s.DeleteBackup(ctx, "bk1")
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DeleteBackup twice: %v, want not found", err)
	}
}

func backupIDs(bs []*store.Backup) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}
