package sqlite

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestE2BBuildsPersist: a build's record survives the store's reopening,
// an unfinished one is ended with a reason, old ones and those beyond the
// count kept are pruned, and bad records are refused.
func TestE2BBuildsPersist(t *testing.T) {
	st, path := openTemp(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-2 * time.Hour).Round(0)
	b := &store.E2BBuild{ID: "b-1", Owner: "key1", Name: "py", Tags: []string{"default", "v1"}, Status: "waiting", CreatedAt: t0}
	if err := st.PutE2BBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Status = "building"
	if err := st.PutE2BBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	done := &store.E2BBuild{ID: "b-2", Owner: "key2", Name: "py", Tags: []string{"default"}, Status: "error", Reason: "step 2: exit 1", Step: "2", CreatedAt: t0.Add(time.Hour), FinishedAt: t0.Add(time.Hour + time.Minute)}
	if err := st.PutE2BBuild(ctx, done); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openAt(t, path)
	got, err := st.GetE2BBuild(ctx, "py", "b-2")
	if err != nil || !reflect.DeepEqual(got, done) {
		t.Fatalf("after reopening: %+v, %v; want %+v", got, err, done)
	}
	if _, err := st.GetE2BBuild(ctx, "other", "b-2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a build under another template's name: %v", err)
	}
	at := time.Now().UTC().Round(0)
	if n, err := st.EndE2BBuilds(ctx, "the daemon restarted", at); err != nil || n != 1 {
		t.Fatalf("EndE2BBuilds = %d, %v; want 1", n, err)
	}
	got, err = st.GetE2BBuild(ctx, "py", "b-1")
	if err != nil || got.Status != "error" || got.Reason != "the daemon restarted" || !got.FinishedAt.Equal(at) || !reflect.DeepEqual(got.Tags, []string{"default", "v1"}) {
		t.Fatalf("an unfinished build after EndE2BBuilds: %+v, %v", got, err)
	}
	if got, _ := st.GetE2BBuild(ctx, "py", "b-2"); got.Reason != "step 2: exit 1" {
		t.Fatalf("EndE2BBuilds changed a finished build: %+v", got)
	}
	// b-1 is older than the cut; of the rest, only the newest is kept.
	if err := st.PutE2BBuild(ctx, &store.E2BBuild{ID: "b-3", Owner: "key1", Name: "py", Tags: []string{"default"}, Status: "ready", CreatedAt: t0.Add(90 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PruneE2BBuilds(ctx, t0.Add(time.Minute), 1); err != nil || n != 2 {
		t.Fatalf("PruneE2BBuilds = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]bool{"b-1": false, "b-2": false, "b-3": true} {
		if _, err := st.GetE2BBuild(ctx, "py", id); (err == nil) != want {
			t.Errorf("%s after pruning: %v (kept: want %v)", id, err, want)
		}
	}
	for name, bad := range map[string]*store.E2BBuild{
		"status":  {ID: "x", Owner: "k", Name: "py", Status: "done", CreatedAt: t0},
		"no id":   {Owner: "k", Name: "py", Status: "ready", CreatedAt: t0},
		"no time": {ID: "x", Owner: "k", Name: "py", Status: "ready"},
		"tag":     {ID: "x", Owner: "k", Name: "py", Status: "ready", Tags: []string{""}, CreatedAt: t0},
	} {
		if err := st.PutE2BBuild(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}
