package e2b

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// networkInfoOf is getInfo's network: the sandbox's recorded policy in
// E2B's terms, and how its ports are reached.
func networkInfoOf(sb *api.Sandbox) networkInfo {
	allow, deny, rules := egressInfo(sb.Network)
	return networkInfo{
		AllowOut:           allow,
		DenyOut:            deny,
		Rules:              rules,
		AllowPublicTraffic: sb.Labels[labelTrafficToken] == "",
		MaskRequestHost:    sb.Labels[labelMaskHost],
		HTTPSPorts:         parseHTTPSPorts(sb.Labels[labelHTTPSPorts]),
	}
}

// setNetwork: PUT /sandboxes/{id}/network replaces the egress rules and
// transform rules at once (fields left out are cleared, as on E2B). The
// network mode is fixed when a sandbox is created, so a sandbox without
// a network cannot be given one here.
func (h *Handler) setNetwork(w http.ResponseWriter, r *http.Request) {
	var body networkUpdate
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	want, err := updateNetwork(&body, h.opts.DefaultNetwork)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	cur := sb.Network
	if cur == nil || cur.Mode != api.NetworkEgress {
		if want == nil {
			w.WriteHeader(http.StatusNoContent) // no network asked, none there
			return
		}
		writeError(w, fmt.Errorf("sandbox %s has no network: it was created without egress rules (or with allow_internet_access: false), and Paddock fixes a sandbox's network when it is created; create it with network.allowOut, or network.denyOut: [ALL_TRAFFIC] to allow nothing yet, to change its rules later: %w", sb.ID, errdefs.ErrConflict))
		return
	}
	if want == nil {
		// No network asked of a sandbox that has one: it keeps its
		// interface, and the proxy refuses every host.
		want = &api.NetworkPolicy{Mode: api.NetworkEgress}
	}
	want.Ports = slices.Clone(cur.Ports)
	if _, err := h.opts.Controller.ReplaceNetworkPolicy(r.Context(), sb.ID, *want); err != nil {
		writeError(w, err)
		return
	}
	h.log.Info("e2b network updated", "sandbox", sb.ID, "internet", internetAccess(want))
	w.WriteHeader(http.StatusNoContent)
}

// forkBody is E2B's SandboxForkRequest.
type forkBody struct {
	Count   *int   `json:"count,omitempty"`
	Timeout *int64 `json:"timeout,omitempty"` // seconds, for the new sandboxes
}

// forkResult is E2B's SandboxForkResult.
type forkResult struct {
	Sandbox *sandbox  `json:"sandbox,omitempty"`
	Error   *apiError `json:"error,omitempty"`
}

// fork: POST /sandboxes/{id}/fork, through the controller's fork: one
// snapshot of the files now (the source is frozen for the copy), then
// count sandboxes from it, each with the source's metadata, network and
// lifecycle, tokens of its own and the given timeout. Memory and processes
// are not copied. Paddock's fork is all or nothing: if one copy fails the
// others are removed and the request fails, where E2B reports each.
func (h *Handler) fork(w http.ResponseWriter, r *http.Request) {
	var body forkBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	n := 1
	if body.Count != nil {
		n = *body.Count
	}
	if n < 1 || n > api.MaxForkCount {
		writeError(w, errdefs.Invalid("count %d: want 1 to %d", n, api.MaxForkCount))
		return
	}
	timeout, err := timeoutSeconds(body.Timeout, defaultTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if h.opts.Forks == nil {
		writeError(w, fmt.Errorf("this daemon does not serve forks: %w", errdefs.ErrUnavailable))
		return
	}
	res, err := h.opts.Forks.ForkEach(r.Context(), sb.ID, api.ForkRequest{Count: n, Memory: keepsMemory(sb)}, func(src *api.Sandbox, _ int, req *api.CreateSandboxRequest) {
		forkCopy(src, req)
		setLifetime(req, timeout, src.Labels[labelAutoPause] == "true")
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]forkResult, 0, len(res.Sandboxes))
	for i := range res.Sandboxes {
		s := toSandbox(&res.Sandboxes[i])
		out = append(out, forkResult{Sandbox: &s})
	}
	h.log.Info("e2b sandbox forked", "sandbox", sb.ID, "copies", len(out), "snapshot", res.Snapshot.ID)
	writeJSON(w, http.StatusCreated, out)
}

// forkCopy gives one copy of a fork its own tokens (a token of the source
// must never open a copy) and the source's network, which Paddock's fork
// does not copy by itself.
func forkCopy(src *api.Sandbox, req *api.CreateSandboxRequest) {
	for _, k := range []string{labelEnvdToken, labelTrafficToken} {
		if src.Labels[k] != "" {
			req.Labels[k] = newToken()
		}
	}
	if p := src.Network; p != nil {
		c := *p
		c.AllowHosts = slices.Clone(p.AllowHosts)
		c.DenyHosts = slices.Clone(p.DenyHosts)
		c.Ports = slices.Clone(p.Ports)
		c.Inject = slices.Clone(p.Inject)
		req.Network = &c
	}
}
