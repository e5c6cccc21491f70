package e2b

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// E2B's template listing:
//
//	GET /templates                 every template of the caller's
//	GET /v2/templates?limit=&nextToken=   the same, by pages (X-Next-Token)
//	GET /templates/{templateID}    one template with its builds
//
// A template is a name with all its tags (templates.Family); a key sees the
// names it built every tag of, a key of scope all every name. spawnCount
// and lastSpawnedAt are the sandboxes created from any of its tags; the
// sizes are the daemon's defaults for a create (a template does not fix
// them).

// e2bTemplate is E2B's Template.
type e2bTemplate struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int        `json:"cpuCount"`
	MemoryMB      int64      `json:"memoryMB"`
	DiskSizeMB    int64      `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *struct{}  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
	BuildCount    int        `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
}

// e2bTemplateBuild is E2B's TemplateBuild.
type e2bTemplateBuild struct {
	BuildID     string    `json:"buildID"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	FinishedAt  time.Time `json:"finishedAt"`
	CPUCount    int       `json:"cpuCount"`
	MemoryMB    int64     `json:"memoryMB"`
	DiskSizeMB  int64     `json:"diskSizeMB"`
	EnvdVersion string    `json:"envdVersion"`
}

// e2bTemplateWithBuilds is E2B's TemplateWithBuilds.
type e2bTemplateWithBuilds struct {
	TemplateID    string             `json:"templateID"`
	Public        bool               `json:"public"`
	Aliases       []string           `json:"aliases"`
	Names         []string           `json:"names"`
	CreatedAt     time.Time          `json:"createdAt"`
	UpdatedAt     time.Time          `json:"updatedAt"`
	LastSpawnedAt *time.Time         `json:"lastSpawnedAt"`
	SpawnCount    int64              `json:"spawnCount"`
	Builds        []e2bTemplateBuild `json:"builds"`
}

// builds are f's distinct builds, newest first.
func builds(f templates.Family) []api.Template {
	var out []api.Template
	for _, t := range f.Templates {
		if i := slices.IndexFunc(out, func(o api.Template) bool { return o.BuildID == t.BuildID }); i >= 0 {
			out[i].CreatedAt = minTime(out[i].CreatedAt, t.CreatedAt)
			continue
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(a, b api.Template) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return out
}

func (h *Handler) toE2BTemplate(f templates.Family) e2bTemplate {
	d := h.opts.Controller.Info().Defaults.Resources
	bs := builds(f)
	out := e2bTemplate{
		TemplateID: f.Name, BuildID: bs[0].BuildID, CPUCount: cpuCount(d.CPU), MemoryMB: d.MemoryMB, DiskSizeMB: d.DiskMB,
		Aliases: []string{f.Name}, Names: []string{f.Name}, CreatedAt: f.Templates[0].CreatedAt, UpdatedAt: f.Templates[0].UpdatedAt,
		BuildCount: len(bs), EnvdVersion: EnvdVersion(), BuildStatus: "ready",
	}
	if f.Templates[0].Name == f.Name {
		out.BuildID = f.Templates[0].BuildID // the default tag's build
	}
	for _, t := range f.Templates {
		out.CreatedAt = minTime(out.CreatedAt, t.CreatedAt)
		if t.UpdatedAt.After(out.UpdatedAt) {
			out.UpdatedAt = t.UpdatedAt
		}
	}
	out.SpawnCount, out.LastSpawnedAt = spawns(f)
	return out
}

// spawns is how many sandboxes were created from any of f's tags, and
// when the last was (nil: never).
func spawns(f templates.Family) (int64, *time.Time) {
	var n int64
	var last *time.Time
	for _, t := range f.Templates {
		n += t.Spawns
		if t.LastSpawnedAt != nil && (last == nil || t.LastSpawnedAt.After(*last)) {
			last = t.LastSpawnedAt
		}
	}
	return n, last
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// listTemplatesAll: GET /templates.
func (h *Handler) listTemplatesAll(w http.ResponseWriter, r *http.Request) {
	fams, err := h.opts.Templates.Families(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]e2bTemplate, 0, len(fams))
	for _, f := range fams {
		out = append(out, h.toE2BTemplate(f))
	}
	writeJSON(w, http.StatusOK, out)
}

// pageParams reads E2B's limit (1-100, default 100) and nextToken (here
// the last name or build id of the page before, only compared).
func pageParams(r *http.Request) (limit int, after string, err error) {
	limit = 100
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 100 {
			return 0, "", errdefs.Invalid("limit %q: want 1 to 100", truncate(s))
		}
	}
	after = r.URL.Query().Get("nextToken")
	if len(after) > 256 {
		return 0, "", errdefs.Invalid("nextToken is not one this daemon gave")
	}
	return limit, after, nil
}

// familiesPage is the caller's template names with the page asked for;
// false when it answered with an error.
func (h *Handler) familiesPage(w http.ResponseWriter, r *http.Request) (fams []templates.Family, limit int, after string, ok bool) {
	limit, after, err := pageParams(r)
	if err == nil {
		fams, err = h.opts.Templates.Families(r.Context())
	}
	if err != nil {
		writeError(w, err)
		return nil, 0, "", false
	}
	return fams, limit, after, true
}

// listTemplatesPaged: GET /v2/templates.
func (h *Handler) listTemplatesPaged(w http.ResponseWriter, r *http.Request) {
	fams, limit, after, ok := h.familiesPage(w, r)
	if !ok {
		return
	}
	out := []e2bTemplate{}
	for _, f := range fams {
		if f.Name <= after {
			continue
		}
		if len(out) == limit {
			w.Header().Set("X-Next-Token", out[len(out)-1].TemplateID)
			break
		}
		out = append(out, h.toE2BTemplate(f))
	}
	writeJSON(w, http.StatusOK, out)
}

// templateBuilds: GET /templates/{templateID}: the template with its
// distinct builds (one per build its tags name), newest first, by pages.
func (h *Handler) templateBuilds(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	fams, limit, after, ok := h.familiesPage(w, r)
	if !ok {
		return
	}
	i := slices.IndexFunc(fams, func(f templates.Family) bool { return f.Name == id })
	if i < 0 {
		writeError(w, errdefs.NotFound("template %q", truncate(id)))
		return
	}
	t := h.toE2BTemplate(fams[i])
	out := e2bTemplateWithBuilds{
		TemplateID: t.TemplateID, Aliases: t.Aliases, Names: t.Names, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		LastSpawnedAt: t.LastSpawnedAt, SpawnCount: t.SpawnCount, Builds: []e2bTemplateBuild{},
	}
	bs := builds(fams[i])
	if after != "" {
		j := slices.IndexFunc(bs, func(b api.Template) bool { return b.BuildID == after })
		if j < 0 {
			j = len(bs) - 1 // a build gone since: the listing ends
		}
		bs = bs[j+1:]
	}
	for _, b := range bs {
		if len(out.Builds) == limit {
			w.Header().Set("X-Next-Token", out.Builds[len(out.Builds)-1].BuildID)
			break
		}
		out.Builds = append(out.Builds, e2bTemplateBuild{
			BuildID: b.BuildID, Status: "ready", CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, FinishedAt: b.UpdatedAt,
			CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: t.DiskSizeMB, EnvdVersion: t.EnvdVersion,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
