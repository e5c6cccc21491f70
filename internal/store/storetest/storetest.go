// Package storetest is the behaviour suite every store.Store implementation
// must pass. An implementation's own test calls Run with a constructor that
// returns a fresh, empty store and registers its Close with t.Cleanup.
package storetest

import (
	"context"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Run runs the suite. newStore is called once per subtest and must return an
// empty store that is closed when t ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"CreateDefaults", testCreateDefaults},
		{"CreateConflicts", testCreateConflicts},
		{"InvalidArguments", testInvalidArguments},
		{"NotFound", testNotFound},
		{"SandboxesByName", testGetSandboxByName},
		{"NamesPerOwner", testNamesPerOwner},
		{"Claim", testClaim},
		{"ListFilters", testListFilters},
		{"ListEmpty", testListEmpty},
		{"Update", testUpdate},
		{"UpdateConflicts", testUpdateConflicts},
		{"Delete", testDelete},
		{"ReturnedValuesAreCopies", testReturnedValuesAreCopies},
		{"CanceledContext", testCanceledContext},
		{"Keys", testKeys},
		{"KeyConflicts", testKeyConflicts},
		{"KeyScopes", testKeyScopes},
		{"Owners", testOwners},
		{"StateHistory", testStateHistory},
		{"ConcurrentCreateUpdate", testConcurrentCreateUpdate},
		{"ConcurrentSameName", testConcurrentSameName},
		{"Ledger", testLedger},
		{"LedgerPurge", testLedgerPurge},
		{"Idempotency", testIdempotency},
		{"Backups", testBackups},
		{"Previews", testPreviews},
		{"Snapshots", testSnapshots},
		{"SnapshotTTL", testSnapshotTTL},
		{"SandboxSnapshotFields", testSandboxSnapshotFields},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// base is a fixed instant with a nanosecond part, in a zone other than UTC,
// so a store that drops precision or mangles zones is caught.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", 5*3600+30*60))

// minimal returns the smallest valid sandbox.
func minimal(id, name string) *store.Sandbox {
	return &store.Sandbox{ID: id, Name: name, State: api.StateRunning, CreatedAt: base}
}

// full returns a sandbox with every field set to something non-default.
func full(id, name string) *store.Sandbox {
	return &store.Sandbox{
		ID:          id,
		Name:        name,
		State:       api.StateError,
		ErrorReason: "runtime exited: status 137 — out of memory",
		Image:       "base",
		ImageDigest: "sha256:" + strings.Repeat("ab", 32),
		Runtime:     api.RuntimeGVisor,
		Resources:   api.Resources{CPU: 0.25, MemoryMB: 1536, DiskMB: 10240, Pids: 4096},
		Env: map[string]string{
			"PATH":  "/usr/local/bin:/usr/bin",
			"EMPTY": "",
			"JSON":  `{"a":[1,2]}`,
			"UNI":   "héllo ✓ 世界",
		},
		Labels: map[string]string{
			"team":         "infra",
			"dotted.key":   "v",
			`quote"key`:    `quote"value`,
			"$[0]":         "path-like",
			"with space":   "x y",
			"newline\nkey": "line\nbreak",
		},
		SleepAfter:     10*time.Minute + 1,
		KeepAlive:      true,
		Timeout:        time.Duration(math.MaxInt64),
		CreatedAt:      base,
		UpdatedAt:      base.Add(time.Nanosecond),
		LastActivityAt: base.Add(time.Hour + 7),
	}
}

func mustCreate(t *testing.T, s store.Store, sb *store.Sandbox) {
	t.Helper()
	if err := s.CreateSandbox(t.Context(), sb); err != nil {
		t.Fatalf("CreateSandbox(%q): %v", sb.ID, err)
	}
}

func mustGet(t *testing.T, s store.Store, id string) *store.Sandbox {
	t.Helper()
	got, err := s.GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatalf("GetSandbox(%q): %v", id, err)
	}
	return got
}

func mustUpdate(t *testing.T, s store.Store, sb *store.Sandbox) {
	t.Helper()
	if err := s.UpdateSandbox(t.Context(), sb); err != nil {
		t.Fatalf("UpdateSandbox(%q): %v", sb.ID, err)
	}
}

// checkErr fails unless err wraps want (nil: no error) and mentions every
// string in contains.
func checkErr(t *testing.T, what string, err, want error, contains ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error: %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: error = %v, want one wrapping %q", what, err, want)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("%s: error %q does not mention %q", what, err, c)
		}
	}
}

