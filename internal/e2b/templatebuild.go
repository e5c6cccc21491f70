package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/store"
)

// E2B's template build API, as the SDKs' Template.build drives it:
//
//	POST /v3/templates                            ask for a build: its template and build ids
//	GET  /templates/{id}/files/{hash}             where to upload a copy step's files
//	PUT  <the upload URL>                         the files (a tar, gzipped or not)
//	POST /v2/templates/{id}/builds/{build}        the definition; the build starts
//	GET  /templates/{id}/builds/{build}/status    its state and log lines from an offset
//	GET  /templates/aliases/{alias}               whether the name is taken
//	POST /templates/tags, DELETE /templates/tags  tag a build, untag (templatetags.go)
//	GET  /templates/{id}/tags                     a name's tags
//
// A build becomes a Paddock template of the same name (templates.Service
// builds it, cached and owned as any other), so Sandbox.create(name) and
// Paddock's own API, pools included, create from it. Builds are held in
// memory with their logs and uploads, and their state is also kept in the
// daemon's store (buildrecords.go), so a status call after a restart finds
// them.

// uploadPath is where copy steps' files are uploaded: the URL carries a
// token of the build's (the SDKs send no API key there, as to E2B's
// storage).
const uploadPath = "/paddock/e2b-template-uploads/"

// Bounds on builds held.
const (
	maxBuildsHeld    = 64
	maxBuildsPending = 8 // per caller, not yet finished (nor let go: buildKeptFor)
	buildKeptFor     = time.Hour
	maxLogEntries    = 10000
	maxAllUploads    = 256 << 20 // bytes of uploads held across builds
)

var hashRE = lazyre.New(`^[0-9a-fA-F]{16,128}$`)

// logEntry is E2B's BuildLogEntry.
type logEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// buildReason is E2B's BuildStatusReason.
type buildReason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []logEntry `json:"logEntries"`
}

// build is one E2B template build.
type build struct {
	owner, name, id string
	// tags are the tags the build gets, the one it is built as first
	// ("default" when it is one of them: the plain name).
	tags    []string
	token   string // the upload URL's
	created time.Time

	mu       sync.Mutex
	status   string // waiting, building, ready, error
	started  bool
	finished time.Time
	// restored: read back from the store after a restart (buildrecords.go),
	// without logs or uploads; it cannot start.
	restored bool
	uploads  map[string][]uploadEntry
	upBytes  int64
	logs     []logEntry
	reason   *buildReason
}

func (b *build) log(level, msg string) { b.logStep(level, msg, "") }

// logStep logs msg as a line of E2B's step step ("" for none).
func (b *build) logStep(level, msg, step string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.logs) < maxLogEntries {
		b.logs = append(b.logs, logEntry{Timestamp: time.Now().UTC(), Level: level, Message: msg, Step: step})
	}
}

// buildTable holds the builds.
type buildTable struct {
	mu      sync.Mutex
	builds  map[string]*build // by name + "/" + id
	byToken map[string]*build
	upBytes int64
	// rec keeps the builds' state across restarts (nil: memory only).
	rec store.E2BBuildStore
	log *slog.Logger
}

func newBuildTable() *buildTable {
	return &buildTable{builds: map[string]*build{}, byToken: map[string]*build{}}
}

