package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/templates"
)

func (s *Server) routesTemplates(m *http.ServeMux) {
	has := s.opts.Templates != nil
	m.HandleFunc("POST /v1/templates/build", s.serves(has, "templates", s.buildTemplate))
	m.HandleFunc("GET /v1/templates", s.serves(has, "templates", s.listTemplates))
	m.HandleFunc("GET /v1/templates/{template}", s.serves(has, "templates", s.getTemplate))
	m.HandleFunc("DELETE /v1/templates/{template}", s.serves(has, "templates", s.deleteTemplate))
	m.HandleFunc("GET /v1/templates/{template}/tags", s.serves(has, "templates", s.templateTags))
	m.HandleFunc("POST /v1/templates/{template}/tags", s.serves(has, "templates", s.tagTemplate))
	pools := s.opts.Pools != nil
	m.HandleFunc("GET /v1/pools", s.serves(pools, "pools", s.listPools))
	m.HandleFunc("GET /v1/pools/{pool}", s.serves(pools, "pools", s.getPool))
	m.HandleFunc("PUT /v1/pools/{pool}", s.serves(pools, "pools", s.setPool))
	m.HandleFunc("DELETE /v1/pools/{pool}", s.serves(pools, "pools", s.deletePool))
	s.routesIdentifiers(m)
}

func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) {
	// The context is held in memory for the whole build, so it counts
	// against the body budget until the build ends.
	body, err := s.bodies.Open(r, api.MaxTemplateContext)
	if err != nil {
		writeError(w, err)
		return
	}
	defer body.Close()
	spec, bc, err := templates.ReadBuildRequest(body)
	if err != nil {
		if berr := body.Err(); berr != nil {
			err = berr // too large, or no budget: not a malformed tar
		}
		writeError(w, err)
		return
	}
	// The stream starts only when the first event is ready, so a bad
	// definition is a plain error response.
	var out *ndjson
	emit := func(ev api.TemplateBuildEvent) error {
		if out == nil {
			out = newNDJSON(w)
		}
		// A client that went away does not stop the build: its result is
		// cached for the next one.
		_ = out.send(ev)
		return nil
	}
	tpl, err := s.opts.Templates.Build(r.Context(), *spec, bc, emit)
	if err != nil && out == nil {
		writeError(w, err)
		return
	}
	end := api.TemplateBuildEvent{Type: api.BuildEnd, Template: tpl}
	if err != nil {
		end.Error = s.apiError(err)
	}
	_ = emit(end)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.opts.Templates.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.TemplateList{Templates: ts})
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.opts.Templates.Get(r.Context(), r.PathValue("template"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Templates.Delete(r.Context(), r.PathValue("template")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) templateTags(w http.ResponseWriter, r *http.Request) {
	tags, err := s.opts.Templates.TagsOf(r.Context(), r.PathValue("template"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.TemplateTagList{Tags: tags})
}

// tagTemplate gives the template's build more tags and answers with all
// the tags of its name.
func (s *Server) tagTemplate(w http.ResponseWriter, r *http.Request) {
	var req api.TagTemplateRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	target := r.PathValue("template")
	if _, _, err := s.opts.Templates.Tag(r.Context(), target, req.Tags); err != nil {
		writeError(w, err)
		return
	}
	tags, err := s.opts.Templates.TagsOf(r.Context(), target)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.TemplateTagList{Tags: tags})
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	ps, err := s.opts.Pools.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PoolList{Pools: ps})
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request) {
	p, err := s.opts.Pools.Get(r.Context(), r.PathValue("pool"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) setPool(w http.ResponseWriter, r *http.Request) {
	var req api.SetPoolRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Pools.Set(r.Context(), r.PathValue("pool"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) deletePool(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Pools.Delete(r.Context(), r.PathValue("pool")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
