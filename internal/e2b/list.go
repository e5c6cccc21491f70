package e2b

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

const (
	defaultPageSize = 100
	maxPageSize     = 100
	maxQueryValue   = 8 << 10
	nextTokenHeader = "X-Next-Token"
	// totalRunningHeader is E2B's X-Total-Running.
	totalRunningHeader = "X-Total-Running"
)

var idRE = lazyre.New(`^[a-z0-9]{1,32}$`)

func validID(s string) bool { return idRE.MatchString(s) }

// listQuery is a parsed GET /v2/sandboxes query.
type listQuery struct {
	metadata map[string]string
	states   []string // E2B states; empty = both
	limit    int
	after    *pageKey
	desc     bool      // E2B's default: newest first
	since    time.Time // startedAfter (inclusive); zero = none
	template string    // "" = any
}

// listParams are the query parameters of GET /v2/sandboxes in E2B's API.
// Any other is refused: a filter the server does not know must not be
// dropped silently, leaving the caller a list it did not ask for.
var listParams = []string{"metadata", "state", "order", "startedAfter", "template", "nextToken", "limit"}

// onlyParams refuses query parameters outside allowed.
func onlyParams(q url.Values, allowed ...string) error {
	for k := range q {
		if !slices.Contains(allowed, k) {
			return errdefs.Invalid("query parameter %q is not supported here (supported: %s)", truncate(k), strings.Join(allowed, ", "))
		}
	}
	return nil
}

// pageKey is where the previous page ended, in list order.
type pageKey struct {
	created time.Time
	id      string
}

// encodeToken makes an opaque x-next-token.
func encodeToken(k pageKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.created.UnixNano(), 10) + "." + k.id))
}

// parseToken reads a token made by encodeToken; clients send it back
// verbatim, but it is outside input all the same.
func parseToken(s string) (*pageKey, error) {
	bad := errdefs.Invalid("nextToken is not a token this server issued")
	if len(s) > 128 {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	ns, id, ok := strings.Cut(string(b), ".")
	if !ok || !validID(id) {
		return nil, bad
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n < 0 {
		return nil, bad
	}
	return &pageKey{created: time.Unix(0, n).UTC(), id: id}, nil
}

// parseMetadataFilter reads E2B's metadata filter: a query-string encoded
// "k1=v1&k2=v2" whose keys and values the SDKs percent-encode once more.
func parseMetadataFilter(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxQueryValue {
		return nil, errdefs.Invalid("metadata filter is longer than %d bytes", maxQueryValue)
	}
	q, err := url.ParseQuery(s)
	if err != nil {
		return nil, errdefs.Invalid("metadata filter %q is not k=v pairs joined by '&'", s)
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		key, err1 := url.QueryUnescape(k)
		if err1 != nil || key == "" || len(vs) != 1 {
			return nil, errdefs.Invalid("metadata filter key %q is not valid (one value per key)", k)
		}
		val, err := url.QueryUnescape(vs[0])
		if err != nil {
			return nil, errdefs.Invalid("metadata filter value for %q is not valid", key)
		}
		if strings.HasPrefix(key, reservedPrefix) {
			return nil, errdefs.Invalid("metadata key %q: the prefix %s is reserved", key, reservedPrefix)
		}
		out[key] = val
	}
	return out, nil
}

func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: defaultPageSize, desc: true}
	if err := onlyParams(q, listParams...); err != nil {
		return lq, err
	}
	for k, vs := range q {
		for _, v := range vs {
			if len(v) > maxQueryValue {
				return lq, errdefs.Invalid("query parameter %s is longer than %d bytes", k, maxQueryValue)
			}
		}
	}
	var err error
	if lq.metadata, err = parseMetadataFilter(q.Get("metadata")); err != nil {
		return lq, err
	}
	for _, raw := range q["state"] {
		for _, s := range strings.Split(raw, ",") {
			if s != stateRunning && s != statePaused {
				return lq, errdefs.Invalid("state %q: want running or paused", s)
			}
			lq.states = append(lq.states, s)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return lq, errdefs.Invalid("limit %q: want 1 to %d", v, maxPageSize)
		}
		lq.limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		if lq.after, err = parseToken(v); err != nil {
			return lq, err
		}
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return lq, errdefs.Invalid("order %q: want asc or desc", q.Get("order"))
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return lq, errdefs.Invalid("startedAfter %q: want an RFC 3339 date-time", v)
		}
		// E2B compares on a microsecond grid, so feeding a sandbox's own
		// startedAt back includes that sandbox.
		lq.since = t.Truncate(time.Microsecond)
	}
	if v := q.Get("template"); v != "" {
		if strings.Contains(v, ":") {
			return lq, errdefs.Invalid("Invalid template: tags are not supported here because sandboxes are not tag-scoped")
		}
		lq.template = v
	}
	return lq, nil
}

