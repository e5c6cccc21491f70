package e2b

import (
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// E2B's template tags. A name's tags are Paddock templates named
// name:tag (the plain name is the tag "default"); templates.Service keeps
// them, with the rule that a key of scope own changes a name's tags only
// when it built every one of them.
//
//	POST   /templates/tags          {target: "name:tag", tags: [...]}: give target's build these tags
//	DELETE /templates/tags          {name, tags: [...]}: remove these tags of name
//	GET    /templates/{id}/tags     the tags of a name: [{tag, buildID, createdAt}]
//	GET    /templates/aliases/{a}   whether a name has any tag (Template.exists)
//
// The build ids are Paddock's (the content hash of the build's steps), not
// the build request's: an unchanged rebuild keeps its build id.

// templateQuery: GET /templates/{id}/tags and GET /templates/aliases/{alias}.
func (h *Handler) templateQuery(w http.ResponseWriter, r *http.Request) {
	id, what := r.PathValue("id"), r.PathValue("what")
	switch {
	case id == "aliases":
		h.aliasExists(w, r, what)
	case what == "tags":
		h.listTags(w, r, id)
	default:
		writeError(w, errdefs.NotFound("this Paddock daemon does not serve GET %s of E2B's API", truncate(r.URL.Path)))
	}
}

// aliasExists: 200 when name has a tag (a template of that name exists),
// 404 when not.
func (h *Handler) aliasExists(w http.ResponseWriter, r *http.Request, name string) {
	if !rules.ValidName(name) {
		writeError(w, errdefs.NotFound("template %q", truncate(name)))
		return
	}
	if _, err := h.opts.Templates.TagsOf(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": name, "public": false})
}

type templateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// listTags: the tags of id (a name; a tag given with it is ignored).
func (h *Handler) listTags(w http.ResponseWriter, r *http.Request, id string) {
	tags, err := h.opts.Templates.TagsOf(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]templateTag, 0, len(tags))
	for _, t := range tags {
		out = append(out, templateTag{Tag: t.Tag, BuildID: t.BuildID, CreatedAt: t.CreatedAt.UTC()})
	}
	writeJSON(w, http.StatusOK, out)
}

// assignTags: POST /templates/tags.
func (h *Handler) assignTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if name, _, _ := strings.Cut(body.Target, ":"); !rules.ValidName(name) {
		writeError(w, errdefs.Invalid("target %q: give name:tag (or a name, for its default tag)", truncate(body.Target)))
		return
	}
	build, tags, err := h.opts.Templates.Tag(r.Context(), body.Target, body.Tags)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"buildID": build, "tags": tags})
}

// removeTags: DELETE /templates/tags.
func (h *Handler) removeTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if err := h.opts.Templates.Untag(r.Context(), body.Name, body.Tags); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
