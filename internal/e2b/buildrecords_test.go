package e2b

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// TestBuildsAcrossRestart: with the daemon's store, a build that had
// finished is found after a restart as it ended, one the restart cut short
// is an error saying so, neither is another key's, and an unknown one is
// still not found.
func TestBuildsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "paddock.db"), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	before := newBuildTable()
	before.rec, before.log = st, slog.Default()
	done, err := before.add("key-a", "py", []string{"default", "v2"})
	if err != nil {
		t.Fatal(err)
	}
	done.status, done.started, done.finished = "error", true, time.Now()
	done.reason = &buildReason{Message: "step 2: exit status 1", Step: "2", LogEntries: []logEntry{}}
	before.record(ctx, done)
	cut, err := before.add("key-a", "py", []string{"default"})
	if err != nil {
		t.Fatal(err)
	}
	cut.status, cut.started = "building", true
	before.record(ctx, cut)

	// The restart: a new handler on the same store.
	h := &Handler{opts: Options{Builds: st, Context: ctx}, log: slog.Default(), builds: newBuildTable()}
	h.builds.rec, h.builds.log = st, slog.Default()
	h.endUnfinishedBuilds()
	mine := controller.WithCaller(ctx, "key-a", api.KeyScopeOwn)
	got, err := h.builds.get(mine, "py", done.id)
	if err != nil || got.status != "error" || got.reason == nil || got.reason.Message != "step 2: exit status 1" || got.reason.Step != "2" {
		t.Fatalf("a finished build after the restart: %+v, %v", got, err)
	}
	got, err = h.builds.get(mine, "py", cut.id)
	if err != nil || got.status != "error" || got.reason == nil || got.reason.Message != restartedReason || !got.restored {
		t.Fatalf("a build the restart cut short: %+v, %v", got, err)
	}
	other := controller.WithCaller(ctx, "key-b", api.KeyScopeOwn)
	if _, err := h.builds.get(other, "py", done.id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another key's build: %v", err)
	}
	if _, err := h.builds.get(mine, "py", "no-such-build"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an unknown build: %v", err)
	}
	if _, err := h.builds.get(mine, "other", done.id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a build under another template's name: %v", err)
	}
}

// TestAbandonedBuildRecorded: a build asked for and never started is let
// go after buildKeptFor when another is asked for; its record then says
// so (not that the daemon restarted), and starting it is refused with
// that reason.
func TestAbandonedBuildRecorded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "paddock.db"), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &Handler{opts: Options{Builds: st, Context: ctx}, log: slog.Default(), builds: newBuildTable(), bodies: httpbody.NewBudget(0)}
	h.builds.rec, h.builds.log = st, slog.Default()
	old, err := h.builds.add("key-a", "py", []string{"default"})
	if err != nil {
		t.Fatal(err)
	}
	h.builds.record(ctx, old)
	old.created = time.Now().Add(-buildKeptFor - time.Minute)
	if _, err := h.builds.add("key-a", "py", []string{"default"}); err != nil {
		t.Fatal(err)
	}
	mine := controller.WithCaller(ctx, "key-a", api.KeyScopeOwn)
	got, err := h.builds.get(mine, "py", old.id)
	if err != nil || !got.restored || got.status != "error" || got.reason == nil || got.reason.Message != abandonedReason {
		t.Fatalf("a build never started, let go: %+v, %v", got, err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v2/templates/py/builds/"+old.id, strings.NewReader("{}"))
	req.SetPathValue("id", "py")
	req.SetPathValue("build", old.id)
	req = req.WithContext(mine)
	rec := httptest.NewRecorder()
	h.startBuild(rec, req)
	if rec.Code == http.StatusAccepted || rec.Code < 400 || !strings.Contains(rec.Body.String(), "not started within an hour") || strings.Contains(rec.Body.String(), "restarted") {
		t.Fatalf("starting a build let go: %d %s", rec.Code, rec.Body.String())
	}
}
