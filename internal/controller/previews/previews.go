// Package previews is the controller's previews subsystem: a sandbox's
// port exposed at a URL that carries a random token (docs/interactive.md),
// the token's hash kept in the store, checked in constant time on every
// request to the preview listener, revoked by exposing the port again or
// unexposing it. It reaches sandboxes through the controller's core
// (Core).
package previews

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Preview tokens are 128 random bits in lowercase base32: a DNS label
// (hosts are case-insensitive) of PreviewTokenLen characters.
const PreviewTokenLen = 26

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newPreviewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return tokenEncoding.EncodeToString(b[:])
}

// ValidPreviewToken reports whether s has a token's shape.
func ValidPreviewToken(s string) bool {
	if len(s) != PreviewTokenLen {
		return false
	}
	_, err := tokenEncoding.DecodeString(s)
	return err == nil
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return errdefs.Invalid("port %d is out of range: want 1 to 65535", port)
	}
	return nil
}

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// Get finds a sandbox ctx's caller may see.
	Get(ctx context.Context, ref string) (*api.Sandbox, error)
	// Agent reaches a sandbox ctx's caller may use, waking it when it is
	// stopped; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
}

var _ Core = (*controller.Controller)(nil)

// Store keeps the previews, and the sandboxes they belong to.
type Store interface {
	store.PreviewStore
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Options configures the subsystem.
type Options struct {
	Core  Core
	Store Store
	// Listen is the preview listener's address (config.PreviewOff or ""
	// when it does not run); Domain the preview hosts' domain.
	Listen, Domain string
	Logger         *slog.Logger
}

// Service serves previews.
type Service struct {
	core           Core
	st             Store
	listen, domain string
	log            *slog.Logger
}

// New returns the subsystem.
func New(o Options) *Service {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: o.Core, st: o.Store, listen: o.Listen, domain: o.Domain, log: log}
}

// previewAddr is the preview listener's address as the URLs show it.
func (s *Service) previewAddr() (string, error) {
	if s.listen == "" || s.listen == config.PreviewOff {
		return "", fmt.Errorf("the daemon's preview listener is not running (see preview_listen in paddock serve --print-config): %w", errdefs.ErrFailedPrecondition)
	}
	return s.listen, nil
}

// previewURLs builds the host form and the path form of a preview URL.
func (s *Service) previewURLs(id string, port int, tok string) (host, pathForm string) {
	addr, _ := s.previewAddr()
	_, lport, _ := net.SplitHostPort(addr)
	hostPart := s.domain
	if lport != "80" {
		hostPart += ":" + lport
	}
	host = fmt.Sprintf("http://%d-%s-%s.%s/", port, id, tok, hostPart)
	lhost, _, _ := net.SplitHostPort(addr)
	if lhost == "" || lhost == "0.0.0.0" || lhost == "::" {
		lhost = "127.0.0.1"
	}
	pathForm = fmt.Sprintf("http://%s/preview/%s/%d/", net.JoinHostPort(lhost, lport), id, port)
	return host, pathForm
}

// Expose makes port of a sandbox reachable at a preview URL with a fresh
// token; exposing a port again replaces (revokes) its earlier token. The
// token is in the answer only: the store keeps its hash.
func (s *Service) Expose(ctx context.Context, ref string, port int) (*api.Preview, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	if _, err := s.previewAddr(); err != nil {
		return nil, err
	}
	rec, err := s.core.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	tok := newPreviewToken()
	p := &store.Preview{SandboxID: rec.ID, Port: port, TokenHash: hashToken(tok)}
	if err := s.st.PutPreview(ctx, p); err != nil {
		return nil, err
	}
	s.log.Info("port exposed", "sandbox", rec.ID, "port", port)
	host, pathForm := s.previewURLs(rec.ID, port, tok)
	return &api.Preview{Port: port, URL: host, PathURL: pathForm, Token: tok, CreatedAt: p.CreatedAt}, nil
}

// Unexpose revokes the token of port; its preview URL answers 404 from now.
func (s *Service) Unexpose(ctx context.Context, ref string, port int) error {
	if err := checkPort(port); err != nil {
		return err
	}
	rec, err := s.core.Get(ctx, ref)
	if err != nil {
		return err
	}
	if err := s.st.DeletePreview(ctx, rec.ID, port); err != nil {
		return err
	}
	s.log.Info("port unexposed", "sandbox", rec.ID, "port", port)
	return nil
}

// List lists a sandbox's exposed ports (without tokens).
func (s *Service) List(ctx context.Context, ref string) ([]api.Preview, error) {
	rec, err := s.core.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	ps, err := s.st.ListPreviews(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	out := make([]api.Preview, 0, len(ps))
	for _, p := range ps {
		out = append(out, api.Preview{Port: p.Port, CreatedAt: p.CreatedAt})
	}
	return out, nil
}

// errNoPreview is the one answer for every way a preview lookup can fail,
// so a caller cannot tell a wrong token from a missing sandbox.
var errNoPreview = errdefs.NotFound("no such preview")

// Check verifies a preview token for port of sandbox id (ids only:
// names are not part of preview URLs). Any mismatch is the same
// ErrNotFound.
func (s *Service) Check(ctx context.Context, id string, port int, tok string) error {
	if !controller.IsID(id) || checkPort(port) != nil || !ValidPreviewToken(tok) {
		return errNoPreview
	}
	rec, err := s.st.GetSandbox(ctx, id)
	if err != nil || rec.State == api.StateDestroyed || rec.State == api.StateDestroying {
		return errNoPreview
	}
	p, err := s.st.GetPreview(ctx, id, port)
	if err != nil {
		return errNoPreview
	}
	if subtle.ConstantTimeCompare(p.TokenHash, hashToken(tok)) != 1 {
		return errNoPreview
	}
	return nil
}

// ParsePreviewHost splits a preview host "{port}-{id}-{token}.{domain}[:p]"
// under domain. ok is false for anything else.
func ParsePreviewHost(host, domain string) (port int, id, tok string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || strings.Contains(label, ".") {
		return 0, "", "", false
	}
	parts := strings.Split(label, "-")
	if len(parts) != 3 {
		return 0, "", "", false
	}
	port, err := strconv.Atoi(parts[0])
	if err != nil || strconv.Itoa(port) != parts[0] || checkPort(port) != nil {
		return 0, "", "", false
	}
	if !controller.IsID(parts[1]) || !ValidPreviewToken(parts[2]) {
		return 0, "", "", false
	}
	return port, parts[1], parts[2], true
}

// PortSession is a sandbox's agent held for one use of a port: the sandbox
// counts as active (never idle) until Done.
type PortSession struct {
	Agent *client.Client
	Done  func()
}

// OpenPort returns the agent to reach ports of sandbox id through, waking
// a stopped sandbox first. Call Done when the request is over.
func (s *Service) OpenPort(ctx context.Context, id string) (*PortSession, error) {
	ag, _, done, err := s.core.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	return &PortSession{Agent: ag, Done: done}, nil
}