// add holds a new build for owner, dropping finished builds older than
// buildKeptFor (or, when full, the oldest finished one).
func (t *buildTable) add(owner, name string, tags []string) (*build, error) {
	var abandoned []*build
	defer func() { // after the unlock below
		for _, b := range abandoned {
			t.record(context.Background(), b)
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := 0
	var oldest *build
	var oldestFin time.Time
	for k, b := range t.builds {
		b.mu.Lock()
		done, fin, started := b.status == "ready" || b.status == "error", b.finished, b.started
		b.mu.Unlock()
		// Finished builds are kept for a while to be polled; builds never
		// started (a client that went away) as long, then let go.
		if done && time.Since(fin) > buildKeptFor {
			t.drop(k, b)
			continue
		}
		if !started && time.Since(b.created) > buildKeptFor {
			// Its record says why it can no longer start.
			b.mu.Lock()
			b.status, b.finished = "error", time.Now()
			b.reason = &buildReason{Message: abandonedReason, LogEntries: []logEntry{}}
			b.mu.Unlock()
			abandoned = append(abandoned, b)
			t.drop(k, b)
			continue
		}
		if !done && b.owner == owner {
			pending++
		}
		if done && (oldest == nil || fin.Before(oldestFin)) {
			oldest, oldestFin = b, fin
		}
	}
	if pending >= maxBuildsPending {
		return nil, fmt.Errorf("%d template builds of this key are unfinished; wait for one: %w", pending, errdefs.ErrResourceExhausted)
	}
	if len(t.builds) >= maxBuildsHeld {
		if oldest == nil {
			return nil, fmt.Errorf("%d template builds are unfinished on this daemon: %w", len(t.builds), errdefs.ErrResourceExhausted)
		}
		t.drop(oldest.name+"/"+oldest.id, oldest)
	}
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	b := &build{owner: owner, name: name, tags: tags, id: newUUID(), token: hex.EncodeToString(tok), created: time.Now(), status: "waiting", uploads: map[string][]uploadEntry{}}
	t.builds[name+"/"+b.id] = b
	t.byToken[b.token] = b
	return b, nil
}

func (t *buildTable) drop(key string, b *build) {
	delete(t.builds, key)
	delete(t.byToken, b.token)
	t.freeUploads(b)
}

// freeUploads lets go of b's uploads and their bytes. t.mu is held.
func (t *buildTable) freeUploads(b *build) {
	b.mu.Lock()
	t.upBytes -= b.upBytes
	b.uploads, b.upBytes = nil, 0
	b.mu.Unlock()
}

// get returns the caller's build, held or (after a restart) as the store
// kept it; another key's is not found.
func (t *buildTable) get(ctx context.Context, name, id string) (*build, error) {
	t.mu.Lock()
	b := t.builds[name+"/"+id]
	t.mu.Unlock()
	if b == nil || b.owner != controller.Caller(ctx) {
		if r := t.restored(ctx, controller.Caller(ctx), name, id); r != nil {
			return r, nil
		}
		return nil, errdefs.NotFound("template build %s of %s", truncate(id), truncate(name))
	}
	return b, nil
}

// E2B's upload call names the template, not the build, so while two
// builds of one name by one key wait, a file uploaded for either lands
// with the newer (pendingBuild). Files are named by their content's hash
// and the same key sent them, so a build may take its files from its
// siblings (the key's other builds of that name): sharedUploads at its
// start, and a finished build's files pass to a sibling still waiting.

// sharedUploads is what b's siblings hold.
func (t *buildTable) sharedUploads(b *build) map[string][]uploadEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]uploadEntry{}
	for _, o := range t.builds {
		if o != b && o.owner == b.owner && o.name == b.name {
			o.mu.Lock()
			maps.Copy(out, o.uploads)
			o.mu.Unlock()
		}
	}
	return out
}

// release lets go of a finished build's uploads, or hands them to the
// newest sibling still waiting.
func (t *buildTable) release(b *build) {
	t.mu.Lock()
	defer t.mu.Unlock()
	heir := t.newestWaiting(b.owner, b.name, b, true)
	if heir == nil {
		t.freeUploads(b)
		return
	}
	b.mu.Lock()
	ups, held := b.uploads, b.upBytes
	b.uploads, b.upBytes = nil, 0
	b.mu.Unlock()
	var moved int64
	heir.mu.Lock()
	for h, es := range ups {
		if _, ok := heir.uploads[h]; !ok {
			heir.uploads[h] = es
			moved += entriesBytes(es)
		}
	}
	heir.upBytes += moved
	heir.mu.Unlock()
	t.upBytes -= held - moved
}

func (h *Handler) routesTemplateBuilds(m *http.ServeMux) {
	m.HandleFunc("POST /v3/templates", h.withTemplates(h.requestBuild))
	m.HandleFunc("GET /templates/{id}/files/{hash}", h.withTemplates(h.uploadLink))
	m.HandleFunc("POST /v2/templates/{id}/builds/{build}", h.withTemplates(h.startBuild))
	m.HandleFunc("GET /templates/{id}/builds/{build}/status", h.withTemplates(h.buildStatus))
	// GET /templates/aliases/{alias} and GET /templates/{id}/tags would
	// be patterns neither more specific than the other: one route takes
	// both (templatetags.go).
	m.HandleFunc("GET /templates/{id}/{what}", h.withTemplates(h.templateQuery))
	m.HandleFunc("POST /templates/tags", h.withTemplates(h.assignTags))
	m.HandleFunc("GET /templates", h.withTemplates(h.listTemplatesAll)) // templatelist.go
	m.HandleFunc("GET /v2/templates", h.withTemplates(h.listTemplatesPaged))
	m.HandleFunc("GET /templates/{id}", h.withTemplates(h.templateBuilds))
	m.HandleFunc("DELETE /templates/tags", h.withTemplates(h.removeTags))
}