// diffSandbox lists the fields in which got differs from want. Times are
// compared as instants; nil and empty maps count as equal.
func diffSandbox(want, got *store.Sandbox) []string {
	var d []string
	add := func(field string, ok bool) {
		if !ok {
			d = append(d, field)
		}
	}
	add("ID", want.ID == got.ID)
	add("Name", want.Name == got.Name)
	add("State", want.State == got.State)
	add("ErrorReason", want.ErrorReason == got.ErrorReason)
	add("Image", want.Image == got.Image)
	add("ImageDigest", want.ImageDigest == got.ImageDigest)
	add("Runtime", want.Runtime == got.Runtime)
	add("Resources", want.Resources == got.Resources)
	add("Env", maps.Equal(want.Env, got.Env))
	add("Labels", maps.Equal(want.Labels, got.Labels))
	add("SleepAfter", want.SleepAfter == got.SleepAfter)
	add("KeepAlive", want.KeepAlive == got.KeepAlive)
	add("Timeout", want.Timeout == got.Timeout)
	add("CreatedAt", want.CreatedAt.Equal(got.CreatedAt))
	add("UpdatedAt", want.UpdatedAt.Equal(got.UpdatedAt))
	add("LastActivityAt", want.LastActivityAt.Equal(got.LastActivityAt))
	return d
}

func checkSandbox(t *testing.T, want, got *store.Sandbox) {
	t.Helper()
	if d := diffSandbox(want, got); len(d) > 0 {
		t.Errorf("sandbox %q differs in %v\n got: %+v\nwant: %+v", want.ID, d, *got, *want)
	}
}

func ids(sbs []*store.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.ID
	}
	return out
}

func clone(sb *store.Sandbox) *store.Sandbox {
	c := *sb
	c.Env = maps.Clone(sb.Env)
	c.Labels = maps.Clone(sb.Labels)
	return &c
}

func testSandboxRoundTrip(t *testing.T, s store.Store) {
	tests := []struct {
		name string
		sb   *store.Sandbox
	}{
		{"every field", full("sb-full", "full")},
		{"minimal", minimal("sb-min", "")},
		{"empty maps", func() *store.Sandbox {
			sb := minimal("sb-empty-maps", "empty")
			sb.Env, sb.Labels = map[string]string{}, map[string]string{}
			return sb
		}()},
		{"unicode name", minimal("sb-uni", "名前-ñ-✓")},
		{"far times", func() *store.Sandbox {
			sb := minimal("sb-far", "far")
			sb.CreatedAt = time.Date(1700, 1, 1, 0, 0, 0, 1, time.UTC)
			sb.UpdatedAt = time.Date(2262, 1, 1, 0, 0, 0, 999999999, time.UTC)
			sb.LastActivityAt = time.Unix(0, 0)
			return sb
		}()},
		{"every state", func() *store.Sandbox {
			sb := minimal("sb-stopping", "stopping")
			sb.State = api.StateStopping
			return sb
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := clone(tc.sb)
			mustCreate(t, s, tc.sb)
			if want.UpdatedAt.IsZero() {
				want.UpdatedAt = want.CreatedAt
			}
			checkSandbox(t, want, mustGet(t, s, want.ID))
			if want.Name != "" {
				got, err := sandboxNamed(t.Context(), s, want.Name)
				checkErr(t, "SandboxesByName", err, nil)
				checkSandbox(t, want, got)
			}
			list, err := s.ListSandboxes(t.Context(), nil)
			checkErr(t, "ListSandboxes", err, nil)
			found := false
			for _, got := range list {
				if got.ID == want.ID {
					found = true
					checkSandbox(t, want, got)
				}
			}
			if !found {
				t.Errorf("ListSandboxes does not include %q", want.ID)
			}
		})
	}
}

func testCreateDefaults(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Second)
	sb := &store.Sandbox{ID: "sb-defaults", State: api.StateCreating}
	mustCreate(t, s, sb)
	if sb.CreatedAt.IsZero() || sb.CreatedAt.Before(before) {
		t.Errorf("CreatedAt = %v, want it set to about now", sb.CreatedAt)
	}
	if !sb.UpdatedAt.Equal(sb.CreatedAt) {
		t.Errorf("UpdatedAt = %v, want CreatedAt %v", sb.UpdatedAt, sb.CreatedAt)
	}
	got := mustGet(t, s, sb.ID)
	if !got.CreatedAt.Equal(sb.CreatedAt) || !got.UpdatedAt.Equal(sb.UpdatedAt) {
		t.Errorf("stored times %v/%v differ from those written back %v/%v",
			got.CreatedAt, got.UpdatedAt, sb.CreatedAt, sb.UpdatedAt)
	}
	if !got.LastActivityAt.IsZero() {
		t.Errorf("LastActivityAt = %v, want zero as given", got.LastActivityAt)
	}
}

