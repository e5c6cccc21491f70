package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func testUpdate(t *testing.T, s store.Store) {
	tests := []struct {
		name   string
		change func(sb *store.Sandbox)
	}{
		{"state and reason", func(sb *store.Sandbox) { sb.State = api.StateError; sb.ErrorReason = "oom" }},
		{"rename", func(sb *store.Sandbox) { sb.Name = "renamed" }},
		{"drop name", func(sb *store.Sandbox) { sb.Name = "" }},
		{"labels and env", func(sb *store.Sandbox) {
			sb.Labels = map[string]string{"new": "label"}
			sb.Env = nil
		}},
		{"resources and durations", func(sb *store.Sandbox) {
			sb.Resources = api.Resources{CPU: 2, MemoryMB: 1, DiskMB: 2, Pids: 3}
			sb.SleepAfter, sb.Timeout, sb.KeepAlive = 0, time.Nanosecond, false
		}},
		{"activity", func(sb *store.Sandbox) { sb.LastActivityAt = base.Add(48 * time.Hour) }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("sb-update-%d", i)
			orig := full(id, fmt.Sprintf("update-%d", i))
			mustCreate(t, s, orig)

			upd := clone(orig)
			tc.change(upd)
			upd.CreatedAt = base.Add(-time.Hour) // ignored: a sandbox is created once
			upd.UpdatedAt = base.Add(-time.Hour) // ignored: set by the store
			before := time.Now().Add(-time.Second)
			mustUpdate(t, s, upd)

			got := mustGet(t, s, id)
			if got.UpdatedAt.Before(before) {
				t.Errorf("UpdatedAt = %v, want it set by the store to about now", got.UpdatedAt)
			}
			if !got.UpdatedAt.Equal(upd.UpdatedAt) {
				t.Errorf("UpdatedAt written back = %v, stored = %v", upd.UpdatedAt, got.UpdatedAt)
			}
			if !got.CreatedAt.Equal(orig.CreatedAt) || !upd.CreatedAt.Equal(orig.CreatedAt) {
				t.Errorf("CreatedAt stored %v, written back %v; want the original %v",
					got.CreatedAt, upd.CreatedAt, orig.CreatedAt)
			}
			checkSandbox(t, upd, got)
		})
	}
}

func testUpdateConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, minimal("sb-holder", "held"))
	mine := minimal("sb-mine", "mine")
	mustCreate(t, s, mine)

	// Keeping one's own name is no conflict.
	mine.State = api.StateStopped
	mustUpdate(t, s, mine)

	mine.Name = "held"
	checkErr(t, "rename onto a live name", s.UpdateSandbox(ctx, mine), errdefs.ErrConflict, "held")
	if got := mustGet(t, s, "sb-mine"); got.Name != "mine" || got.State != api.StateStopped {
		t.Errorf("after a refused rename: name %q state %q, want mine/stopped", got.Name, got.State)
	}

	// A destroyed record may carry a live sandbox's name.
	mine.State = api.StateDestroyed
	mustUpdate(t, s, mine)

	holder := mustGet(t, s, "sb-holder")
	holder.State = api.StateDestroyed
	mustUpdate(t, s, holder)
	mine.State = api.StateRunning
	mustUpdate(t, s, mine) // the name is free again
	got, err := sandboxNamed(ctx, s, "held")
	checkErr(t, "SandboxesByName", err, nil)
	if got.ID != "sb-mine" {
		t.Errorf("SandboxesByName(held) = %q, want sb-mine", got.ID)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, minimal("sb-del", "del"))
	mustCreate(t, s, minimal("sb-keep", "keep"))
	checkErr(t, "AppendStateChange", s.AppendStateChange(ctx,
		store.StateChange{SandboxID: "sb-del", To: api.StateRunning}), nil)

	checkErr(t, "DeleteSandbox", s.DeleteSandbox(ctx, "sb-del"), nil)
	checkErr(t, "GetSandbox after delete",
		func() error { _, err := s.GetSandbox(ctx, "sb-del"); return err }(), errdefs.ErrNotFound, "sb-del")
	checkErr(t, "second DeleteSandbox", s.DeleteSandbox(ctx, "sb-del"), errdefs.ErrNotFound, "sb-del")
	checkErr(t, "StateHistory after delete",
		func() error { _, err := s.StateHistory(ctx, "sb-del"); return err }(), errdefs.ErrNotFound)

	list, err := s.ListSandboxes(ctx, nil)
	checkErr(t, "ListSandboxes", err, nil)
	if g := ids(list); !equalStrings(g, []string{"sb-keep"}) {
		t.Errorf("ListSandboxes after delete = %v, want [sb-keep]", g)
	}

	// Both the id and the name may be used again, with a clean history.
	mustCreate(t, s, minimal("sb-del", "del"))
	h, err := s.StateHistory(ctx, "sb-del")
	checkErr(t, "StateHistory of the new sandbox", err, nil)
	if len(h) != 0 {
		t.Errorf("a re-created sandbox inherited history %v", h)
	}
}