// withTemplates is hf on a handler built with the templates subsystem.
func (h *Handler) withTemplates(hf http.HandlerFunc) http.HandlerFunc {
	if h.opts.Templates != nil {
		return hf
	}
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("this daemon does not serve template builds: %w", errdefs.ErrUnavailable))
	}
}

// requestBuild: POST /v3/templates. The template's id is its name.
func (h *Handler) requestBuild(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name  string   `json:"name"`
		Alias string   `json:"alias"`
		Tags  []string `json:"tags"`
	}
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	name := body.Name
	if name == "" {
		name = body.Alias
	}
	name, tags, err := buildTags(name, body.Tags)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := h.opts.Templates.MayBuild(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	b, err := h.builds.add(controller.Caller(r.Context()), name, tags)
	if err != nil {
		writeError(w, err)
		return
	}
	h.builds.pruneRecords(r.Context())
	h.builds.record(r.Context(), b)
	h.log.Info("e2b template build requested", "template", name, "tags", tags, "build", b.id)
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": name, "buildID": b.id, "aliases": []string{name}, "names": []string{name},
		"tags": tags, "public": false,
	})
}

// buildTags splits a build's name ("name" or "name:tag") from its tag and
// adds the tags the request lists: the tags the build gets, "default" first
// when it is one of them, and only it when none is named.
func buildTags(ref string, more []string) (string, []string, error) {
	name, tag, tagged := strings.Cut(ref, ":")
	if !rules.ValidName(name) {
		return "", nil, errdefs.Invalid("template name %q: use 1-63 letters, digits, '-', '_' or '.', and a tag after a colon if any", truncate(ref))
	}
	var tags []string
	if tagged {
		tags = append(tags, tag)
	}
	tags = append(tags, more...)
	if len(tags) == 0 {
		return name, []string{rules.DefaultTag}, nil
	}
	out, err := rules.TemplateTags(tags)
	if err != nil {
		return "", nil, err
	}
	if i := slices.Index(out, rules.DefaultTag); i > 0 {
		out[0], out[i] = out[i], out[0]
	}
	return name, out, nil
}

// uploadLink: GET /templates/{id}/files/{hash}: a URL of this daemon to
// upload a copy step's files to, unless this build has them already.
func (h *Handler) uploadLink(w http.ResponseWriter, r *http.Request) {
	name, hash := r.PathValue("id"), r.PathValue("hash")
	if !hashRE.MatchString(hash) {
		writeError(w, errdefs.Invalid("files hash %q is not a hex digest", truncate(hash)))
		return
	}
	b := h.pendingBuild(r, name)
	if b == nil {
		writeError(w, errdefs.NotFound("no template build of %s is waiting for files; ask for one first (POST /v3/templates)", truncate(name)))
		return
	}
	b.mu.Lock()
	_, present := b.uploads[hash]
	b.mu.Unlock()
	out := map[string]any{"present": present}
	if !present {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		out["url"] = scheme + "://" + r.Host + uploadPath + b.token + "/" + hash
	}
	writeJSON(w, http.StatusCreated, out)
}

// pendingBuild is the caller's newest build of name not yet started.
func (h *Handler) pendingBuild(r *http.Request, name string) *build {
	h.builds.mu.Lock()
	defer h.builds.mu.Unlock()
	return h.builds.newestWaiting(controller.Caller(r.Context()), name, nil, false)
}

// newestWaiting is owner's newest build of name not started yet (other
// than skip; holding uploads, with withUploads). The caller holds t.mu.
func (t *buildTable) newestWaiting(owner, name string, skip *build, withUploads bool) *build {
	var newest *build
	for _, b := range t.builds {
		if b == skip || b.owner != owner || b.name != name {
			continue
		}
		b.mu.Lock()
		ok := !b.started && (!withUploads || b.uploads != nil)
		b.mu.Unlock()
		if ok && (newest == nil || b.created.After(newest.created)) {
			newest = b
		}
	}
	return newest
}

