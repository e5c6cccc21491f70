package templates

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// recordingCore records templates straight into the store; tags need
// nothing else of the core.
type recordingCore struct {
	Core
	st      *sqlite.Store
	deletes int
}

func (c *recordingCore) PutTemplate(ctx context.Context, t *store.Template) error {
	return c.st.PutTemplate(ctx, t)
}

func (c *recordingCore) TemplateDeleted(context.Context) { c.deletes++ }

func newTagService(t *testing.T) (*Service, *sqlite.Store, *recordingCore) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core := &recordingCore{st: st}
	return New(Options{Core: core, Store: st}), st, core
}

func putTemplate(t *testing.T, st *sqlite.Store, name, owner, build string) {
	t.Helper()
	rec := &store.Template{
		Name: name, Spec: api.TemplateSpec{Name: name, Image: "busybox", Env: map[string]string{"A": "1"}},
		Image: "busybox", ImageDigest: "sha256:aa", Layers: []string{"sha256:l1", "sha256:l2"}, BuildID: build, Owner: owner,
	}
	if err := st.PutTemplate(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

func tagNames(tags []api.TemplateTag) []string {
	var out []string
	for _, t := range tags {
		out = append(out, t.Tag+"="+t.BuildID)
	}
	return out
}

// TestTags: a tag is a template of its own with its target's build; the
// family's tags list by tag; untag and delete-all remove what they name
// and nothing of another name; bad tags and unknown names are refused
// with the kind of error the API maps.
func TestTags(t *testing.T) {
	s, st, core := newTagService(t)
	ctx := controller.WithCaller(context.Background(), "ka", api.KeyScopeOwn)
	putTemplate(t, st, "py:v1", "ka", "b1")
	putTemplate(t, st, "py", "ka", "b0")
	putTemplate(t, st, "pyx", "ka", "bx") // a longer name is another family

	build, tags, err := s.Tag(ctx, "py:v1", []string{"prod", "stable", "prod"})
	if err != nil || build != "b1" || !slices.Equal(tags, []string{"prod", "stable"}) {
		t.Fatalf("tag: %q %q %v", build, tags, err)
	}
	got, err := st.GetTemplate(ctx, "py:prod")
	if err != nil || got.BuildID != "b1" || got.Spec.Name != "py:prod" || got.Spec.Env["A"] != "1" || len(got.Layers) != 2 {
		t.Fatalf("py:prod: %+v %v", got, err)
	}
	// "default" moves the plain name.
	if _, _, err := s.Tag(ctx, "py:prod", []string{"default"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.TagsOf(ctx, "py:default")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"default=b1", "prod=b1", "stable=b1", "v1=b1"}; !slices.Equal(tagNames(list), want) {
		t.Fatalf("tags: %v, want %v", tagNames(list), want)
	}

	for _, bad := range [][]string{{":x"}, {"py:"}, {"py:x"}, {}, make([]string, api.MaxTemplateTags+1)} {
		if _, _, err := s.Tag(ctx, "py", bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("tags %q: %v, want invalid", bad, err)
		}
	}
	if _, _, err := s.Tag(ctx, "py:nope", []string{"x"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("tag of a missing tag: %v", err)
	}
	if _, _, err := s.Tag(ctx, "py:", []string{"x"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("target py: %v", err)
	}

	// Another own key changes nothing in the family.
	other := controller.WithCaller(context.Background(), "kb", api.KeyScopeOwn)
	if _, _, err := s.Tag(other, "py", []string{"mine"}); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("another key's tag: %v", err)
	}
	if err := s.MayBuild(other, "py:new"); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("another key's build of a new tag: %v", err)
	}
	if err := s.Untag(other, "py", []string{"prod"}); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("another key's untag: %v", err)
	}
	if err := s.DeleteAll(other, "py"); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("another key's delete: %v", err)
	}

	if err := s.Untag(ctx, "py", []string{"stable", "gone"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("untag of a tag py lacks: %v", err)
	}
	if _, err := st.GetTemplate(ctx, "py:stable"); err != nil {
		t.Errorf("a refused untag removed a tag: %v", err)
	}
	if err := s.Untag(ctx, "py", []string{"stable", "default"}); err != nil {
		t.Fatal(err)
	}
	list, _ = s.TagsOf(ctx, "py")
	if want := []string{"prod=b1", "v1=b1"}; !slices.Equal(tagNames(list), want) {
		t.Fatalf("tags after untag: %v, want %v", tagNames(list), want)
	}
	if err := s.DeleteAll(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TagsOf(ctx, "py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("tags after delete: %v", err)
	}
	if _, err := st.GetTemplate(ctx, "pyx"); err != nil {
		t.Errorf("delete of py took pyx: %v", err)
	}
	if core.deletes != 2 {
		t.Errorf("the core heard of %d deletions, want 2", core.deletes)
	}
}

// TestFamilies: a key of scope own lists the names whose every tag it
// built; a key of scope all lists every name, its tags by name.
func TestFamilies(t *testing.T) {
	s, st, _ := newTagService(t)
	putTemplate(t, st, "py:v1", "ka", "b1")
	putTemplate(t, st, "py", "ka", "b0")
	putTemplate(t, st, "mixed", "ka", "m0")
	putTemplate(t, st, "mixed:ops", "kops", "m1")
	putTemplate(t, st, "theirs", "kb", "t0")
	list := func(ctx context.Context) []string {
		t.Helper()
		fams, err := s.Families(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fams {
			var names []string
			for _, tp := range f.Templates {
				names = append(names, tp.Name)
			}
			out = append(out, f.Name+"="+strings.Join(names, "+"))
		}
		return out
	}
	bg := context.Background()
	if got, want := list(controller.WithCaller(bg, "ka", api.KeyScopeOwn)), []string{"py=py+py:v1"}; !slices.Equal(got, want) {
		t.Errorf("ka lists %q, want %q", got, want)
	}
	if got, want := list(controller.WithCaller(bg, "kops", api.KeyScopeAll)), []string{"mixed=mixed+mixed:ops", "py=py+py:v1", "theirs=theirs"}; !slices.Equal(got, want) {
		t.Errorf("an all key lists %q, want %q", got, want)
	}
	if _, err := s.Families(bg); err == nil {
		t.Error("no caller listed families")
	}
}

// TestTagsCapped: a name takes at most MaxTags tags, by Tag or by a
// build under a new tag (refused before it runs, by MayBuild); retagging
// a tag it has, and building it again, still work at the cap.
func TestTagsCapped(t *testing.T) {
	s, st, _ := newTagService(t)
	ctx := controller.WithCaller(context.Background(), "ka", api.KeyScopeOwn)
	putTemplate(t, st, "big", "ka", "b0")
	for i := 1; i < MaxTags; i++ {
		if _, _, err := s.Tag(ctx, "big", []string{"t" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Tag(ctx, "big", []string{"one-more"}); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "at most 100") {
		t.Errorf("a tag past the cap: %v", err)
	}
	if err := s.MayBuild(ctx, "big:new"); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a build of a new tag past the cap: %v", err)
	}
	if _, _, err := s.Tag(ctx, "big", []string{"t1", "t2"}); err != nil {
		t.Errorf("retagging tags the name has: %v", err)
	}
	if err := s.MayBuild(ctx, "big:t5"); err != nil {
		t.Errorf("a build of a tag the name has: %v", err)
	}
	if err := s.MayBuild(ctx, "other"); err != nil {
		t.Errorf("another name: %v", err)
	}
}