func testReturnedValuesAreCopies(t *testing.T, s store.Store) {
	sb := full("sb-copy", "copy")
	mustCreate(t, s, sb)
	sb.Labels["team"] = "changed after create"

	got := mustGet(t, s, "sb-copy")
	got.Labels["team"] = "changed after get"
	got.Env["PATH"] = "changed"

	again := mustGet(t, s, "sb-copy")
	if again.Labels["team"] != "infra" || again.Env["PATH"] != full("", "").Env["PATH"] {
		t.Errorf("stored maps changed through a caller's copy: labels %v env %v", again.Labels, again.Env)
	}
}

func testKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	keys := []*store.Key{
		{ID: "key-2", Name: "second", Prefix: "pdk_2", SecretHash: hash("two"), CreatedAt: base.Add(2)},
		{ID: "key-1", Name: "first", Prefix: "pdk_1", SecretHash: hash("one"), CreatedAt: base.Add(1)},
		{ID: "key-3", Name: "", Prefix: "", SecretHash: hash("three"), CreatedAt: base.Add(3)},
	}
	for _, k := range keys {
		checkErr(t, "CreateKey", s.CreateKey(ctx, k), nil)
	}
	byID := map[string]*store.Key{}
	for _, k := range keys {
		byID[k.ID] = k
	}
	checkKey := func(t *testing.T, want, got *store.Key) {
		t.Helper()
		if got.ID != want.ID || got.Name != want.Name || got.Prefix != want.Prefix ||
			!bytes.Equal(got.SecretHash, want.SecretHash) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("key differs\n got: %+v\nwant: %+v", *got, *want)
		}
	}

	list, err := s.ListKeys(ctx)
	checkErr(t, "ListKeys", err, nil)
	var order []string
	for _, k := range list {
		order = append(order, k.ID)
		checkKey(t, byID[k.ID], k)
	}
	if !equalStrings(order, []string{"key-1", "key-2", "key-3"}) {
		t.Errorf("ListKeys order = %v, want oldest first", order)
	}

	tests := []struct {
		secret string
		want   string // key id; "" = not found
	}{
		{"one", "key-1"},
		{"two", "key-2"},
		{"three", "key-3"},
		{"four", ""},
		{"", ""},
	}
	for _, tc := range tests {
		t.Run("KeyByHash "+tc.secret, func(t *testing.T) {
			got, err := s.KeyByHash(ctx, hash(tc.secret))
			if tc.want == "" {
				checkErr(t, "KeyByHash", err, errdefs.ErrNotFound)
				return
			}
			checkErr(t, "KeyByHash", err, nil)
			checkKey(t, byID[tc.want], got)
		})
	}

	checkErr(t, "DeleteKey", s.DeleteKey(ctx, "key-2"), nil)
	checkErr(t, "KeyByHash of a deleted key",
		func() error { _, err := s.KeyByHash(ctx, hash("two")); return err }(), errdefs.ErrNotFound)
	checkErr(t, "second DeleteKey", s.DeleteKey(ctx, "key-2"), errdefs.ErrNotFound, "key-2")
	list, err = s.ListKeys(ctx)
	checkErr(t, "ListKeys", err, nil)
	if len(list) != 2 {
		t.Errorf("ListKeys after delete has %d keys, want 2", len(list))
	}

	// A zero CreatedAt is filled in and written back.
	k := &store.Key{ID: "key-now", SecretHash: hash("now")}
	checkErr(t, "CreateKey", s.CreateKey(ctx, k), nil)
	if k.CreatedAt.IsZero() {
		t.Error("CreateKey left CreatedAt zero")
	}
	got, err := s.KeyByHash(ctx, hash("now"))
	checkErr(t, "KeyByHash", err, nil)
	checkKey(t, k, got)
}

func testKeyConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	checkErr(t, "CreateKey", s.CreateKey(ctx, &store.Key{ID: "key-a", SecretHash: hash("a")}), nil)
	tests := []struct {
		name string
		key  *store.Key
		want error
	}{
		{"duplicate id", &store.Key{ID: "key-a", SecretHash: hash("other")}, errdefs.ErrConflict},
		{"duplicate secret", &store.Key{ID: "key-b", SecretHash: hash("a")}, errdefs.ErrConflict},
		{"distinct", &store.Key{ID: "key-c", SecretHash: hash("c")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, "CreateKey", s.CreateKey(ctx, tc.key), tc.want)
		})
	}
	got, err := s.KeyByHash(ctx, hash("a"))
	checkErr(t, "KeyByHash", err, nil)
	if got.ID != "key-a" {
		t.Errorf("KeyByHash(a) = %q after refused duplicates, want key-a", got.ID)
	}
}

func testStateHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, minimal("sb-hist", ""))
	mustCreate(t, s, minimal("sb-other", ""))

	h, err := s.StateHistory(ctx, "sb-hist")
	checkErr(t, "StateHistory of a new sandbox", err, nil)
	if len(h) != 0 {
		t.Fatalf("new sandbox has history %v", h)
	}

	changes := []store.StateChange{
		{SandboxID: "sb-hist", From: "", To: api.StateCreating, Reason: "created", At: base},
		{SandboxID: "sb-hist", From: api.StateCreating, To: api.StateRunning, At: base.Add(1)},
		{SandboxID: "sb-other", From: "", To: api.StateCreating, At: base.Add(2)},
		// Same instant: append order decides.
		{SandboxID: "sb-hist", From: api.StateRunning, To: api.StateStopping, Reason: "idle ✓", At: base.Add(3)},
		{SandboxID: "sb-hist", From: api.StateStopping, To: api.StateStopped, Reason: "idle", At: base.Add(3)},
		// Appended later but earlier in time: time decides.
		{SandboxID: "sb-hist", From: api.StateCreating, To: api.StateError, Reason: "clock", At: base.Add(-1)},
	}
	for _, c := range changes {
		checkErr(t, "AppendStateChange", s.AppendStateChange(ctx, c), nil)
	}
	want := []store.StateChange{changes[5], changes[0], changes[1], changes[3], changes[4]}
	got, err := s.StateHistory(ctx, "sb-hist")
	checkErr(t, "StateHistory", err, nil)
	if len(got) != len(want) {
		t.Fatalf("StateHistory has %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.SandboxID != w.SandboxID || g.From != w.From || g.To != w.To || g.Reason != w.Reason || !g.At.Equal(w.At) {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}

	// A zero At is stamped by the store.
	before := time.Now().Add(-time.Second)
	checkErr(t, "AppendStateChange", s.AppendStateChange(ctx,
		store.StateChange{SandboxID: "sb-other", From: api.StateCreating, To: api.StateRunning}), nil)
	got, err = s.StateHistory(ctx, "sb-other")
	checkErr(t, "StateHistory", err, nil)
	if len(got) != 2 || got[1].At.Before(before) {
		t.Errorf("StateHistory(sb-other) = %+v, want a second entry stamped about now", got)
	}
}

// workers is how many goroutines the concurrency tests run at once.
const workers = 50

func testConcurrentCreateUpdate(t *testing.T, s store.Store) {
	const updates = 5
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, workers*(3*updates+3))
	for i := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("sb-conc-%02d", i)
			sb := minimal(id, fmt.Sprintf("conc-%02d", i))
			sb.Labels = map[string]string{"worker": "yes"}
			if err := s.CreateSandbox(ctx, sb); err != nil {
				errs <- fmt.Errorf("create %s: %w", id, err)
				return
			}
			for u := range updates {
				sb.Labels = map[string]string{"worker": "yes", "round": fmt.Sprint(u)}
				sb.LastActivityAt = base.Add(time.Duration(u))
				if err := s.UpdateSandbox(ctx, sb); err != nil {
					errs <- fmt.Errorf("update %s: %w", id, err)
				}
				if err := s.AppendStateChange(ctx, store.StateChange{SandboxID: id, To: api.StateRunning}); err != nil {
					errs <- fmt.Errorf("append %s: %w", id, err)
				}
				if _, err := s.GetSandbox(ctx, id); err != nil {
					errs <- fmt.Errorf("get %s: %w", id, err)
				}
			}
			if _, err := s.ListSandboxes(ctx, map[string]string{"worker": "yes"}); err != nil {
				errs <- fmt.Errorf("list: %w", err)
			}
			if err := s.CreateKey(ctx, &store.Key{ID: "key-" + id, SecretHash: hash(id)}); err != nil {
				errs <- fmt.Errorf("create key %s: %w", id, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	list, err := s.ListSandboxes(ctx, map[string]string{"round": fmt.Sprint(updates - 1)})
	checkErr(t, "ListSandboxes", err, nil)
	if len(list) != workers {
		t.Errorf("%d sandboxes carry the last update, want %d", len(list), workers)
	}
	for _, sb := range list {
		if !sb.LastActivityAt.Equal(base.Add(updates - 1)) {
			t.Errorf("sandbox %s: LastActivityAt %v, want the last update's", sb.ID, sb.LastActivityAt)
		}
		h, err := s.StateHistory(ctx, sb.ID)
		checkErr(t, "StateHistory", err, nil)
		if len(h) != updates {
			t.Errorf("sandbox %s has %d state changes, want %d", sb.ID, len(h), updates)
		}
	}
	keys, err := s.ListKeys(ctx)
	checkErr(t, "ListKeys", err, nil)
	if len(keys) != workers {
		t.Errorf("ListKeys has %d keys, want %d", len(keys), workers)
	}
}

func testConcurrentSameName(t *testing.T, s store.Store) {
	ctx := t.Context()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		winners   []string
		conflicts int
		others    []error
	)
	for i := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("sb-race-%02d", i)
			err := s.CreateSandbox(ctx, minimal(id, "contested"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, id)
			case errors.Is(err, errdefs.ErrConflict):
				conflicts++
			default:
				others = append(others, err)
			}
		})
	}
	wg.Wait()
	for _, err := range others {
		t.Errorf("unexpected error: %v", err)
	}
	if len(winners) != 1 || conflicts != workers-1 {
		t.Fatalf("%d creates won (%v) and %d conflicted; want exactly one winner", len(winners), winners, conflicts)
	}
	got, err := sandboxNamed(ctx, s, "contested")
	checkErr(t, "SandboxesByName", err, nil)
	if got.ID != winners[0] {
		t.Errorf("SandboxesByName = %q, want the winner %q", got.ID, winners[0])
	}
}
