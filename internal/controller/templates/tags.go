package templates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Tags. A template's name may carry a tag ("py:v2"); each tag of a name is
// a template record of its own (its definition, image, layers and build),
// so creating from one, pooling it, collecting layers and deleting it are
// what they are for any template. The plain name is the tag "default".
// All the tags of one name are one family: a key of scope own may build,
// tag or untag in a family only when it built every template in it, so no
// tenant adds a tag under a name another tenant's sandboxes use.

// MaxTags is how many tags one name may have (the plain name counts as
// the tag "default"): each is a template record, which builds, lists and
// pool tending read.
const MaxTags = 100

// roomForTags refuses adding names to fam past MaxTags; names already in
// it are replaced, not added.
func roomForTags(fam []*store.Template, names []string) error {
	n := len(fam)
	for _, name := range names {
		if !slices.ContainsFunc(fam, func(t *store.Template) bool { return t.Name == name }) {
			n++
		}
	}
	if n > MaxTags {
		base, _ := rules.SplitTemplateTag(names[0])
		return fmt.Errorf("template %s would have %d tags; a name has at most %d (remove some first): %w", base, n, MaxTags, errdefs.ErrResourceExhausted)
	}
	return nil
}

// family lists the templates of name's family, by name.
func (s *Service) family(ctx context.Context, name string) ([]*store.Template, error) {
	base, _ := rules.SplitTemplateTag(name)
	all, err := s.st.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	var out []*store.Template
	for _, t := range all {
		if n, _ := rules.SplitTemplateTag(t.Name); n == base {
			out = append(out, t)
		}
	}
	return out, nil
}