func destroyed(sb *store.Sandbox) *store.Sandbox {
	sb.State = api.StateDestroyed
	return sb
}

func testCreateConflicts(t *testing.T, s store.Store) {
	tests := []struct {
		name     string
		existing []*store.Sandbox
		create   *store.Sandbox
		want     error
		contains []string
	}{
		{
			name:     "duplicate id",
			existing: []*store.Sandbox{minimal("dup-id", "")},
			create:   minimal("dup-id", ""),
			want:     errdefs.ErrConflict,
			contains: []string{"dup-id"},
		},
		{
			name:     "duplicate id of a destroyed sandbox",
			existing: []*store.Sandbox{destroyed(minimal("dup-dead-id", ""))},
			create:   minimal("dup-dead-id", ""),
			want:     errdefs.ErrConflict,
		},
		{
			name:     "duplicate live name",
			existing: []*store.Sandbox{minimal("name-a", "taken")},
			create:   minimal("name-b", "taken"),
			want:     errdefs.ErrConflict,
			contains: []string{"taken"},
		},
		{
			name:     "name of a paused sandbox",
			existing: []*store.Sandbox{func() *store.Sandbox { sb := minimal("paused-a", "p"); sb.State = api.StatePaused; return sb }()},
			create:   minimal("paused-b", "p"),
			want:     errdefs.ErrConflict,
		},
		{
			name:     "name of a destroyed sandbox",
			existing: []*store.Sandbox{destroyed(minimal("reuse-a", "reused"))},
			create:   minimal("reuse-b", "reused"),
		},
		{
			name:     "several destroyed with one name",
			existing: []*store.Sandbox{destroyed(minimal("many-a", "many")), destroyed(minimal("many-b", "many"))},
			create:   minimal("many-c", "many"),
		},
		{
			name:     "destroyed beside a live one",
			existing: []*store.Sandbox{minimal("beside-a", "beside")},
			create:   destroyed(minimal("beside-b", "beside")),
		},
		{
			name:     "many unnamed",
			existing: []*store.Sandbox{minimal("anon-a", ""), minimal("anon-b", "")},
			create:   minimal("anon-c", ""),
		},
		{
			name:     "names differ only in case",
			existing: []*store.Sandbox{minimal("case-a", "Case")},
			create:   minimal("case-b", "case"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, sb := range tc.existing {
				mustCreate(t, s, sb)
			}
			err := s.CreateSandbox(t.Context(), tc.create)
			checkErr(t, "CreateSandbox", err, tc.want, tc.contains...)
			if tc.want != nil && len(tc.existing) > 0 {
				// The failed create must not have touched the record it
				// collided with.
				first := tc.existing[0]
				checkSandbox(t, first, mustGet(t, s, first.ID))
			}
		})
	}
}

