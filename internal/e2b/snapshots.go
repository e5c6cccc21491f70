package e2b

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
)

// E2B's snapshots are templates made from a sandbox: Sandbox.create takes
// their id as templateID. Paddock's are the sandbox's files (its writable
// layer), on its image; memory and processes are not kept, so a sandbox
// created from one starts fresh processes on those files. Every snapshot
// the daemon holds is visible here (snapshots taken through /v1 or the CLI
// too, and the one each fork takes, for the 24 hours it lives): a snapshot
// is files on an image, and any API key may restore it through /v1 as well.

// snapshotInfo is E2B's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type snapshotBody struct {
	Name string `json:"name,omitempty"`
}

func toSnapshotInfo(s *api.Snapshot) snapshotInfo {
	names := []string{}
	if s.Name != "" {
		names = append(names, s.Name)
	}
	return snapshotInfo{SnapshotID: s.ID, Names: names}
}

// keepsMemory says whether a snapshot or fork of sb keeps memory and
// processes, as E2B's do: a gVisor sandbox with network none does (its
// memory snapshot, docs/snapshots.md); others keep their files.
func keepsMemory(sb *api.Sandbox) bool {
	return sb.Runtime == api.RuntimeGVisor && (sb.Network == nil || sb.Network.Mode == "" || sb.Network.Mode == api.NetworkNone)
}

// createSnapshot: POST /sandboxes/{id}/snapshots. A gVisor sandbox with
// network none gets a memory snapshot (keepsMemory); otherwise the sandbox
// is frozen for the copy of its files and thawed after (as E2B pauses it). The snapshot lives the
// daemon's default TTL (30 days), renewed by each create from it. A name
// already taken is a 409: Paddock does not version snapshots under one
// name, as E2B does.
func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body snapshotBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	snap, err := h.opts.Controller.CreateSnapshot(r.Context(), sb.ID, api.CreateSnapshotRequest{Name: body.Name, Memory: keepsMemory(sb)})
	if err != nil {
		writeError(w, err)
		return
	}
	h.log.Info("e2b snapshot taken", "sandbox", sb.ID, "snapshot", snap.ID)
	writeJSON(w, http.StatusCreated, toSnapshotInfo(snap))
}

// snapshotQuery is a parsed GET /snapshots query.
type snapshotQuery struct {
	sandboxID, name string
	limit           int
	after           *pageKey
}

func parseSnapshotQuery(q url.Values) (snapshotQuery, error) {
	sq := snapshotQuery{limit: defaultPageSize, sandboxID: q.Get("sandboxID"), name: q.Get("name")}
	for k, vs := range q {
		for _, v := range vs {
			if len(v) > maxQueryValue {
				return sq, errdefs.Invalid("query parameter %s is longer than %d bytes", k, maxQueryValue)
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return sq, errdefs.Invalid("limit %q: want 1 to %d", v, maxPageSize)
		}
		sq.limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		var err error
		if sq.after, err = parseToken(v); err != nil {
			return sq, err
		}
	}
	return sq, nil
}

// listSnapshots: GET /snapshots?sandboxID=&name=&limit=&nextToken=,
// oldest first, paged with x-next-token. name matches a snapshot's name
// or id.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request) {
	sq, err := parseSnapshotQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	all, err := h.opts.Controller.ListSnapshots(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	slices.SortFunc(all, func(a, b api.Snapshot) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	page := make([]snapshotInfo, 0, min(sq.limit, len(all)))
	var last pageKey
	more := false
	for _, s := range all {
		if sq.sandboxID != "" && s.Sandbox != sq.sandboxID {
			continue
		}
		if sq.name != "" && s.Name != sq.name && s.ID != sq.name {
			continue
		}
		if sq.after != nil && !snapshotAfter(s, *sq.after) {
			continue
		}
		if len(page) == sq.limit {
			more = true
			break
		}
		page = append(page, toSnapshotInfo(&s))
		last = pageKey{created: s.CreatedAt, id: s.ID}
	}
	if more {
		w.Header().Set(nextTokenHeader, encodeToken(last))
	}
	writeJSON(w, http.StatusOK, page)
}

func snapshotAfter(s api.Snapshot, k pageKey) bool {
	if c := s.CreatedAt.Compare(k.created); c != 0 {
		return c > 0
	}
	return s.ID > k.id
}

// deleteTemplate: DELETE /templates/{id}, which is how the SDK deletes a
// snapshot (Sandbox.deleteSnapshot) and E2B's CLI a template: a snapshot
// the caller sees, else a template of that name (a key of scope own may
// delete only those it built).
func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	snap, err := h.snapshot(r.Context(), id)
	switch {
	case err != nil:
	case snap != nil:
		err = h.opts.Controller.DeleteSnapshot(r.Context(), snap.ID)
	case h.opts.Templates != nil && rules.ValidName(id):
		// A name: every tag of it, as E2B deletes a template with its
		// builds.
		if err = h.opts.Templates.DeleteAll(r.Context(), id); errors.Is(err, errdefs.ErrNotFound) {
			err = errdefs.NotFound("no snapshot or template %q", truncate(id))
		}
	case h.opts.Templates != nil && validTemplateRef(id):
		if _, err = h.opts.Templates.Get(r.Context(), id); err == nil {
			err = h.opts.Templates.Delete(r.Context(), id)
		} else if errors.Is(err, errdefs.ErrNotFound) {
			err = errdefs.NotFound("no snapshot or template %q", truncate(id))
		}
	default:
		err = errdefs.NotFound("no snapshot or template %q", truncate(id))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// snapshot finds a snapshot by id or name; nil when there is none.
func (h *Handler) snapshot(ctx context.Context, ref string) (*api.Snapshot, error) {
	s, err := h.opts.Controller.GetSnapshot(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
		return nil, nil
	}
	return s, err
}

// resolveTemplate maps a create's templateID to an image, a Paddock
// template (built through E2B's template API or Paddock's own), or a
// snapshot to restore (on the snapshot's own image). Built-in image names,
// image digests and E2B's template names are images; then templates; then
// snapshot ids and names; anything else is tried as an image reference.
func (h *Handler) resolveTemplate(ctx context.Context, template string) (img, tpl, fromSnapshot string, err error) {
	if i, ok := templateImages[template]; ok {
		return i, "", "", nil
	}
	if slices.Contains(image.Builtin(), template) || strings.HasPrefix(template, "sha256:") {
		return template, "", "", nil
	}
	if h.opts.Templates != nil && validTemplateRef(template) {
		if _, err := h.opts.Templates.Get(ctx, template); err == nil {
			return "", template, "", nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return "", "", "", err
		}
	}
	snap, err := h.snapshot(ctx, template)
	if err != nil {
		return "", "", "", err
	}
	if snap != nil {
		return "", "", snap.ID, nil
	}
	return template, "", "", nil
}

// validTemplateRef says whether s can name a template, with a tag or not.
func validTemplateRef(s string) bool {
	_, ok := rules.TemplateRef(s)
	return ok
}
