package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/previews"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
)

// previewCookie holds the token of the path form once a browser has
// presented it as a query parameter; it is scoped to that preview's path.
const previewCookie = "paddock_preview_token"

// upstreamHost is the synthetic host of proxied requests: the transport
// pools connections by it, one pool per sandbox port, and the dialer reads
// the target back from it.
const upstreamSuffix = ".sandbox.paddock.internal"

type portSessionKey struct{}

// PreviewHandler serves exposed sandbox ports on the preview listener:
// host form {port}-{id}-{token}.{domain} and path form
// /preview/{id}/{port}/ (token in the X-Paddock-Preview-Token header, the
// paddock_token query parameter or the cookie that parameter sets).
// Every failed lookup is the same 404, so a caller learns nothing about
// which sandboxes exist.
func (s *Server) PreviewHandler(domain string) http.Handler {
	tr := &http.Transport{
		DialContext:           dialSandboxPort,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // long polls and slow apps are the app's business
		DisableCompression:    true,
	}
	rp := &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1, // server-sent events and other streams pass at once
		ErrorLog:      log.New(io.Discard, "", 0),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			msg := "the sandbox's port did not answer"
			var nl *noListenerError
			switch {
			case errors.As(err, &nl):
				msg = nl.msg
			case strings.Contains(err.Error(), noListenerPrefix):
				// The transport may hand a dial error to a request that did
				// not start the dial, without the wrapping.
				msg = err.Error()[strings.Index(err.Error(), noListenerPrefix):]
			case errors.Is(err, context.Canceled):
				return
			}
			// r.URL.Host is the synthetic upstream: it names the sandbox
			// and port, never the token.
			s.log.Debug("preview upstream failed", "upstream", r.URL.Host, "err", err)
			writeJSON(w, http.StatusBadGateway, api.Error{Code: api.CodeUnavailable, Message: msg})
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.servePreview(w, r, domain, rp)
	})
}

// noListenerError is a dial failure whose message is safe and useful to
// show the visitor.
type noListenerError struct{ msg string }

const noListenerPrefix = "nothing is listening on port"

func (e *noListenerError) Error() string { return e.msg }

func dialSandboxPort(ctx context.Context, _, addr string) (net.Conn, error) {
	ps, _ := ctx.Value(portSessionKey{}).(*previews.PortSession)
	host, _, _ := net.SplitHostPort(addr)
	portStr, _, _ := strings.Cut(strings.TrimSuffix(host, upstreamSuffix), ".")
	port, err := strconv.Atoi(strings.TrimPrefix(portStr, "p"))
	if ps == nil || err != nil {
		return nil, errors.New("preview dial without a sandbox")
	}
	conn, err := ps.Agent.DialPort(ctx, port)
	if err != nil {
		msg := fmt.Sprintf("nothing answered on port %d inside the sandbox", port)
		if errors.Is(err, errdefs.ErrUnavailable) {
			msg = fmt.Sprintf(noListenerPrefix+" %d inside the sandbox (start a server there, listening on 127.0.0.1 or 0.0.0.0)", port)
		}
		return nil, &noListenerError{msg: msg}
	}
	return conn, nil
}

func notFoundPreview(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such preview"})
}

func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, domain string, rp *httputil.ReverseProxy) {
	if s.opts.Previews == nil {
		notFoundPreview(w)
		return
	}
	id, port, tok, ok := "", 0, "", false
	if port, id, tok, ok = previews.ParsePreviewHost(r.Host, domain); !ok {
		var redirect bool
		if id, port, tok, redirect, ok = parsePreviewPath(w, r); !ok {
			if !redirect {
				notFoundPreview(w)
			}
			return
		}
	}
	// A preview URL is its own credential (public, or its token): the
	// daemon checks it and reaches the sandbox on its own account.
	ctx := controller.System(r.Context())
	if err := s.opts.Previews.Check(ctx, id, port, tok); err != nil {
		notFoundPreview(w)
		return
	}
	ps, err := s.opts.Previews.OpenPort(ctx, id)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, api.Error{Code: errdefs.Code(err), Message: "the sandbox cannot be reached: " + errhttp.PublicMessage(w, err)})
		return
	}
	defer ps.Done()
	r = r.WithContext(context.WithValue(r.Context(), portSessionKey{}, ps))
	r.URL.Scheme = "http"
	r.URL.Host = "p" + strconv.Itoa(port) + "." + id + upstreamSuffix
	stripToken(r)
	rp.ServeHTTP(w, r)
}

// parsePreviewPath reads /preview/{id}/{port}/rest and its token, and
// rewrites the path to /rest. A token given as a query parameter becomes
// a cookie and the browser is redirected to the URL without it, so the
// token does not linger in the address bar, history or Referer headers.
func parsePreviewPath(w http.ResponseWriter, r *http.Request) (id string, port int, tok string, redirected, ok bool) {
	rest, found := strings.CutPrefix(r.URL.Path, "/preview/")
	if !found {
		return "", 0, "", false, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 {
		return "", 0, "", false, false
	}
	id = parts[0]
	port, err := strconv.Atoi(parts[1])
	if err != nil || strconv.Itoa(port) != parts[1] {
		return "", 0, "", false, false
	}
	prefix := "/preview/" + id + "/" + parts[1] + "/"
	if len(parts) == 2 {
		// Relative links in the app resolve against a directory.
		http.Redirect(w, r, prefix, http.StatusFound)
		return "", 0, "", true, false
	}
	q := r.URL.Query()
	if t := q.Get(api.PreviewTokenParam); t != "" {
		if !previews.ValidPreviewToken(t) {
			return "", 0, "", false, false
		}
		http.SetCookie(w, &http.Cookie{Name: previewCookie, Value: t, Path: prefix, HttpOnly: true, SameSite: http.SameSiteLaxMode})
		q.Del(api.PreviewTokenParam)
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusFound)
		return "", 0, "", true, false
	}
	tok = r.Header.Get(api.PreviewTokenHeader)
	if tok == "" {
		if c, err := r.Cookie(previewCookie); err == nil {
			tok = c.Value
		}
	}
	r.URL.Path = "/" + parts[2]
	r.URL.RawPath = ""
	return id, port, tok, false, true
}

// stripToken keeps the token from reaching the app.
func stripToken(r *http.Request) {
	r.Header.Del(api.PreviewTokenHeader)
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cookies {
		if c.Name != previewCookie {
			r.AddCookie(c)
		}
	}
}