func testInvalidArguments(t *testing.T, s store.Store) {
	mutate := func(f func(sb *store.Sandbox)) *store.Sandbox {
		sb := minimal("sb-invalid", "invalid")
		f(sb)
		return sb
	}
	bad := []struct {
		name string
		sb   *store.Sandbox
	}{
		{"nil", nil},
		{"empty id", mutate(func(sb *store.Sandbox) { sb.ID = "" })},
		{"empty state", mutate(func(sb *store.Sandbox) { sb.State = "" })},
		{"unknown state", mutate(func(sb *store.Sandbox) { sb.State = "flying" })},
		{"negative sleep_after", mutate(func(sb *store.Sandbox) { sb.SleepAfter = -time.Second })},
		{"negative timeout", mutate(func(sb *store.Sandbox) { sb.Timeout = -1 })},
		{"negative memory", mutate(func(sb *store.Sandbox) { sb.Resources.MemoryMB = -1 })},
		{"NaN cpu", mutate(func(sb *store.Sandbox) { sb.Resources.CPU = math.NaN() })},
		{"invalid UTF-8 name", mutate(func(sb *store.Sandbox) { sb.Name = "bad\xff" })},
		{"invalid UTF-8 label", mutate(func(sb *store.Sandbox) { sb.Labels = map[string]string{"k\xfe": "v"} })},
		{"huge id", mutate(func(sb *store.Sandbox) { sb.ID = strings.Repeat("x", 1<<20) })},
	}
	for _, tc := range bad {
		t.Run("create "+tc.name, func(t *testing.T) {
			checkErr(t, "CreateSandbox", s.CreateSandbox(t.Context(), tc.sb), errdefs.ErrInvalidArgument)
		})
	}
	mustCreate(t, s, minimal("sb-invalid", "invalid"))
	for _, tc := range bad {
		t.Run("update "+tc.name, func(t *testing.T) {
			checkErr(t, "UpdateSandbox", s.UpdateSandbox(t.Context(), tc.sb), errdefs.ErrInvalidArgument)
		})
	}
	// A refused update changes nothing, not even UpdatedAt.
	want := minimal("sb-invalid", "invalid")
	want.UpdatedAt = want.CreatedAt
	checkSandbox(t, want, mustGet(t, s, "sb-invalid"))
	calls := []struct {
		name string
		err  error
	}{
		{"GetSandbox empty id", func() error { _, err := s.GetSandbox(t.Context(), ""); return err }()},
		{"DeleteSandbox empty id", s.DeleteSandbox(t.Context(), "")},
		{"KeyByHash short hash", func() error { _, err := s.KeyByHash(t.Context(), []byte("short")); return err }()},
		{"CreateKey nil hash", s.CreateKey(t.Context(), &store.Key{ID: "k"})},
		{"AppendStateChange unknown state", s.AppendStateChange(t.Context(),
			store.StateChange{SandboxID: "sb-invalid", To: "flying"})},
	}
	for _, c := range calls {
		checkErr(t, c.name, c.err, errdefs.ErrInvalidArgument)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, destroyed(minimal("sb-dead", "dead")))
	tests := []struct {
		name     string
		call     func() error
		contains string
	}{
		{"GetSandbox", func() error { _, err := s.GetSandbox(ctx, "sb-missing"); return err }, "sb-missing"},
		{"SandboxesByName", func() error { _, err := sandboxNamed(ctx, s, "nobody"); return err }, "nobody"},
		{"SandboxesByName destroyed", func() error { _, err := sandboxNamed(ctx, s, "dead"); return err }, "dead"},
		{"UpdateSandbox", func() error { return s.UpdateSandbox(ctx, minimal("sb-missing", "")) }, "sb-missing"},
		{"DeleteSandbox", func() error { return s.DeleteSandbox(ctx, "sb-missing") }, "sb-missing"},
		{"DeleteKey", func() error { return s.DeleteKey(ctx, "key-missing") }, "key-missing"},
		{"KeyByHash", func() error { _, err := s.KeyByHash(ctx, hash("nope")); return err }, ""},
		{"AppendStateChange", func() error {
			return s.AppendStateChange(ctx, store.StateChange{SandboxID: "sb-missing", To: api.StateRunning})
		}, "sb-missing"},
		{"StateHistory", func() error { _, err := s.StateHistory(ctx, "sb-missing"); return err }, "sb-missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.name, tc.call(), errdefs.ErrNotFound, tc.contains)
		})
	}
	if _, err := s.GetSandbox(ctx, "sb-dead"); err != nil {
		t.Errorf("GetSandbox of a destroyed sandbox: %v; want it found by id", err)
	}
}

func testGetSandboxByName(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := minimal("sb-old", "worker")
	mustCreate(t, s, old)
	got, err := sandboxNamed(ctx, s, "worker")
	checkErr(t, "SandboxesByName", err, nil)
	if got.ID != "sb-old" {
		t.Fatalf("SandboxesByName = %q, want sb-old", got.ID)
	}

	// Destroying frees the name for a new sandbox, which the name then finds.
	old.State = api.StateDestroyed
	mustUpdate(t, s, old)
	checkErr(t, "SandboxesByName after destroy",
		func() error { _, err := sandboxNamed(ctx, s, "worker"); return err }(), errdefs.ErrNotFound)
	mustCreate(t, s, minimal("sb-new", "worker"))
	got, err = sandboxNamed(ctx, s, "worker")
	checkErr(t, "SandboxesByName after reuse", err, nil)
	if got.ID != "sb-new" {
		t.Errorf("SandboxesByName = %q, want sb-new", got.ID)
	}

	// The old record cannot come back to life while its name is taken.
	old.State = api.StateRunning
	checkErr(t, "revive with a taken name", s.UpdateSandbox(ctx, old), errdefs.ErrConflict, "worker")
	if got := mustGet(t, s, "sb-old"); got.State != api.StateDestroyed {
		t.Errorf("after a refused update, state = %q, want destroyed", got.State)
	}
}

