package sqlite

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestTemplatesCacheAndPoolsPersist(t *testing.T) {
	st, path := openTemp(t)
	ctx := context.Background()
	tpl := &store.Template{
		Name: "py", Spec: api.TemplateSpec{Name: "py", Image: "base", Steps: []api.TemplateStep{{Kind: api.StepRun, Run: "true"}}},
		Image: "base", ImageDigest: "sha256:aa", Layers: []string{"sha256:l1"}, BuildID: "b1", Owner: "key1",
	}
	if err := st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.BuildID = "b2"
	if err := st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if err := st.PutBuildCache(ctx, &store.BuildCacheEntry{Key: k, Template: "py", Layers: []string{"sha256:" + k}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PruneBuildCache(ctx, "py", []string{"k1", "k3"}); err != nil {
		t.Fatal(err)
	}
	pool := &store.Pool{Name: "p", Template: "py", MinReady: 3, Cooldown: 5 * time.Minute, Resources: api.Resources{MemoryMB: 512}}
	if err := st.PutPool(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = openAt(t, path) // records survive a restart
	got, err := st.GetTemplate(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	if got.BuildID != "b2" || got.Owner != "key1" || !reflect.DeepEqual(got.Spec, tpl.Spec) || !reflect.DeepEqual(got.Layers, tpl.Layers) {
		t.Fatalf("template %+v", got)
	}
	if _, err := st.GetBuildCache(ctx, "k2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("pruned entry: %v", err)
	}
	if e, err := st.GetBuildCache(ctx, "k3"); err != nil || e.Layers[0] != "sha256:k3" {
		t.Fatalf("kept entry: %+v %v", e, err)
	}
	p, err := st.GetPool(ctx, "p")
	if err != nil || p.MinReady != 3 || p.Cooldown != 5*time.Minute || p.Resources.MemoryMB != 512 {
		t.Fatalf("pool %+v %v", p, err)
	}
	if err := st.DeleteTemplate(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	if es, _ := st.ListBuildCache(ctx); len(es) != 0 {
		t.Fatalf("deleting a template kept its cache: %+v", es)
	}
	for _, err := range []error{st.DeleteTemplate(ctx, "py"), st.DeletePool(ctx, "nope")} {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("delete missing: %v", err)
		}
	}
	if err := st.PutTemplate(ctx, &store.Template{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}
}

// TestTemplateSpawns: each spawn counts and moves the last time forward
// (an earlier time does not move it back); a rebuild keeps both; a
// template that is not there is not found; a reopened store has them.
func TestTemplateSpawns(t *testing.T) {
	st, path := openTemp(t)
	ctx := context.Background()
	tpl := &store.Template{Name: "sp", Spec: api.TemplateSpec{Name: "sp", Image: "base"}, Image: "base", ImageDigest: "sha256:aa", BuildID: "b1"}
	if err := st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetTemplate(ctx, "sp"); err != nil || got.Spawns != 0 || !got.LastSpawnedAt.IsZero() {
		t.Fatalf("a new template: %+v %v", got, err)
	}
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{t1, t1.Add(time.Hour), t1.Add(-time.Hour)} {
		if err := st.TemplateSpawned(ctx, "sp", at); err != nil {
			t.Fatal(err)
		}
	}
	tpl.BuildID = "b2"
	if err := st.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if err := st.TemplateSpawned(ctx, "gone", t1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a spawn of a missing template: %v", err)
	}
	st.Close()
	ls, err := openAt(t, path).ListTemplates(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("list: %v %v", ls, err)
	}
	if got := ls[0]; got.BuildID != "b2" || got.Spawns != 3 || !got.LastSpawnedAt.Equal(t1.Add(time.Hour)) {
		t.Errorf("after three spawns and a rebuild: build %s, %d spawns, last %s", got.BuildID, got.Spawns, got.LastSpawnedAt)
	}
}