// matches applies the filters that do not depend on paging.
func (lq *listQuery) matches(sb *api.Sandbox) bool {
	if len(lq.states) > 0 && !slices.Contains(lq.states, e2bState(sb.State)) {
		return false
	}
	if !lq.since.IsZero() && sb.CreatedAt.Truncate(time.Microsecond).Before(lq.since) {
		return false
	}
	return lq.template == "" || sb.Labels[labelTemplate] == lq.template
}

// e2bSandboxes lists the facade's sandboxes carrying every given label,
// oldest first (or newest first with desc), ties broken by id.
func (h *Handler) e2bSandboxes(r *http.Request, labels map[string]string, desc bool) ([]api.Sandbox, error) {
	all, err := h.opts.Controller.List(r.Context(), labels)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, sb := range all {
		if sb.Labels[labelTemplate] != "" && sb.State != api.StateDestroying {
			out = append(out, sb)
		}
	}
	slices.SortFunc(out, func(a, b api.Sandbox) int {
		c := a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if desc {
			c = -c
		}
		return c
	})
	return out, nil
}

func (h *Handler) listV2(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	sbs, err := h.e2bSandboxes(r, lq.metadata, lq.desc)
	if err != nil {
		writeError(w, err)
		return
	}
	page := make([]listedSandbox, 0, lq.limit)
	var last pageKey
	more := false
	running := 0
	for _, sb := range sbs {
		if lq.matches(&sb) && e2bState(sb.State) == stateRunning {
			running++
		}
	}
	if len(lq.states) == 0 || slices.Contains(lq.states, stateRunning) {
		// E2B's count of the running sandboxes the filters match, before paging.
		w.Header().Set(totalRunningHeader, strconv.Itoa(running))
	}
	for _, sb := range sbs {
		if lq.after != nil && !isAfter(sb, *lq.after, lq.desc) {
			continue
		}
		if !lq.matches(&sb) {
			continue
		}
		if len(page) == lq.limit {
			more = true
			break
		}
		page = append(page, toListed(&sb))
		last = pageKey{created: sb.CreatedAt, id: sb.ID}
	}
	if more {
		w.Header().Set(nextTokenHeader, encodeToken(last))
	}
	writeJSON(w, http.StatusOK, page)
}

func isAfter(sb api.Sandbox, k pageKey, desc bool) bool {
	c := sb.CreatedAt.Compare(k.created)
	if c == 0 {
		c = strings.Compare(sb.ID, k.id)
	}
	if desc {
		return c < 0
	}
	return c > 0
}

// listV1 is E2B's older list: running sandboxes, optionally filtered by
// metadata, without paging.
func (h *Handler) listV1(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r.URL.Query(), "metadata"); err != nil {
		writeError(w, err)
		return
	}
	md, err := parseMetadataFilter(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, err)
		return
	}
	sbs, err := h.e2bSandboxes(r, md, false)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]listedSandbox, 0, len(sbs))
	for _, sb := range sbs {
		if e2bState(sb.State) == stateRunning {
			out = append(out, toListed(&sb))
		}
	}
	writeJSON(w, http.StatusOK, out)
}