// serveUpload: PUT {uploadPath}{token}/{hash}, the files of one copy step
// of the build the token names, before that build starts.
func (h *Handler) serveUpload(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, uploadPath)
	token, hash, _ := strings.Cut(rest, "/")
	if r.Method != http.MethodPut {
		writeError(w, errdefs.Invalid("uploads are PUT"))
		return
	}
	h.builds.mu.Lock()
	b := h.builds.byToken[token]
	h.builds.mu.Unlock()
	if b == nil || len(token) != 64 || !hashRE.MatchString(hash) {
		writeError(w, errdefs.NotFound("no such upload"))
		return
	}
	// What this upload may add, reserved across builds while it is read
	// (the build's own bound is checked again when it is kept: the SDKs
	// upload a build's copy steps in parallel).
	h.builds.mu.Lock()
	b.mu.Lock()
	started, left := b.started, min(int64(maxUploadBytes)-b.upBytes, maxAllUploads-h.builds.upBytes)
	b.mu.Unlock()
	if left > 0 && !started {
		h.builds.upBytes += left
	}
	h.builds.mu.Unlock()
	if started {
		writeError(w, errdefs.Invalid("the build has started: its files can no longer change"))
		return
	}
	if left <= 0 {
		writeError(w, fmt.Errorf("template uploads: no room left: %w", errdefs.ErrResourceExhausted))
		return
	}
	entries, n, err := readUpload(http.MaxBytesReader(w, r.Body, api.MaxTemplateContext), left)
	h.builds.mu.Lock()
	h.builds.upBytes -= left
	h.builds.mu.Unlock()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = fmt.Errorf("upload larger than %d MiB: %w", api.MaxTemplateContext>>20, errdefs.ErrResourceExhausted)
		}
		writeError(w, err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	h.builds.mu.Lock()
	b.mu.Lock()
	switch {
	case b.started || b.uploads == nil:
		err = errdefs.Invalid("the build has started or ended: its files can no longer change")
	case h.builds.upBytes+n > maxAllUploads || b.upBytes+n > maxUploadBytes:
		err = fmt.Errorf("template uploads: no room left: %w", errdefs.ErrResourceExhausted)
	default:
		if old, ok := b.uploads[hash]; ok {
			n -= entriesBytes(old)
		}
		b.uploads[hash] = entries
		b.upBytes += n
		h.builds.upBytes += n
	}
	b.mu.Unlock()
	h.builds.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func entriesBytes(es []uploadEntry) int64 {
	var n int64
	for _, e := range es {
		n += int64(len(e.data))
	}
	return n
}

// startBuild: POST /v2/templates/{id}/builds/{build}: the definition is
// checked and the build starts in the background.
func (h *Handler) startBuild(w http.ResponseWriter, r *http.Request) {
	b, err := h.builds.get(r.Context(), r.PathValue("id"), r.PathValue("build"))
	if err != nil {
		writeError(w, err)
		return
	}
	var def buildStart
	if err := h.decode(r, &def); err != nil {
		writeError(w, err)
		return
	}
	if b.restored {
		why := "it was asked for before the daemon restarted, and its uploads went with the restart: ask for a new build"
		if b.reason != nil && b.reason.Message != "" {
			why = b.reason.Message
		}
		writeError(w, fmt.Errorf("template build %s cannot start: %s (POST /v3/templates): %w", b.id, why, errdefs.ErrFailedPrecondition))
		return
	}
	shared := h.builds.sharedUploads(b)
	// The definition is read with the uploads held still: none lands
	// once the build has started.
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		writeError(w, errdefs.Invalid("template build %s has started already", b.id))
		return
	}
	maps.Copy(shared, b.uploads) // its own first
	spec, bc, origin, err := e2bSpec(rules.TemplateName(b.name, b.tags[0]), def, shared)
	var auth *image.RegistryAuth
	if err == nil {
		// Checked by e2bSpec; kept in memory for the pull alone.
		auth, _ = registryAuth(def.FromImageRegistry)
		b.started, b.status = true, "building"
	}
	b.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	if def.Force {
		b.log("info", "skipCache: Paddock's build cache is keyed by each step's content; unchanged steps are still served from it")
	}
	// The build outlives the request; it keeps the caller's identity and
	// ends with the daemon.
	ctx := controller.WithCaller(h.opts.Context, controller.Caller(r.Context()), h.opts.Controller.KeyScope(r.Context(), controller.Caller(r.Context())))
	h.builds.record(r.Context(), b)
	go h.runBuild(ctx, b, spec, bc, origin, auth)
	h.log.Info("e2b template build started", "template", b.name, "build", b.id, "steps", len(spec.Steps))
	w.WriteHeader(http.StatusAccepted)
}

