package paddocktest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
)

func unescape(s string) (string, error) { return url.PathUnescape(s) }

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, "bad JSON: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Name != "" {
		for _, sb := range s.sandboxes {
			if sb.Name == req.Name {
				writeErr(w, http.StatusConflict, api.CodeConflict, fmt.Sprintf("a sandbox named %q exists", req.Name))
				return
			}
		}
	}
	s.nextID++
	now := time.Now().UTC()
	sb := &api.Sandbox{
		ID: fmt.Sprintf("sb%018d", s.nextID), Name: req.Name, State: api.StateRunning,
		Image: req.Image, ImageDigest: "sha256:" + strings.Repeat("ab", 32), Runtime: req.Runtime,
		Resources: req.Resources, Env: req.Env, Labels: req.Labels, SleepAfter: req.SleepAfter,
		KeepAlive: req.KeepAlive, Timeout: req.Timeout, CreatedAt: now, UpdatedAt: now, LastActivityAt: now,
	}
	if sb.Image == "" {
		sb.Image = "base"
	}
	if sb.Runtime == "" {
		sb.Runtime = api.RuntimeRunc
	}
	s.sandboxes[sb.ID] = sb
	s.files[sb.ID] = map[string]*File{}
	for _, d := range []string{"/", "/home", "/home/user", "/root", "/tmp"} {
		s.files[sb.ID][d] = &File{Dir: true, Mode: 0o755}
	}
	writeJSON(w, http.StatusCreated, sb)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := r.URL.Query()["label"]
	out := []api.Sandbox{}
	for _, sb := range s.sandboxes {
		ok := true
		for _, l := range want {
			k, v, _ := strings.Cut(l, "=")
			if got, has := sb.Labels[k]; !has || got != v {
				ok = false
			}
		}
		if ok {
			out = append(out, *sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, api.SandboxList{Sandboxes: out})
}

// lookup finds a sandbox by id or name; s.mu must be held.
func (s *Server) lookup(ref string) *api.Sandbox {
	if sb, ok := s.sandboxes[ref]; ok {
		return sb
	}
	for _, sb := range s.sandboxes {
		if sb.Name != "" && sb.Name == ref {
			return sb
		}
	}
	return nil
}

func (s *Server) sandbox(w http.ResponseWriter, r *http.Request, ref, rest string) {
	s.mu.Lock()
	sb := s.lookup(ref)
	s.mu.Unlock()
	if sb == nil {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("sandbox %q not found", ref))
		return
	}
	key := r.Method + " " + rest
	switch key {
	case "GET ":
		s.mu.Lock()
		c := *sb
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
	case "DELETE ":
		s.mu.Lock()
		delete(s.sandboxes, sb.ID)
		delete(s.files, sb.ID)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case "POST stop", "POST start":
		s.mu.Lock()
		sb.State = api.StateStopped
		if rest == "start" {
			sb.State = api.StateRunning
		}
		c := *sb
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
	case "GET history":
		// The fake keeps no transitions; an empty history is still one.
		writeJSON(w, http.StatusOK, api.History{Changes: []api.StateChange{}})
	case "POST exec":
		s.exec(w, r, sb)
	case "GET files", "PUT files", "DELETE files", "GET files/list", "GET files/stat", "POST files/mkdir", "POST files/move":
		s.fileOp(w, r, sb.ID, key)
	case "GET tar":
		s.tarOut(w, r, sb.ID)
	case "PUT tar":
		s.tarIn(w, r, sb.ID)
	case "GET layer":
		s.tarOutPath(w, sb.ID, "/")
	default:
		writeErr(w, http.StatusNotFound, api.CodeNotFound, "no route "+key)
	}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, sb *api.Sandbox) {
	var req api.ExecRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Cmd) == 0 {
		writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, "exec needs a command")
		return
	}
	run := s.Exec
	if run == nil {
		run = DefaultExec
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	emit := func(ev api.ExecEvent) {
		_ = enc.Encode(ev)
		if fl != nil {
			fl.Flush()
		}
	}
	emit(api.ExecEvent{Type: api.EventStart, Pid: 42})
	s.mu.Lock()
	c := *sb
	s.mu.Unlock()
	end := run(&c, req, emit)
	if end.Type != "" {
		emit(end)
	}
}

func (s *Server) build(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	if name == "broken" {
		_ = enc.Encode(api.BuildEvent{Type: "progress", Message: "starting"})
		_ = enc.Encode(api.BuildEvent{Type: "error", Error: &api.Error{Code: api.CodeInvalidArgument, Message: "no such builder"}})
		return
	}
	img := api.Image{Name: name, Digest: "sha256:" + strings.Repeat("cd", 32), SizeBytes: 1 << 20, CreatedAt: time.Now().UTC()}
	_ = enc.Encode(api.BuildEvent{Type: "progress", Message: "building " + name})
	_ = enc.Encode(api.BuildEvent{Type: "log", Message: "step 1/1"})
	_ = enc.Encode(api.BuildEvent{Type: "done", Image: &img})
	s.mu.Lock()
	s.images = append(s.images, img)
	s.mu.Unlock()
}

func (s *Server) keysRoot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var req api.CreateKeyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
			writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, "key needs a name")
			return
		}
		id := fmt.Sprintf("key%d", len(s.keys)+1)
		scope := req.Scope
		if scope == "" {
			scope = api.KeyScopeOwn
		}
		k := api.Key{ID: id, Name: req.Name, Prefix: "pdk_" + id, Scope: scope, CreatedAt: time.Now().UTC()}
		s.keys[id] = k
		writeJSON(w, http.StatusCreated, api.CreatedKey{Key: k, Secret: "pdk_" + id + "_secret"})
	case http.MethodGet:
		out := []api.Key{}
		for _, k := range s.keys {
			out = append(out, k)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		writeJSON(w, http.StatusOK, api.KeyList{Keys: out})
	default:
		writeErr(w, http.StatusMethodNotAllowed, api.CodeInvalidArgument, "method not allowed")
	}
}