// mayChangeFamily refuses ctx's caller a change in name's family unless
// it may replace every template in it (mayReplace), and returns the
// family.
func (s *Service) mayChangeFamily(ctx context.Context, name string) ([]*store.Template, error) {
	fam, err := s.family(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, t := range fam {
		if err := mayReplace(ctx, t); err != nil {
			return nil, err
		}
	}
	return fam, nil
}

// mayBuildIn refuses ctx's caller a build of name (a template's name,
// with its tag if any) that it may not record: a family it may not change
// (mayChangeFamily), or a new tag past MaxTags.
func (s *Service) mayBuildIn(ctx context.Context, name string) error {
	fam, err := s.mayChangeFamily(ctx, name)
	if err != nil {
		return err
	}
	return roomForTags(fam, []string{name})
}

// Tag gives the build of target (a template's name, with its tag if any)
// every tag of tags too: each becomes a template of that name and tag with
// target's definition, image, layers and build id, replacing what the tag
// named before. It returns the build id and the tags given.
func (s *Service) Tag(ctx context.Context, target string, tags []string) (string, []string, error) {
	if err := controller.RequireCaller(ctx); err != nil {
		return "", nil, err
	}
	target, err := templateRef(target)
	if err != nil {
		return "", nil, err
	}
	if tags, err = rules.TemplateTags(tags); err != nil {
		return "", nil, err
	}
	s.recording.Lock()
	defer s.recording.Unlock()
	src, err := s.st.GetTemplate(ctx, target)
	if err != nil {
		return "", nil, err
	}
	fam, err := s.mayChangeFamily(ctx, target)
	if err != nil {
		return "", nil, err
	}
	base, _ := rules.SplitTemplateTag(target)
	names := make([]string, len(tags))
	for i, tag := range tags {
		names[i] = rules.TemplateName(base, tag)
	}
	if err := roomForTags(fam, names); err != nil {
		return "", nil, err
	}
	for _, tag := range tags {
		name := rules.TemplateName(base, tag)
		if name == target {
			continue
		}
		rec := *src
		rec.Name, rec.Spec.Name = name, name
		rec.Layers = slices.Clone(src.Layers)
		rec.Owner = controller.Caller(ctx)
		rec.CreatedAt = time.Time{} // a new tag's record is made now
		if err := s.core.PutTemplate(ctx, &rec); err != nil {
			return "", nil, err
		}
		s.log.Info("template tagged", "template", target, "as", name, "build", shortID(src.BuildID))
	}
	return src.BuildID, tags, nil
}

// Untag removes tags of name (a template's plain name): each tag's
// template is deleted as Delete deletes it; "default" is the plain name's
// own. A tag name does not have is not found, and nothing is removed.
func (s *Service) Untag(ctx context.Context, name string, tags []string) error {
	if err := controller.RequireCaller(ctx); err != nil {
		return err
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("template name %q: give the name without a tag, and the tags to remove", rules.Truncate(name, 80))
	}
	tags, err := rules.TemplateTags(tags)
	if err != nil {
		return err
	}
	return s.deleteFromFamily(ctx, name, func(fam []*store.Template) ([]string, error) {
		var names []string
		for _, tag := range tags {
			n := rules.TemplateName(name, tag)
			if !slices.ContainsFunc(fam, func(t *store.Template) bool { return t.Name == n }) {
				return nil, errdefs.NotFound("template %s has no tag %s", name, tag)
			}
			names = append(names, n)
		}
		return names, nil
	})
}

// DeleteAll deletes every tag of name's family (E2B's template delete).
func (s *Service) DeleteAll(ctx context.Context, name string) error {
	if err := controller.RequireCaller(ctx); err != nil {
		return err
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("template name %q is not valid", rules.Truncate(name, 80))
	}
	return s.deleteFromFamily(ctx, name, func(fam []*store.Template) ([]string, error) {
		var names []string
		for _, t := range fam {
			names = append(names, t.Name)
		}
		return names, nil
	})
}

// deleteFromFamily deletes the templates pick chooses of name's family
// (not found when it has none), all or none refused: a key of scope own
// only when it built each of them. No build records a template between
// the pick and the delete.
func (s *Service) deleteFromFamily(ctx context.Context, name string, pick func([]*store.Template) ([]string, error)) error {
	s.recording.Lock()
	defer s.recording.Unlock()
	fam, err := s.family(ctx, name)
	if err != nil {
		return err
	}
	if len(fam) == 0 {
		return errdefs.NotFound("template %s", name)
	}
	names, err := pick(fam)
	if err != nil {
		return err
	}
	for _, t := range fam {
		if slices.Contains(names, t.Name) && (t.Owner == "" || t.Owner != controller.Caller(ctx)) {
			if err := controller.RequireScopeAll(ctx, "deleting a template this key did not build"); err != nil {
				return err
			}
		}
	}
	var errs []error
	for _, n := range names {
		if err := s.st.DeleteTemplate(ctx, n); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("template deleted", "template", n)
	}
	s.core.TemplateDeleted(ctx)
	return errors.Join(errs...)
}

// TagsOf lists the tags of name's family (name with or without a tag),
// by tag; a name with none is not found.
func (s *Service) TagsOf(ctx context.Context, name string) ([]api.TemplateTag, error) {
	name, err := templateRef(name)
	if err != nil {
		return nil, err
	}
	fam, err := s.family(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(fam) == 0 {
		base, _ := rules.SplitTemplateTag(name)
		return nil, errdefs.NotFound("template %s", base)
	}
	out := make([]api.TemplateTag, 0, len(fam))
	for _, t := range fam {
		_, tag := rules.SplitTemplateTag(t.Name)
		out = append(out, api.TemplateTag{Tag: tag, Template: t.Name, BuildID: t.BuildID, CreatedAt: t.UpdatedAt})
	}
	slices.SortFunc(out, func(a, b api.TemplateTag) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// shortID shortens a build id for a log line.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Family is a template name with the templates of all its tags.
type Family struct {
	Name      string
	Templates []api.Template // by name: the plain name (the tag default) first
}

// Families lists, by name, the template names ctx's caller may change:
// every name for a key of scope all and the unix socket; for a key of
// scope own, the names whose every tag it built (E2B's template listing
// shows a team its own templates).
func (s *Service) Families(ctx context.Context) ([]Family, error) {
	if err := controller.RequireCaller(ctx); err != nil {
		return nil, err
	}
	all, err := s.st.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string][]*store.Template{}
	for _, t := range all {
		base, _ := rules.SplitTemplateTag(t.Name)
		byName[base] = append(byName[base], t)
	}
	var out []Family
	for base, fam := range byName {
		f := Family{Name: base}
		for _, t := range fam {
			if mayReplace(ctx, t) != nil {
				f.Templates = nil
				break
			}
			f.Templates = append(f.Templates, *templateAPI(t))
		}
		if len(f.Templates) > 0 {
			slices.SortFunc(f.Templates, func(a, b api.Template) int { return strings.Compare(a.Name, b.Name) })
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