// runBuild builds b's template, its progress into b's log. Log lines and
// a failure name the step of E2B's definition they belong to (origin maps
// Paddock's steps to E2B's): "base" before the first, as E2B names the
// base's, so that the SDKs point at the line of the template that failed.
func (h *Handler) runBuild(ctx context.Context, b *build, spec *api.TemplateSpec, bc *templates.BuildContext, origin []int, auth *image.RegistryAuth) {
	defer h.builds.release(b)
	// Once its end is set (the deferred unlock below runs first); a
	// daemon shutting down still records how the build ended.
	defer h.builds.record(context.WithoutCancel(ctx), b)
	step := "base"
	var out strings.Builder // run output, logged by line
	flush := func() {
		if out.Len() > 0 {
			b.logStep("info", out.String(), step)
			out.Reset()
		}
	}
	emit := func(ev api.TemplateBuildEvent) error {
		switch ev.Type {
		case api.BuildStep:
			flush()
			if i := ev.Step - 1; i >= 0 && i < len(origin) && origin[i] > 0 {
				step = strconv.Itoa(origin[i])
			}
			msg := fmt.Sprintf("[%d/%d] %s", ev.Step, ev.Steps, ev.Kind)
			if ev.Cached {
				msg += " (cached)"
			}
			b.logStep("info", msg, step)
		case api.BuildOutput:
			for _, c := range string(ev.Data) {
				if c == '\n' || out.Len() >= 4096 {
					flush()
					if c == '\n' {
						continue
					}
				}
				out.WriteRune(c)
			}
		}
		return nil
	}
	err := h.pullBase(ctx, b, spec, auth)
	var tpl *api.Template
	if err == nil {
		tpl, err = h.opts.Templates.Build(ctx, *spec, bc, emit)
	}
	flush()
	if err == nil {
		b.log("info", "template "+tpl.Name+" built")
		if len(b.tags) > 1 {
			if _, _, err = h.opts.Templates.Tag(ctx, tpl.Name, b.tags[1:]); err == nil {
				b.log("info", "tagged "+strings.Join(b.tags[1:], ", "))
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished = time.Now()
	if err != nil {
		b.status = "error"
		b.reason = &buildReason{Message: errhttp.PublicMessageTo(buildLog{h.log, b}, err), Step: step, LogEntries: []logEntry{}}
		h.log.Info("e2b template build failed", "template", b.name, "build", b.id, "err", err)
		return
	}
	b.status = "ready"
	h.log.Info("e2b template build finished", "template", b.name, "build", b.id)
}

// buildStatus: GET /templates/{id}/builds/{build}/status?logsOffset=N.
func (h *Handler) buildStatus(w http.ResponseWriter, r *http.Request) {
	b, err := h.builds.get(r.Context(), r.PathValue("id"), r.PathValue("build"))
	if err != nil {
		writeError(w, err)
		return
	}
	off := 0
	if s := r.URL.Query().Get("logsOffset"); s != "" {
		if off, err = strconv.Atoi(s); err != nil || off < 0 {
			writeError(w, errdefs.Invalid("logsOffset %q is not a count", truncate(s)))
			return
		}
	}
	b.mu.Lock()
	entries := []logEntry{}
	if off < len(b.logs) {
		entries = append(entries, b.logs[off:]...)
	}
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, e.Timestamp.Format(time.RFC3339)+" "+e.Message)
	}
	out := map[string]any{
		"templateID": b.name, "buildID": b.id, "status": b.status,
		"logEntries": entries, "logs": lines,
	}
	if b.reason != nil {
		out["reason"] = b.reason
	}
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// pullBase pulls the build's base image when the daemon does not have it
// (for the caller, as `paddock images pull` would, with the build's
// registry credentials if it gave some), and builds from the digest
// pulled.
func (h *Handler) pullBase(ctx context.Context, b *build, spec *api.TemplateSpec, auth *image.RegistryAuth) error {
	if spec.Image == "" || h.opts.PullImage == nil {
		return nil
	}
	_, _, err := h.opts.Controller.ResolveImage(ctx, spec.Image)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	b.log("info", "pulling "+spec.Image)
	digest, err := h.opts.PullImage(ctx, spec.Image, auth, func(line string) { b.log("info", line) })
	if err != nil {
		return fmt.Errorf("base image %s: %w", truncate(spec.Image), err)
	}
	spec.Image = digest
	return nil
}

// buildLog takes an internal build error's details to the daemon's log.
type buildLog struct {
	log *slog.Logger
	b   *build
}

func (l buildLog) LogInternal(ref string, err error) {
	l.log.Error("internal error", "reference", ref, "template", l.b.name, "build", l.b.id, "err", err)
}

// newUUID returns a random (version 4) UUID, the form of E2B's build ids.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