// resolve makes a request's path absolute the way the daemon does:
// relative to the acting user's home.
func resolve(r *http.Request, p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	home := "/home/user"
	if r.URL.Query().Get("user") == "root" {
		home = "/root"
	}
	return path.Join(home, p)
}

func info(p string, f *File) api.FileInfo {
	fi := api.FileInfo{Name: path.Base(p), Path: p, Type: "file", Size: int64(len(f.Data)), Mode: f.Mode}
	switch {
	case f.Dir:
		fi.Type, fi.Size = "dir", 0
	case f.Symlink != "":
		fi.Type, fi.SymlinkTarget = "symlink", f.Symlink
	}
	return fi
}

func (s *Server) fileOp(w http.ResponseWriter, r *http.Request, id, key string) {
	p := resolve(r, r.URL.Query().Get("path"))
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.files[id]
	notFound := func(p string) {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("%s: no such file or directory", p))
	}
	switch key {
	case "GET files":
		f := fs[p]
		if f == nil {
			notFound(p)
			return
		}
		if f.Dir {
			writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, p+" is a directory")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(f.Data)
	case "PUT files":
		data, err := io.ReadAll(r.Body)
		if err != nil {
			writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, err.Error())
			return
		}
		mode := uint64(0o644)
		if m := r.URL.Query().Get("mode"); m != "" {
			if mode, err = strconv.ParseUint(m, 8, 32); err != nil {
				writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, "bad mode")
				return
			}
		}
		f := &File{Data: data, Mode: uint32(mode)}
		s.put(id, p, f)
		writeJSON(w, http.StatusOK, info(p, f))
	case "DELETE files":
		if fs[p] == nil {
			notFound(p)
			return
		}
		for q := range fs {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(fs, q)
			}
		}
		w.WriteHeader(http.StatusNoContent)
	case "GET files/stat":
		if fs[p] == nil {
			notFound(p)
			return
		}
		writeJSON(w, http.StatusOK, info(p, fs[p]))
	case "GET files/list":
		if fs[p] == nil || !fs[p].Dir {
			notFound(p)
			return
		}
		out := []api.FileInfo{}
		for q, f := range fs {
			if q != p && path.Dir(q) == p {
				out = append(out, info(q, f))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		writeJSON(w, http.StatusOK, api.FileList{Entries: out})
	case "POST files/mkdir":
		var req api.PathRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		p = resolve(r, req.Path)
		if fs[p] != nil {
			writeErr(w, http.StatusConflict, api.CodeConflict, p+" exists")
			return
		}
		f := &File{Dir: true, Mode: 0o755}
		s.put(id, p, f)
		writeJSON(w, http.StatusOK, info(p, f))
	case "POST files/move":
		var req api.MoveRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		src, dst := resolve(r, req.Source), resolve(r, req.Destination)
		if fs[src] == nil {
			notFound(src)
			return
		}
		for q, f := range fs {
			if q == src || strings.HasPrefix(q, src+"/") {
				delete(fs, q)
				s.put(id, dst+strings.TrimPrefix(q, src), f)
			}
		}
		writeJSON(w, http.StatusOK, info(dst, fs[dst]))
	}
}

func (s *Server) tarOut(w http.ResponseWriter, r *http.Request, id string) {
	s.tarOutPath(w, id, resolve(r, r.URL.Query().Get("path")))
}

// tarOutPath writes the tree under dir with names relative to it.
func (s *Server) tarOutPath(w http.ResponseWriter, id, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.files[id]
	if f := fs[dir]; f == nil || !f.Dir {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, dir+": no such directory")
		return
	}
	var names []string
	for q := range fs {
		if q != dir && (dir == "/" || strings.HasPrefix(q, dir+"/")) {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	for _, q := range names {
		f := fs[q]
		rel := strings.TrimPrefix(strings.TrimPrefix(q, dir), "/")
		h := &tar.Header{Name: rel, Mode: int64(f.Mode), ModTime: time.Unix(0, 0)}
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
		case f.Symlink != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Symlink
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(f.Data)
	}
	_ = tw.Close()
}

func (s *Server) tarIn(w http.ResponseWriter, r *http.Request, id string) {
	dir := resolve(r, r.URL.Query().Get("path"))
	staged := map[string]*File{}
	tr := tar.NewReader(r.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, fmt.Sprintf("%v: %v", errBadTar, err))
			return
		}
		name := path.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		p := path.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			staged[p] = &File{Dir: true, Mode: uint32(h.Mode)}
		case tar.TypeSymlink:
			staged[p] = &File{Symlink: h.Linkname, Mode: 0o777}
		case tar.TypeReg:
			var b bytes.Buffer
			if _, err := io.Copy(&b, tr); err != nil {
				writeErr(w, http.StatusBadRequest, api.CodeInvalidArgument, err.Error())
				return
			}
			staged[p] = &File{Data: b.Bytes(), Mode: uint32(h.Mode)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[id][dir]; f == nil || !f.Dir {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, dir+": no such directory")
		return
	}
	for p, f := range staged {
		s.put(id, p, f)
	}
	w.WriteHeader(http.StatusNoContent)
}
