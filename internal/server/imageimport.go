package server

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
)

// ImageImporter is the image store's import side, found on Options.Images
// by type assertion.
type ImageImporter interface {
	Import(ctx context.Context, r io.Reader, opts image.ImportOptions) (*image.Image, error)
	Pull(ctx context.Context, ref string, opts image.ImportOptions) (*image.Image, error)
}

func (s *Server) routesImageImport(m *http.ServeMux) {
	has := s.opts.ImageAdmin != nil
	m.HandleFunc("POST /v1/images/import", s.serves(has, "image imports", s.importImage))
	m.HandleFunc("POST /v1/images/pull", s.serves(has, "image pulls", s.pullImage))
	m.HandleFunc("DELETE /v1/images/{ref}", s.serves(has, "image removal", s.removeImage))
	m.HandleFunc("POST /v1/images/gc", s.serves(has, "image collection", s.gcImages))
	m.HandleFunc("GET /v1/images/{ref}/oci", s.serves(has, "image export", s.exportImage))
	m.HandleFunc("GET /v1/templates/{template}/oci", s.serves(has, "template export", s.exportTemplate))
}

// imageExtras adds what imported and pulled images carry to the wire form.
func imageExtras(out *api.Image, i *image.Image) {
	out.Source = i.Source
	if i.Source == "" {
		return
	}
	out.LayerCount = len(i.Layers)
	out.Config = &api.ImageConfig{Env: i.Env, WorkingDir: i.WorkingDir, User: i.User, Entrypoint: i.Entrypoint, Cmd: i.Cmd}
}

func (s *Server) importer() (ImageImporter, error) {
	im, ok := s.opts.Images.(ImageImporter)
	if !ok {
		return nil, fmt.Errorf("this image store cannot import images: %w", errdefs.ErrFailedPrecondition)
	}
	return im, nil
}

func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	im, err := s.importer()
	if err != nil {
		writeError(w, err)
		return
	}
	opts := s.opts.ImageAdmin.ImportOptions(r.Context())
	opts.Source = r.URL.Query().Get("source")
	// The archive is read whole before anything is stored, so a client
	// that goes away leaves nothing; the store bounds the size and what
	// the caller's images may hold.
	img, err := im.Import(r.Context(), r.Body, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPIImage(img))
}

// pullImage streams a pull's progress. Like a build, the pull goes on when
// the client goes away; a half-pulled image is never recorded.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	im, err := s.importer()
	if err != nil {
		writeError(w, err)
		return
	}
	var req api.PullImageRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Ref == "" {
		writeError(w, errdefs.Invalid("ref is required"))
		return
	}
	out := newNDJSON(w)
	lines := make(chan string, 256)
	type result struct {
		img *image.Image
		err error
	}
	done := make(chan result, 1)
	go func() {
		opts := s.opts.ImageAdmin.ImportOptions(r.Context())
		opts.Progress = func(line string) {
			select {
			case lines <- line:
			default: // a slow client loses progress lines, never stalls the pull
			}
		}
		img, err := im.Pull(context.WithoutCancel(r.Context()), req.Ref, opts)
		done <- result{img, err}
	}()
	for {
		select {
		case line := <-lines:
			_ = out.send(api.BuildEvent{Type: "progress", Message: line})
		case res := <-done:
			for len(lines) > 0 {
				_ = out.send(api.BuildEvent{Type: "progress", Message: <-lines})
			}
			if res.err != nil {
				_ = out.send(api.BuildEvent{Type: "error", Error: &api.Error{Code: errdefs.Code(res.err), Message: res.err.Error()}})
				return
			}
			_ = out.send(api.BuildEvent{Type: "done", Image: toAPIImage(res.img)})
			return
		}
	}
}

func toGC(res *image.GCResult) *api.ImageGCResult {
	if res == nil {
		return nil
	}
	out := &api.ImageGCResult{RemovedLayers: res.RemovedLayers, FreedBytes: res.FreedBytes}
	if out.RemovedLayers == nil {
		out.RemovedLayers = []string{}
	}
	return out
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	gc := r.URL.Query().Get("gc") == "true"
	img, res, err := s.opts.ImageAdmin.Remove(r.Context(), r.PathValue("ref"), gc)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RemoveImageResult{Image: *toAPIImage(img), GC: toGC(res)})
}

func (s *Server) gcImages(w http.ResponseWriter, r *http.Request) {
	res, err := s.opts.ImageAdmin.GC(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toGC(&res))
}

// exportImage streams an image as an OCI archive with the agent added
// (internal/controller/images, Export). The reference it is named by comes in the
// Paddock-Image-Ref header; an error found before the first byte gets a
// proper error status, one after it cuts the archive short.
func (s *Server) exportImage(w http.ResponseWriter, r *http.Request) {
	s.streamOCI(w, r, "image", r.PathValue("ref"), s.opts.ImageAdmin.Export)
}

// exportTemplate streams the image a template's sandboxes run on a
// backend without this host's layers, as exportImage does an image's.
func (s *Server) exportTemplate(w http.ResponseWriter, r *http.Request) {
	s.streamOCI(w, r, "template", r.PathValue("template"), s.opts.ImageAdmin.ExportTemplate)
}

func (s *Server) streamOCI(w http.ResponseWriter, r *http.Request, kind, ref string,
	export func(ctx context.Context, ref, prefix string, open func(name string) io.Writer) (string, error)) {
	started := false
	_, err := export(r.Context(), ref, r.URL.Query().Get("prefix"), func(name string) io.Writer {
		started = true
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Paddock-Image-Ref", name)
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err == nil {
		return
	}
	if !started {
		writeError(w, err)
		return
	}
	s.log.Warn(kind+" export cut short", kind, ref, "err", err)
	panic(http.ErrAbortHandler)
}
