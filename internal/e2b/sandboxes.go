package e2b

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
)

// Labels Paddock keeps on sandboxes created through the facade. Metadata
// may not use the reserved prefix, and it is hidden from E2B clients.
const (
	reservedPrefix    = "paddock.dev/"
	labelTemplate     = "paddock.dev/e2b-template" // marks a sandbox as E2B's
	labelEnvdToken    = "paddock.dev/e2b-envd-token"
	labelTrafficToken = "paddock.dev/e2b-traffic-token"
	labelAutoPause    = "paddock.dev/e2b-auto-pause"
	labelAutoResume   = "paddock.dev/e2b-auto-resume" // autoResume.enabled: traffic wakes it
	labelMaskHost     = "paddock.dev/e2b-mask-host"   // network.maskRequestHost
	labelHTTPSPorts   = "paddock.dev/e2b-https-ports" // network.httpsPorts, comma-separated
)

// E2B timeouts are whole seconds. The default is E2B's API default (the
// SDKs always send their own, 300 s); the maximum is E2B's longest plan.
const (
	defaultTimeout = 15
	maxTimeout     = 24 * 60 * 60
	defaultImage   = "base"
)

// templateImages maps E2B's template names to the Paddock images that
// stand in for them. E2B's code-interpreter template is a Debian with
// Python, numpy, pandas and matplotlib and a Jupyter server on port 49999;
// Paddock's code-interpreter image has the packages, and the daemon serves
// that port from its code contexts.
var templateImages = map[string]string{
	"code-interpreter-v1": image.NameCodeInterpreter,
	"code-interpreter":    image.NameCodeInterpreter,
}

// E2B's two sandbox states.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func timeoutSeconds(v *int64, def int64) (time.Duration, error) {
	s := def
	if v != nil {
		s = *v
	}
	if s < 1 || s > maxTimeout {
		return 0, errdefs.Invalid("timeout %d s is out of range (1 to %d seconds)", s, maxTimeout)
	}
	return time.Duration(s) * time.Second, nil
}

// unsupported refuses options whose meaning Paddock cannot honour, rather
// than silently creating a sandbox that behaves differently. The network
// options are checked in network.go.
func unsupported(b *newSandbox) error {
	switch {
	case len(b.VolumeMounts) > 0:
		return errdefs.Invalid("volumeMounts are not supported by Paddock")
	case b.MCP != nil:
		// E2B's SDK answers this option by running E2B's mcp-gateway
		// program inside the sandbox, with a token it makes up itself and
		// hands only to that program; see docs/e2b.md for why Paddock does
		// not stand in for it.
		return errdefs.Invalid("mcp is not supported by Paddock: E2B's SDK starts E2B's MCP gateway and the catalog servers named in mcp inside the sandbox (template mcp-gateway), which Paddock cannot run; Paddock's own MCP server is /mcp on this listener, with an API key (docs/mcp.md)")
	case !emptyObject(b.IAM):
		return errdefs.Invalid("iam (workload identity tokens) is not supported by Paddock; inject credentials with Secret and network.rules")
	}
	return checkLifecycle(b)
}

// checkLifecycle refuses what E2B's API refuses of autoPause,
// autoPauseMemory and autoResume.
func checkLifecycle(b *newSandbox) error {
	autoPause := b.AutoPause != nil && *b.AutoPause
	fsOnly := b.AutoPauseMemory != nil && !*b.AutoPauseMemory
	if fsOnly && !autoPause {
		return errdefs.Invalid("autoPauseMemory=false only applies when autoPause is true")
	}
	if b.AutoResume != nil && b.AutoResume.Enabled != nil && *b.AutoResume.Enabled {
		if !autoPause {
			return errdefs.Invalid("autoResume can only be enabled when autoPause is true (lifecycle.onTimeout: 'pause')")
		}
		if fsOnly {
			return errdefs.Invalid("autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only snapshot must be resumed explicitly")
		}
	}
	return nil
}