func testListFilters(t *testing.T, s store.Store) {
	// Created out of time order, to show the list sorts by CreatedAt and
	// not by insertion.
	sbs := []struct {
		id     string
		offset time.Duration
		state  string
		labels map[string]string
	}{
		{"c", 3 * time.Nanosecond, api.StateRunning, map[string]string{"team": "a", "env": "prod"}},
		{"a", 1 * time.Nanosecond, api.StateStopped, map[string]string{"team": "a", "env": "dev"}},
		{"b", 2 * time.Nanosecond, api.StatePaused, map[string]string{"team": "b", "env": "prod", "x.y": `q"`}},
		{"d", 4 * time.Nanosecond, api.StateError, map[string]string{"team": "", "env": "prod"}},
		{"e", 5 * time.Nanosecond, api.StateCreating, nil},
		{"dead", 0, api.StateDestroyed, map[string]string{"team": "a", "env": "prod"}},
	}
	for _, sb := range sbs {
		rec := minimal(sb.id, "")
		rec.State = sb.state
		rec.Labels = sb.labels
		rec.CreatedAt = base.Add(sb.offset)
		mustCreate(t, s, rec)
	}
	tests := []struct {
		name   string
		filter map[string]string
		want   []string
	}{
		{"nil", nil, []string{"a", "b", "c", "d", "e"}},
		{"empty", map[string]string{}, []string{"a", "b", "c", "d", "e"}},
		{"one label", map[string]string{"team": "a"}, []string{"a", "c"}},
		{"two labels", map[string]string{"team": "a", "env": "prod"}, []string{"c"}},
		{"value matches but key differs", map[string]string{"env": "a"}, nil},
		{"no match", map[string]string{"team": "z"}, nil},
		{"empty value matches only an empty value", map[string]string{"team": ""}, []string{"d"}},
		{"absent key with empty value", map[string]string{"missing": ""}, nil},
		{"odd key and value", map[string]string{"x.y": `q"`}, []string{"b"}},
		{"prefix of a value does not match", map[string]string{"env": "pro"}, nil},
		{"value is case sensitive", map[string]string{"env": "PROD"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListSandboxes(t.Context(), tc.filter)
			checkErr(t, "ListSandboxes", err, nil)
			if g := ids(got); !equalStrings(g, tc.want) {
				t.Errorf("ListSandboxes(%v) = %v, want %v", tc.filter, g, tc.want)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testListEmpty(t *testing.T, s store.Store) {
	got, err := s.ListSandboxes(t.Context(), nil)
	checkErr(t, "ListSandboxes", err, nil)
	if len(got) != 0 {
		t.Errorf("ListSandboxes on an empty store = %v", ids(got))
	}
	keys, err := s.ListKeys(t.Context())
	checkErr(t, "ListKeys", err, nil)
	if len(keys) != 0 {
		t.Errorf("ListKeys on an empty store returned %d keys", len(keys))
	}
}

// ctxCanceled returns an already cancelled context.
func ctxCanceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func testCanceledContext(t *testing.T, s store.Store) {
	mustCreate(t, s, minimal("sb-ctx", ""))
	ctx := ctxCanceled(t)
	calls := []struct {
		name string
		err  error
	}{
		{"CreateSandbox", s.CreateSandbox(ctx, minimal("sb-ctx-2", ""))},
		{"GetSandbox", func() error { _, err := s.GetSandbox(ctx, "sb-ctx"); return err }()},
		{"ListSandboxes", func() error { _, err := s.ListSandboxes(ctx, nil); return err }()},
		{"DeleteSandbox", s.DeleteSandbox(ctx, "sb-ctx")},
	}
	for _, c := range calls {
		checkErr(t, c.name, c.err, context.Canceled)
	}
	mustGet(t, s, "sb-ctx")
	checkErr(t, "GetSandbox of the cancelled create",
		func() error { _, err := s.GetSandbox(t.Context(), "sb-ctx-2"); return err }(), errdefs.ErrNotFound)
}