// autoResumes reports whether a create asked traffic to wake the sandbox:
// only autoResume {enabled: true} does, as on E2B, where a sandbox without
// it stays paused until connect.
func autoResumes(b *newSandbox) bool {
	return b.AutoResume != nil && b.AutoResume.Enabled != nil && *b.AutoResume.Enabled
}

// emptyObject reports whether a JSON value is absent, null or {}.
func emptyObject(v any) bool {
	if v == nil {
		return true
	}
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// setLifetime applies an E2B timeout: the hard lifetime, or with
// auto-pause the idle time after which the idle policy stops the sandbox
// (files kept; the next connect or request starts it again) or, on gVisor,
// hibernates it (hibernateOnTimeout).
func setLifetime(req *api.CreateSandboxRequest, timeout time.Duration, autoPause bool) {
	if autoPause {
		req.SleepAfter, req.KeepAlive, req.Timeout = timeout.String(), false, ""
		return
	}
	req.SleepAfter, req.KeepAlive, req.Timeout = "", true, timeout.String()
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var body newSandbox
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if err := unsupported(&body); err != nil {
		writeError(w, err)
		return
	}
	timeout, err := timeoutSeconds(body.Timeout, defaultTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	netPolicy, err := createNetwork(&body, h.opts.DefaultNetwork)
	if err != nil {
		writeError(w, err)
		return
	}
	mask, httpsPorts, err := checkPorts(body.Network)
	if err != nil {
		writeError(w, err)
		return
	}
	template := body.TemplateID
	if template == "" {
		template = defaultImage
	}
	image, tpl, fromSnapshot, err := h.resolveTemplate(r.Context(), template)
	if err != nil {
		writeError(w, err)
		return
	}
	labels := make(map[string]string, len(body.Metadata)+6)
	for k, v := range body.Metadata {
		if strings.HasPrefix(k, reservedPrefix) {
			writeError(w, errdefs.Invalid("metadata key %q: the prefix %s is reserved", k, reservedPrefix))
			return
		}
		labels[k] = v
	}
	labels[labelTemplate] = template
	if tpl != "" {
		// A template's id is its name, whichever tag made the sandbox
		// (sandboxes are not tag-scoped in E2B's listing).
		labels[labelTemplate], _ = rules.SplitTemplateTag(tpl)
	}
	// Secure unless asked otherwise: the SDKs send the token they are given
	// on every envd request, so this costs a client nothing.
	if body.Secure == nil || *body.Secure {
		labels[labelEnvdToken] = newToken()
	}
	if n := body.Network; n != nil && n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic {
		labels[labelTrafficToken] = newToken()
	}
	if mask != "" {
		labels[labelMaskHost] = mask
	}
	if httpsPorts != "" {
		labels[labelHTTPSPorts] = httpsPorts
	}
	autoPause := body.AutoPause != nil && *body.AutoPause
	if autoPause {
		labels[labelAutoPause] = "true"
	}
	if autoResumes(&body) {
		labels[labelAutoResume] = "true"
	}
	req := api.CreateSandboxRequest{Image: image, Template: tpl, FromSnapshot: fromSnapshot, Env: body.EnvVars, Labels: labels, Network: netPolicy}
	setLifetime(&req, timeout, autoPause)
	sb, err := h.opts.Controller.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	if autoPause && (body.AutoPauseMemory == nil || *body.AutoPauseMemory) && sb.Runtime == api.RuntimeGVisor {
		sb = h.hibernateOnTimeout(r, sb)
	}
	h.log.Info("e2b sandbox created", "sandbox", sb.ID, "template", template, "from_snapshot", fromSnapshot, "internet", internetAccess(sb.Network))
	writeJSON(w, http.StatusCreated, toSandbox(sb))
}

// hibernateOnTimeout makes an auto-pausing gVisor sandbox hibernate when
// its timeout comes (memory and processes kept on disk, as E2B's
// auto-pause keeps them) rather than stop. A daemon that cannot keep
// memory (an old runsc) leaves the policy at stop: files kept, as before.
func (h *Handler) hibernateOnTimeout(r *http.Request, sb *api.Sandbox) *api.Sandbox {
	out, err := h.opts.Controller.SetOnIdle(r.Context(), sb.ID, api.OnIdleHibernate)
	if err != nil {
		h.log.Info("e2b auto-pause: the sandbox will stop, not hibernate, at its timeout", "sandbox", sb.ID, "why", err)
		return sb
	}
	return out
}

// lookup returns an E2B sandbox by id. Names are not accepted (E2B has
// none), and sandboxes made through /v1 are not E2B's to see.
func (h *Handler) lookup(r *http.Request) (*api.Sandbox, error) {
	id := r.PathValue("id")
	if !validID(id) {
		return nil, errdefs.NotFound("sandbox %q", id)
	}
	sb, err := h.opts.Controller.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	// A sandbox being destroyed is gone for E2B's API already: its kill
	// (or the end of its lifetime) has happened, only the teardown has not.
	if sb.ID != id || sb.Labels[labelTemplate] == "" || sb.State == api.StateDestroying {
		return nil, errdefs.NotFound("sandbox %q", id)
	}
	return sb, nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxDetail{
		listedSandbox:       toListed(sb),
		EnvdAccessToken:     sb.Labels[labelEnvdToken],
		TrafficAccessToken:  sb.Labels[labelTrafficToken],
		AllowInternetAccess: internetAccess(sb.Network),
		Network:             networkInfoOf(sb),
		Lifecycle:           lifecycleOf(sb),
	})
}

// lifecycleOf is E2B's SandboxLifecycle of a sandbox, as getInfo reports it.
func lifecycleOf(sb *api.Sandbox) lifecycle {
	l := lifecycle{OnTimeout: "kill", AutoResume: sb.Labels[labelAutoResume] == "true"}
	if sb.Labels[labelAutoPause] == "true" {
		l.OnTimeout = "pause"
	}
	return l
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request) {
	sb, err := h.lookup(r)
	if err == nil {
		err = h.opts.Controller.Delete(r.Context(), sb.ID)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.Timeout == nil {
		writeError(w, errdefs.Invalid("timeout is required (seconds)"))
		return
	}
	d, err := timeoutSeconds(body.Timeout, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.lookup(r)
	if err == nil {
		err = h.applyTimeout(r, sb, d, false)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// applyTimeout sets when the sandbox ends (or, with auto-pause, how long
// it may idle). onlyExtend keeps a later end already set (connect).
func (h *Handler) applyTimeout(r *http.Request, sb *api.Sandbox, d time.Duration, onlyExtend bool) error {
	ctrl := h.opts.Controller
	if sb.Labels[labelAutoPause] == "true" {
		if cur, err := time.ParseDuration(sb.SleepAfter); onlyExtend && err == nil && cur >= d {
			return nil
		}
		_, err := ctrl.SetSleepAfter(r.Context(), sb.ID, d)
		return err
	}
	if onlyExtend && sb.ExpiresAt != nil && sb.ExpiresAt.After(time.Now().Add(d)) {
		return nil
	}
	_, err := ctrl.SetTimeout(r.Context(), sb.ID, d)
	return err
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	var body pauseBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if e2bState(sb.State) == statePaused {
		writeError(w, fmt.Errorf("sandbox %s is already paused: %w", sb.ID, errdefs.ErrConflict))
		return
	}
	// memory:false asks for a filesystem-only pause: that is Paddock's
	// stop. A pause with memory hibernates a gVisor sandbox (memory on
	// disk, kept across daemon restarts and host reboots, as E2B keeps
	// it); one that cannot hibernate (runc, an old runsc, no disk) is
	// frozen in place instead; one that cannot be frozen either (a pod
	// on the Kubernetes backend) gets the filesystem-only pause.
	ctrl := h.opts.Controller
	cannot := func(err error) bool {
		return errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrResourceExhausted)
	}
	memory := body.Memory == nil || *body.Memory
	if memory && sb.Runtime == api.RuntimeGVisor {
		if _, err = ctrl.Hibernate(r.Context(), sb.ID); cannot(err) {
			h.log.Info("e2b pause: not hibernated", "sandbox", sb.ID, "why", err)
		}
	}
	if memory && (sb.Runtime != api.RuntimeGVisor || cannot(err)) {
		if _, err = ctrl.Pause(r.Context(), sb.ID); cannot(err) {
			h.log.Info("e2b pause: not frozen; stopped with its files instead, memory lost", "sandbox", sb.ID, "why", err)
		}
	}
	if !memory || cannot(err) {
		_, err = ctrl.Stop(r.Context(), sb.ID)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// wake brings a paused or stopped sandbox back; it reports whether it had
// to.
func (h *Handler) wake(r *http.Request, sb *api.Sandbox) (*api.Sandbox, bool, error) {
	ctrl := h.opts.Controller
	switch sb.State {
	case api.StateRunning:
		return sb, false, nil
	case api.StatePaused, api.StateHibernated:
		out, err := ctrl.Resume(r.Context(), sb.ID)
		return out, true, err
	default:
		out, err := ctrl.StartSandbox(r.Context(), sb.ID)
		return out, true, err
	}
}

func (h *Handler) connect(w http.ResponseWriter, r *http.Request) {
	h.resumeOrConnect(w, r, false)
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	h.resumeOrConnect(w, r, true)
}

func (h *Handler) resumeOrConnect(w http.ResponseWriter, r *http.Request, mustBePaused bool) {
	var body timeoutBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	var d time.Duration
	if body.Timeout != nil {
		var err error
		if d, err = timeoutSeconds(body.Timeout, 0); err != nil {
			writeError(w, err)
			return
		}
	}
	sb, err := h.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if mustBePaused && e2bState(sb.State) != statePaused {
		writeError(w, fmt.Errorf("sandbox %s is already running: %w", sb.ID, errdefs.ErrConflict))
		return
	}
	sb, woke, err := h.wake(r, sb)
	if err == nil && d > 0 {
		err = h.applyTimeout(r, sb, d, true)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if woke {
		status = http.StatusCreated
	}
	writeJSON(w, status, toSandbox(sb))
}

func cpuCount(cpu float64) int {
	n := int(math.Ceil(cpu))
	if n < 1 {
		n = 1
	}
	return n
}

// e2bState folds Paddock's lifecycle into E2B's two states: anything not
// running (paused, stopped, stopping, error) is "paused", from which
// connect brings it back.
func e2bState(s string) string {
	if s == api.StateRunning || s == api.StateCreating {
		return stateRunning
	}
	return statePaused
}

func metadataOf(sb *api.Sandbox) map[string]string {
	md := make(map[string]string, len(sb.Labels))
	for k, v := range maps.All(sb.Labels) {
		if !strings.HasPrefix(k, reservedPrefix) {
			md[k] = v
		}
	}
	return md
}

func toSandbox(sb *api.Sandbox) sandbox {
	return sandbox{
		TemplateID:         sb.Labels[labelTemplate],
		SandboxID:          sb.ID,
		ClientID:           clientID,
		EnvdVersion:        EnvdVersion(),
		EnvdAccessToken:    sb.Labels[labelEnvdToken],
		TrafficAccessToken: sb.Labels[labelTrafficToken],
	}
}

func toListed(sb *api.Sandbox) listedSandbox {
	end := sb.CreatedAt
	switch {
	case sb.ExpiresAt != nil:
		end = *sb.ExpiresAt
	case sb.SleepAfter != "":
		if d, err := time.ParseDuration(sb.SleepAfter); err == nil {
			end = sb.LastActivityAt.Add(d)
		}
	}
	return listedSandbox{
		TemplateID:   sb.Labels[labelTemplate],
		SandboxID:    sb.ID,
		ClientID:     clientID,
		StartedAt:    sb.CreatedAt,
		EndAt:        end,
		CPUCount:     cpuCount(sb.Resources.CPU),
		MemoryMB:     sb.Resources.MemoryMB,
		DiskSizeMB:   sb.Resources.DiskMB,
		Metadata:     metadataOf(sb),
		State:        e2bState(sb.State),
		EnvdVersion:  EnvdVersion(),
		VolumeMounts: []any{},
	}
}
